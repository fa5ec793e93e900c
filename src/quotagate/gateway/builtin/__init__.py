"""Stages the gateway always runs: after every configured and plug-in stage on a request, and
before them on its response (the chain runs responses in reverse)."""
