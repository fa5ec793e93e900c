"""quotagate: Kafka client quotas in front of any Kafka-compatible cluster."""

__version__ = "0.1.0"
