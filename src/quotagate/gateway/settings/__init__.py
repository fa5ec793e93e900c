"""The configuration values the gateway reads: the toolkit plug-ins share, a listener's
configuration, and secrets named in the config."""
