"""A gateway or a broker run inside the calling process, for development and tests: a tansu
broker as a child process, free ports, a gateway on its own loop in a thread."""

from quotagate.gateway.embedded.broker import (
    LOOPBACK,
    EmbeddedBrokerError,
    TansuBroker,
    free_port,
    free_ports,
)

__all__ = ["LOOPBACK", "EmbeddedBrokerError", "TansuBroker", "free_port", "free_ports"]
