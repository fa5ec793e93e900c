"""The quota kinds of a client, and the names Kafka gives their sensors and metrics."""

from __future__ import annotations

import enum


class QuotaType(enum.Enum):
    PRODUCE = "Produce"
    FETCH = "Fetch"
    REQUEST = "Request"
    CONTROLLER_MUTATION = "ControllerMutation"

    @classmethod
    def parse(cls, value: QuotaType | str) -> QuotaType:
        if isinstance(value, QuotaType):
            return value
        aliases = {
            "produce": cls.PRODUCE,
            "producer_byte_rate": cls.PRODUCE,
            "fetch": cls.FETCH,
            "consumer_byte_rate": cls.FETCH,
            "request": cls.REQUEST,
            "request_percentage": cls.REQUEST,
            "controller_mutation": cls.CONTROLLER_MUTATION,
            "controller_mutation_rate": cls.CONTROLLER_MUTATION,
        }
        try:
            return aliases[value.lower()]
        except KeyError:
            raise ValueError(
                f"unknown quota type {value!r}; expected one of {', '.join(sorted(aliases))}"
            ) from None

    @property
    def config_key(self) -> str:
        return _CONFIG_KEYS[self]

    @property
    def metric_name(self) -> str:
        """The name of the quota-carrying metric in the ``<QuotaType>`` group."""
        return _METRIC_NAMES[self]


_CONFIG_KEYS = {
    QuotaType.PRODUCE: "producer_byte_rate",
    QuotaType.FETCH: "consumer_byte_rate",
    QuotaType.REQUEST: "request_percentage",
    QuotaType.CONTROLLER_MUTATION: "controller_mutation_rate",
}
_METRIC_NAMES = {
    QuotaType.PRODUCE: "byte-rate",
    QuotaType.FETCH: "byte-rate",
    QuotaType.REQUEST: "request-time",
    QuotaType.CONTROLLER_MUTATION: "tokens",
}
