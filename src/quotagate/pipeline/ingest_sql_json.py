"""The KIP-673 JSON request-log format (Kafka >= 2.8), parsed by Spark SQL in the JVM.

``from_json`` with explicit schemas, as ``ingest_json`` (the Python reference) reads the
document: every scalar is read as text (its JSON spelling), so that a number is told from
anything else by its spelling, as Python tells it by its type; ``request`` and
``response`` are read as JSON text first and read again with the schema of the API that
needs them. ``recordsSizeInBytes`` is summed wherever it appears under a node, as the
Python parser's recursive walk does, by matching the key in the node's JSON text.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812

from quotagate.pipeline import apis
from quotagate.pipeline.ingest_sql_common import (
    first_error,
    integers,
    named_api_key,
    parsed_struct,
    total,
)
from quotagate.quota import request_rules as rules

CORRUPT: Final = "_corrupt_record"
_DOCUMENT: Final = (
    "requestHeader struct<requestApiKey: string, apiKey: string, requestApiVersion: string, "
    "apiVersion: string, clientId: string>, request string, response string, "
    "connection string, principal string, listener string, totalTimeMs string, "
    f"localTimeMs string, throttleTimeMs string, {CORRUPT} string"
)
_PRODUCE: Final = (
    "acks string, topicData array<struct<name: string, topicId: string, partitionData: string>>"
)
_FETCH: Final = "replicaState string, replicaId string"
_MUTATION: Final = (
    "topics array<struct<name: string, numPartitions: string, assignments: array<string>>>, "
    "topicNames array<string>, validateOnly string"
)
_RESULT: Final = "array<struct<name: string, errorCode: string, numPartitions: string>>"
_RESULTS: Final = f"topics {_RESULT}, responses {_RESULT}, results {_RESULT}"
_INTEGER: Final = r"^-?\d+$"
_NUMBER: Final = r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$"
# An integer value of the key (Spark writes JSON text compactly: no space after the colon).
_RECORDS_SIZE: Final = r"\"recordsSizeInBytes\":(-?\d+)(?![\d.eE])"


def _integer(text: Column) -> Column:
    return F.when(text.rlike(_INTEGER), text.cast("long"))


def _number(text: Column) -> Column:
    return F.when(text.rlike(_NUMBER), text.cast("double"))


def _object(text: Column, schema: str) -> Column:
    """``text`` read with ``schema`` if it is a JSON object (the parser's isinstance dict)."""
    return F.when(text.startswith("{"), F.from_json(text, schema))


def _sizes(text: Column) -> Column:
    return total(
        integers(F.regexp_extract_all(F.coalesce(text, F.lit("")), F.lit(_RECORDS_SIZE), 1))
    )


def _nonempty(text: Column) -> Column:
    return F.when(text.isNotNull() & (text != ""), text)


def parse_json(lines: DataFrame, body: str, into: str) -> DataFrame:
    """``lines`` with the parsed struct of the KIP-673 body ``body`` added as ``into`` (null
    where ``body`` is null; see ``ingest_sql_common``). Built in steps, each reading the
    columns of the one before, so that no document is read twice."""
    lines = lines.withColumn(
        "_j_doc", F.from_json(F.col(body), _DOCUMENT, {"columnNameOfCorruptRecord": CORRUPT})
    )
    document = F.col("_j_doc")
    header = document["requestHeader"]
    lines = lines.withColumns(
        {
            "_j_api_key": F.coalesce(
                _integer(header["requestApiKey"]),
                _integer(header["apiKey"]),
                named_api_key(header["apiKey"], apis.API_NAMES),
            ),
            "_j_api_version": F.coalesce(
                _integer(header["requestApiVersion"]), _integer(header["apiVersion"])
            ),
            **{
                f"_j_{name}": _number(document[name])
                for name in ("totalTimeMs", "localTimeMs", "throttleTimeMs")
            },
        }
    )
    api_key = F.col("_j_api_key")
    request, response = document["request"], document["response"]
    lines = lines.withColumns(
        {
            "_j_produce": _object(F.when(api_key == rules.PRODUCE, request), _PRODUCE),
            "_j_fetch": _object(F.when(api_key == rules.FETCH, request), _FETCH),
            "_j_mutation": _object(F.when(api_key.isin(*rules.MUTATION_APIS), request), _MUTATION),
        }
    )
    produce, fetch, mutation = F.col("_j_produce"), F.col("_j_fetch"), F.col("_j_mutation")
    state = fetch["replicaState"]
    lines = lines.withColumns(
        {
            "_j_topics": F.transform(
                F.filter(produce["topicData"], lambda t: t.isNotNull()),
                lambda t: F.struct(
                    F.coalesce(_nonempty(t["name"]), _nonempty(t["topicId"]), F.lit("")).alias(
                        "topic"
                    ),
                    _sizes(t["partitionData"]).alias("bytes"),
                ),
            ),
            "_j_replica": _integer(
                F.when(state.startswith("{"), F.get_json_object(state, "$.replicaId")).otherwise(
                    fetch["replicaId"]
                )
            ),
            "_j_results": _object(F.when(mutation.isNotNull(), response), _RESULTS),
        }
    )
    results = F.col("_j_results")
    chosen = (
        F.when(F.size(results["topics"]) > 0, results["topics"])
        .when(F.size(results["responses"]) > 0, results["responses"])
        .otherwise(results["results"])
    )
    # Name and partitions of the results with error code 0; null: the response does not say.
    lines = lines.withColumn(
        "_j_ok", F.filter(chosen, lambda r: F.coalesce(_integer(r["errorCode"]), F.lit(0)) == 0)
    )
    error = first_error(
        (document[CORRUPT].isNotNull(), F.lit("invalid JSON")),
        (header.isNull(), F.lit("missing 'requestHeader' object")),
        (api_key.isNull(), F.lit("requestHeader has no requestApiKey")),
        (F.col("_j_api_version").isNull(), F.lit("requestHeader has no requestApiVersion")),
        (document["principal"].isNull(), F.lit("missing string 'principal'")),
        (F.col("_j_totalTimeMs").isNull(), F.lit("missing number 'totalTimeMs'")),
        (F.col("_j_localTimeMs").isNull(), F.lit("missing number 'localTimeMs'")),
        (F.col("_j_throttleTimeMs").isNull(), F.lit("missing number 'throttleTimeMs'")),
    )
    topics = F.col("_j_topics")
    parsed = parsed_struct(
        api_key=api_key,
        api_version=F.col("_j_api_version"),
        client_id=F.coalesce(header["clientId"], F.lit("")),
        principal=document["principal"],
        listener=F.coalesce(document["listener"], F.lit("")),
        connection=F.coalesce(document["connection"], F.lit("")),
        total_ms=F.col("_j_totalTimeMs"),
        local_ms=F.col("_j_localTimeMs"),
        throttle_ms=F.col("_j_throttleTimeMs").cast("long"),
        request_bytes=total(F.transform(topics, lambda t: t["bytes"])),
        response_bytes=F.when(api_key == rules.FETCH, _sizes(response)),
        topics=topics,
        partition_mutations=_mutations(api_key, mutation, F.col("_j_ok")),
        acks=_integer(produce["acks"]),
        follower=F.coalesce(F.col("_j_replica") >= 0, F.lit(False)),
        validate_only=F.coalesce(mutation["validateOnly"] == "true", F.lit(False)),
        error=error,
    )
    lines = lines.withColumn(into, F.when(F.col(body).isNotNull(), parsed))
    return lines.drop(*(c for c in lines.columns if c.startswith("_j_")))


def _mutations(api_key: Column, request: Column, ok: Column) -> Column:
    """As ``ingest_json._mutations``: partitions created by the topics that succeeded for
    CreateTopics (the response's count, else the request's; -1 counts 1), one per
    successful topic for DeleteTopics and CreatePartitions. ``ok``: the results with error
    code 0, null when the response does not say."""

    def listed(name: Column) -> Column:
        return ok.isNull() | F.exists(ok, lambda r: r["name"].eqNullSafe(name))

    def created(topic: Column) -> Column:
        matches = F.filter(ok, lambda r: r["name"].eqNullSafe(topic["name"]))
        known = F.coalesce(
            _integer(F.try_element_at(matches, F.lit(-1))["numPartitions"]), F.lit(0)
        )
        from_response = F.when(
            ok.isNotNull() & (F.size(ok) > 0) & (F.size(matches) > 0),
            F.when(known == 0, -1).otherwise(known),
        ).otherwise(-1)
        assigned = F.coalesce(F.size(topic["assignments"]), F.lit(0))
        from_request = F.when(assigned > 0, assigned).otherwise(
            F.coalesce(_integer(topic["numPartitions"]), F.lit(-1))
        )
        count = F.when(from_response <= 0, from_request).otherwise(from_response)
        return F.greatest(count, F.lit(1)).cast("long")

    topics = F.coalesce(request["topics"], F.array())
    create = total(
        F.transform(
            topics, lambda t: F.when(t.isNotNull() & listed(t["name"]), created(t)).otherwise(0)
        )
    )
    names = F.when(F.size(request["topicNames"]) > 0, request["topicNames"]).otherwise(
        F.transform(F.filter(topics, lambda t: t.isNotNull()), lambda t: t["name"])
    )
    others = F.size(F.filter(names, listed)).cast("long")
    return (
        F.when(request.isNull(), None)
        .when(api_key == rules.CREATE_TOPICS, create)
        .otherwise(others)
    )
