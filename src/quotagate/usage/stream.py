"""Usage events as Kafka records: the ``[usage] sink = "kafka"`` encoding, version 1.

One record per event. The value is a JSON object with the columns of
:data:`quotagate.usage.schema.USAGE_SCHEMA` under their own names, ``topics`` as a list of
``{"topic", "bytes"}`` objects, and ``"v": 1``; ``usage-event-v1.schema.json`` beside this
module is its JSON Schema, the contract for readers other than the pipeline. JSON rather
than Avro: Spark's ``from_json`` and every Kafka tool read it without a schema registry or
one more connector jar, and a reader that finds a ``v`` it does not know can skip the record
instead of misreading it. A change that drops or retypes a field is version 2; new optional
fields stay version 1 (readers ignore names they do not know).

The key is the event's tenant, else its principal: every sharing key of the user and
(user, client id) levels, and every tenant, lies within one key, so its events stay in
order in one partition. A client-id-only default shared across users spans keys.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Final

import orjson

from quotagate.usage.schema import USAGE_COLUMNS

SCHEMA_VERSION: Final = 1
VERSION_FIELD: Final = "v"
SCHEMA_FILE: Final = "usage-event-v1.schema.json"

_TOPICS: Final = USAGE_COLUMNS.index("topics")
_PRINCIPAL: Final = USAGE_COLUMNS.index("principal")
_TENANT: Final = USAGE_COLUMNS.index("tenant")


def record(row: tuple[Any, ...]) -> tuple[bytes, bytes]:
    """(key, value) of one event given as a row in :data:`USAGE_COLUMNS` order."""
    fields: dict[str, Any] = dict(zip(USAGE_COLUMNS, row, strict=True))
    fields["topics"] = [{"topic": t, "bytes": b} for t, b in row[_TOPICS]]
    fields[VERSION_FIELD] = SCHEMA_VERSION
    key = row[_TENANT] or row[_PRINCIPAL]
    # orjson: compact UTF-8, as json.dumps(separators=(",", ":"), ensure_ascii=False) writes it,
    # at a fraction of the CPU the gateway's process spends per event.
    return key.encode(), orjson.dumps(fields)


def json_schema() -> dict[str, Any]:
    """The documented schema of version 1 (``usage-event-v1.schema.json``)."""
    text = resources.files("quotagate.usage").joinpath(SCHEMA_FILE).read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
