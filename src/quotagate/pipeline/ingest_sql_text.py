"""The text request-log format of Kafka before 2.8, parsed by Spark SQL in the JVM.

The same facts, found by the same regular expressions, checked in the same order as
``ingest_text`` (the Python parser, which stays the reference the tests compare with):
the first check that fails names the line's error.
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

_HEADER: Final = (
    r"^RequestHeader\(apiKey=(\w+), apiVersion=(-?\d+), "
    r"clientId=(.*?), correlationId=-?\d+(?:, headerVersion=\d+)?\) -- "
)
_NO_HEADER: Final = "no 'RequestHeader(apiKey=…, apiVersion=…, clientId=…, …) -- ' header"
_CONNECTION: Final = " from connection "
_LAST_CONNECTION: Final = r"^(.*) from connection (.*)$"  # greedy: the last one, as rfind
_EXCHANGE: Final = r"^(.*?),response[:=](.*)$"  # lazy: the first ``,response``
_PRINCIPAL: Final = r",principal:(.*?),listener:(.*?)(?:,clientInformation:|,|$)"
_PARTITION_SIZE: Final = r"([^\[\],={}\s]+)-(\d+)=(\d+)"
_RECORDS_SIZE: Final = r"Records\(size=(\d+)"
_ACKS: Final = r"\backs=(-?\d+)"
_REPLICA_ID: Final = r"\breplicaId=(-?\d+)"
_NUM_PARTITIONS: Final = r"(?:numPartitions|num_partitions)=(-?\d+)"
_ERROR_CODE: Final = r"(?:errorCode|error_code)=(-?\d+)"
_TOPIC_NAME: Final = r"(?:\bname|\btopic)=['\"]?([^,'\")\s]+)"


def _metric(metrics: Column, name: str) -> Column:
    found = F.regexp_extract(metrics, rf"(?:^|,){name}:(-?[\d.]+)(?=,|$)", 1)
    return F.when(found != "", found.cast("double"))


def parse_text(lines: DataFrame, body: str, into: str) -> DataFrame:
    """``lines`` with the parsed struct of the text-format body ``body`` added as ``into``
    (null where ``body`` is null; see ``ingest_sql_common``). Built in steps, each reading
    the columns of the one before, so that no regular expression runs twice on a line."""
    text = F.col(body)
    lines = lines.withColumns(
        {
            "_t_header": F.regexp_extract(text, _HEADER, 0),
            "_t_key": F.regexp_extract(text, _HEADER, 1),
            "_t_version": F.regexp_extract(text, _HEADER, 2),
            "_t_client": F.regexp_extract(text, _HEADER, 3),
            "_t_before": F.regexp_extract(text, _LAST_CONNECTION, 1),
            "_t_rest": F.regexp_extract(text, _LAST_CONNECTION, 2),
        }
    )
    header, rest = F.col("_t_header"), F.col("_t_rest")
    semicolon = F.instr(rest, ";")
    header_end, at = F.length(header), F.length(F.col("_t_before"))
    lines = lines.withColumns(
        {
            "_t_api_key": named_api_key(F.col("_t_key"), apis.API_NAMES),
            "_t_metrics": F.when(
                semicolon > 0, rest.substr(semicolon + 1, F.length(rest) + 1)
            ).otherwise(F.lit("")),
            "_t_exchange": text.substr(header_end + 1, at - header_end),
        }
    )
    metrics, exchange = F.col("_t_metrics"), F.col("_t_exchange")
    lines = lines.withColumns(
        {
            "_t_principal": F.regexp_extract(metrics, _PRINCIPAL, 1),
            "_t_listener": F.regexp_extract(metrics, _PRINCIPAL, 2),
            "_t_has_principal": metrics.rlike(_PRINCIPAL),
            "_t_request": F.when(
                exchange.rlike(_EXCHANGE), F.regexp_extract(exchange, _EXCHANGE, 1)
            ).otherwise(exchange),
            "_t_response": F.regexp_extract(exchange, _EXCHANGE, 2),
            **{f"_t_{m}": _metric(metrics, m) for m in ("totalTime", "localTime", "throttleTime")},
        }
    )
    api_key, request, response = F.col("_t_api_key"), F.col("_t_request"), F.col("_t_response")
    produce = api_key == rules.PRODUCE
    lines = lines.withColumns(
        {
            "_t_topics": F.when(produce, _produce_topics(request)),
            "_t_acks": F.when(produce, F.regexp_extract(request, _ACKS, 1)),
            "_t_replica": F.when(api_key == rules.FETCH, F.regexp_extract(request, _REPLICA_ID, 1)),
        }
    )
    error = first_error(
        (header == "", F.lit(_NO_HEADER)),
        (api_key.isNull(), F.concat(F.lit("unknown apiKey "), F.col("_t_key"))),
        (F.instr(text, _CONNECTION) == 0, F.lit("no ' from connection ' section")),
        (~F.col("_t_has_principal"), F.lit("no principal/listener in the metrics section")),
        (F.col("_t_totalTime").isNull(), F.lit("no totalTime in the metrics section")),
        (F.col("_t_localTime").isNull(), F.lit("no localTime in the metrics section")),
        (F.col("_t_throttleTime").isNull(), F.lit("no throttleTime in the metrics section")),
    )
    mutation = api_key.isin(*rules.MUTATION_APIS)
    topics, acks, replica = F.col("_t_topics"), F.col("_t_acks"), F.col("_t_replica")
    parsed = parsed_struct(
        api_key=api_key,
        api_version=F.when(header != "", F.col("_t_version").cast("long")),
        client_id=F.col("_t_client"),
        principal=F.col("_t_principal"),
        listener=F.col("_t_listener"),
        connection=F.substring_index(rest, ";", 1),
        total_ms=F.col("_t_totalTime"),
        local_ms=F.col("_t_localTime"),
        throttle_ms=F.col("_t_throttleTime").cast("long"),
        request_bytes=total(F.transform(topics, lambda t: t["bytes"])),
        response_bytes=F.when(
            api_key == rules.FETCH,
            total(integers(F.regexp_extract_all(response, F.lit(_RECORDS_SIZE), 1))),
        ),
        topics=topics,
        partition_mutations=F.when(mutation, _mutations(api_key, request, response)),
        acks=F.when(acks != "", acks.cast("long")),
        follower=F.coalesce(F.when(replica != "", replica.cast("long") >= 0), F.lit(False)),
        validate_only=mutation & (F.instr(request, "validateOnly=true") > 0),
        error=error,
    )
    lines = lines.withColumn(into, F.when(text.isNotNull(), parsed))
    return lines.drop(*(c for c in lines.columns if c.startswith("_t_")))


def _produce_topics(request: Column) -> Column:
    """Bytes per topic from partitionSizes (TRACE only), topics in order of first mention."""
    start = F.instr(request, "partitionSizes=")
    sizes_text = F.when(start > 0, request.substr(start + 15, F.length(request) + 1))
    sizes_text = F.coalesce(sizes_text, F.lit(""))
    names = F.regexp_extract_all(sizes_text, F.lit(_PARTITION_SIZE), 1)
    sizes = integers(F.regexp_extract_all(sizes_text, F.lit(_PARTITION_SIZE), 3))
    sized = F.arrays_zip(names.alias("topic"), sizes.alias("bytes"))
    return F.transform(
        F.array_distinct(names),
        lambda name: F.struct(
            name.alias("topic"),
            total(
                F.transform(F.filter(sized, lambda s: s["topic"] == name), lambda s: s["bytes"])
            ).alias("bytes"),
        ),
    )


def _mutations(api_key: Column, request: Column, response: Column) -> Column:
    """Partitions for CreateTopics, one per topic otherwise, only for topics whose result
    carries error code 0 (when the response says), as ``ingest_text._mutations``."""
    errors = integers(F.regexp_extract_all(response, F.lit(_ERROR_CODE), 1))
    counts = F.transform(
        integers(F.regexp_extract_all(request, F.lit(_NUM_PARTITIONS), 1)),
        lambda n: F.greatest(n, F.lit(1)),
    )
    succeeded = F.zip_with(counts, errors, lambda c, e: F.when(e == 0, c).otherwise(0))
    created = F.when(F.size(errors) == F.size(counts), total(succeeded)).otherwise(total(counts))
    named = F.size(F.regexp_extract_all(request, F.lit(_TOPIC_NAME), 1))
    per_topic = F.when(F.size(errors) > 0, F.size(F.filter(errors, lambda e: e == 0)))
    return F.when(api_key == rules.CREATE_TOPICS, created).otherwise(
        F.coalesce(per_topic, named).cast("long")
    )
