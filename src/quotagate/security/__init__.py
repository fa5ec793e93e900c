"""Security that needs no socket: who a client is, from what its TLS certificate or its
SASL exchange proves.

Pure (bytes and strings in, names out), so every rule can be tested with Kafka's own
vectors and no network. The gateway calls it from ``gateway/auth``.
"""
