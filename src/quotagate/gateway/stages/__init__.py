"""The stage API: a request and its response as stages see them (:mod:`.exchange`), the stage
and plug-in interfaces, and the chain that runs the stages in order."""
