"""The text request-log format of Kafka before 2.8.

``RequestHeader(apiKey=…, apiVersion=…, clientId=…, correlationId=…) -- {request},response:
{response} from connection local-peer-index;totalTime:…,requestQueueTime:…,localTime:…,
remoteTime:…,throttleTime:…,…,securityProtocol:…,principal:…,listener:…,clientInformation:…``

Request and response bodies are Java ``toString`` output whose shape changed between
releases (Struct style ``num_partitions=3`` and generated-data style ``numPartitions=3``),
so only the few facts the pipeline needs are picked out, tolerant of both.
"""

from __future__ import annotations

import re
from typing import Final

from quotagate.pipeline import apis
from quotagate.pipeline.ingest.log4j import LineError, ParsedRequest
from quotagate.quota import request_rules as rules

_HEADER: Final = re.compile(
    r"^RequestHeader\(apiKey=(?P<key>\w+), apiVersion=(?P<version>-?\d+), "
    r"clientId=(?P<client>.*?), correlationId=-?\d+(?:, headerVersion=\d+)?\) -- "
)
_CONNECTION: Final = " from connection "
_RESPONSE: Final = re.compile(r",response[:=]")
_METRIC: Final = {
    name: re.compile(rf"(?:^|,){name}:(?P<v>-?[\d.]+)(?=,|$)")
    for name in ("totalTime", "localTime", "throttleTime")
}
_PRINCIPAL: Final = re.compile(
    r",principal:(?P<v>.*?),listener:(?P<l>.*?)(?:,clientInformation:|,|$)"
)
# TRACE-level produce requests list partitionSizes=[topic-partition=bytes,...].
_PARTITION_SIZE: Final = re.compile(r"([^\[\],={}\s]+)-(\d+)=(\d+)")
_RECORDS_SIZE: Final = re.compile(r"Records\(size=(\d+)")
_ACKS: Final = re.compile(r"\backs=(-?\d+)")
_REPLICA_ID: Final = re.compile(r"\breplicaId=(-?\d+)")
_NUM_PARTITIONS: Final = re.compile(r"(?:numPartitions|num_partitions)=(-?\d+)")
_ERROR_CODE: Final = re.compile(r"(?:errorCode|error_code)=(-?\d+)")
_TOPIC_NAME: Final = re.compile(r"(?:\bname|\btopic)=['\"]?([^,'\")\s]+)")


def parse_text_request(body: str) -> ParsedRequest:
    header = _HEADER.match(body)
    if header is None:
        raise LineError("no 'RequestHeader(apiKey=…, apiVersion=…, clientId=…, …) -- ' header")
    api_key = apis.API_NAMES.get(header["key"])
    if api_key is None:
        raise LineError(f"unknown apiKey {header['key']}")
    at = body.rfind(_CONNECTION)
    if at < 0:
        raise LineError("no ' from connection ' section")
    connection, _, metrics = body[at + len(_CONNECTION) :].partition(";")
    principal = _PRINCIPAL.search(metrics)
    if principal is None:
        raise LineError("no principal/listener in the metrics section")
    exchange = body[header.end() : at]
    split = _RESPONSE.search(exchange)
    request = exchange[: split.start()] if split else exchange
    response = exchange[split.end() :] if split else ""
    parsed = ParsedRequest(
        api_key=api_key,
        api_version=int(header["version"]),
        client_id=header["client"],
        principal=principal["v"],
        listener=principal["l"],
        connection=connection,
        total_time_ms=_metric(metrics, "totalTime"),
        local_time_ms=_metric(metrics, "localTime"),
        throttle_time_ms=int(_metric(metrics, "throttleTime")),
    )
    if api_key == rules.PRODUCE:
        parsed.topics = _produce_topics(request)
        parsed.request_bytes = sum(size for _, size in parsed.topics)
        acks = _ACKS.search(request)
        parsed.acks = int(acks.group(1)) if acks else None
    elif api_key == rules.FETCH:
        parsed.response_bytes = sum(int(s) for s in _RECORDS_SIZE.findall(response))
        replica = _REPLICA_ID.search(request)
        parsed.follower = replica is not None and int(replica.group(1)) >= 0
    elif api_key in rules.MUTATION_APIS:
        parsed.partition_mutations = _mutations(api_key, request, response)
        parsed.validate_only = "validateOnly=true" in request
    return parsed


def _metric(metrics: str, name: str) -> float:
    found = _METRIC[name].search(metrics)
    if found is None:
        raise LineError(f"no {name} in the metrics section")
    return float(found["v"])


def _produce_topics(request: str) -> list[tuple[str, int]]:
    """Bytes per topic from partitionSizes (TRACE only; DEBUG logs just numPartitions)."""
    start = request.find("partitionSizes=")
    if start < 0:
        return []
    totals: dict[str, int] = {}
    for topic, _partition, size in _PARTITION_SIZE.findall(request[start + 15 :]):
        totals[topic] = totals.get(topic, 0) + int(size)
    return list(totals.items())


def _mutations(api_key: int, request: str, response: str) -> int:
    """As in the JSON format: partitions for CreateTopics, one per topic otherwise, and
    only for topics whose result carries error code 0 (when the response says)."""
    errors = [int(e) for e in _ERROR_CODE.findall(response)]
    if api_key == rules.CREATE_TOPICS:
        counts = [max(int(n), 1) for n in _NUM_PARTITIONS.findall(request)]
        if len(errors) == len(counts):
            return sum(c for c, e in zip(counts, errors, strict=True) if e == 0)
        return sum(counts)
    if errors:
        return sum(1 for e in errors if e == 0)
    return len(_TOPIC_NAME.findall(request))
