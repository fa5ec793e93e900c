"""quotagate: Kafka client quotas in front of any Kafka-compatible cluster."""

from quotagate._compiled import COMPILED

__version__ = "0.1.0"
__all__ = ["COMPILED", "__version__"]
