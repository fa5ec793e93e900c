"""The gateway as a client of its upstream: everything that opens, secures and re-authenticates
an upstream connection (:func:`~quotagate.gateway.upstream.channel.open_secured`, TLS then
SASL, for every path), the client links, discovery and the upstream's brokers."""
