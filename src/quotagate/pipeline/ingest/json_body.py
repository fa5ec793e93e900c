"""The KIP-673 request-log format (Kafka >= 2.8): one JSON object per request.

``requestHeader`` carries the api key/version and client id; ``request``/``response`` are
the generated JSON converters' output with records replaced by ``recordsSizeInBytes``
(DEBUG level), which is where produce and fetch bytes come from.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from quotagate.pipeline import apis
from quotagate.pipeline.ingest.log4j import ForwardedRequestError, LineError, ParsedRequest
from quotagate.quota import request_rules as rules

_SIZE = "recordsSizeInBytes"


def parse_json_request(body: str) -> ParsedRequest:
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise LineError(f"invalid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise LineError("JSON request log entry is not an object")
    if document.get("isForwarded") is True:
        raise ForwardedRequestError
    header = _object(document, "requestHeader")
    request = document.get("request")
    response = document.get("response")
    api_key = _int(header, "requestApiKey", "apiKey")
    parsed = ParsedRequest(
        api_key=api_key,
        api_version=_int(header, "requestApiVersion", "apiVersion"),
        client_id=str(header.get("clientId") or ""),
        principal=_str(document, "principal"),
        listener=str(document.get("listener") or ""),
        connection=str(document.get("connection") or ""),
        total_time_ms=_float(document, "totalTimeMs"),
        local_time_ms=_float(document, "localTimeMs"),
        throttle_time_ms=int(_float(document, "throttleTimeMs")),
    )
    if api_key == rules.PRODUCE and isinstance(request, dict):
        parsed.topics = _produce_topics(request)
        parsed.request_bytes = sum(size for _, size in parsed.topics)
        acks = request.get("acks")
        parsed.acks = acks if _is_int(acks) else None
    elif api_key == rules.FETCH:
        parsed.response_bytes = sum(_sizes(response))
        parsed.follower = _is_follower(request)
    elif api_key in rules.MUTATION_APIS and isinstance(request, dict):
        parsed.partition_mutations = _mutations(api_key, request, response)
        parsed.validate_only = request.get("validateOnly") is True
    return parsed


def _is_follower(request: Any) -> bool:
    """A fetch from a replica: ``replicaId`` (``replicaState.replicaId`` from v15) >= 0."""
    if not isinstance(request, dict):
        return False
    state = request.get("replicaState")
    replica = state.get("replicaId") if isinstance(state, dict) else request.get("replicaId")
    return isinstance(replica, int) and replica >= 0


def _produce_topics(request: dict[str, Any]) -> list[tuple[str, int]]:
    topics: list[tuple[str, int]] = []
    for topic in request.get("topicData") or []:
        if isinstance(topic, dict):
            # v13+ names topics by id only.
            name = str(topic.get("name") or topic.get("topicId") or "")
            topics.append((name, sum(_sizes(topic.get("partitionData")))))
    return topics


def _mutations(api_key: int, request: dict[str, Any], response: Any) -> int:
    """Partitions created or deleted by the topics that succeeded (spec §5.3).

    CreateTopics: the response's numPartitions (v5+), else the request's assignments or
    numPartitions; -1 (the broker's default) counts as 1. DeleteTopics and
    CreatePartitions logs do not say how many partitions a topic had or gained, so each
    successful topic counts as 1: a lower bound.
    """
    ok = _succeeded(response)
    if api_key == rules.CREATE_TOPICS:
        total = 0
        for topic in request.get("topics") or []:
            if not isinstance(topic, dict) or (ok is not None and topic.get("name") not in ok):
                continue
            created = ok.get(topic.get("name"), -1) if ok else -1
            if created <= 0:
                assignments = topic.get("assignments") or []
                created = len(assignments) or int(topic.get("numPartitions", -1))
            total += max(created, 1)
        return total
    names = request.get("topicNames") or [
        t.get("name") for t in request.get("topics") or [] if isinstance(t, dict)
    ]
    return sum(1 for name in names if ok is None or name in ok)


def _succeeded(response: Any) -> dict[Any, int] | None:
    """Topic name -> partitions (-1 if unknown) of results with errorCode 0."""
    if not isinstance(response, dict):
        return None
    results = response.get("topics") or response.get("responses") or response.get("results")
    if not isinstance(results, list):
        return None
    return {
        r.get("name"): int(r.get("numPartitions", -1) or -1)
        for r in results
        if isinstance(r, dict) and int(r.get("errorCode", 0) or 0) == 0
    }


def _sizes(node: Any) -> Iterator[int]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == _SIZE and isinstance(value, int):
                yield value
            else:
                yield from _sizes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _sizes(item)


def _object(document: dict[str, Any], key: str) -> dict[str, Any]:
    value = document.get(key)
    if not isinstance(value, dict):
        raise LineError(f"missing {key!r} object")
    return value


def _int(header: dict[str, Any], *keys: str) -> int:
    for key in keys:
        value = header.get(key)
        if isinstance(value, int) and _is_int(value):
            return value
        if isinstance(value, str) and key == "apiKey":
            known = apis.API_NAMES.get(value)
            if known is not None:
                return known
    raise LineError(f"requestHeader has no {keys[0]}")


def _float(document: dict[str, Any], key: str) -> float:
    value = document.get(key)
    if not isinstance(value, int | float):
        raise LineError(f"missing number {key!r}")
    return float(value)


def _str(document: dict[str, Any], key: str) -> str:
    value = document.get(key)
    if not isinstance(value, str):
        raise LineError(f"missing string {key!r}")
    return value


def _is_int(value: Any) -> bool:
    """A JSON integer (``true`` is a bool to JSON, though an int to Python)."""
    return isinstance(value, int) and not isinstance(value, bool)
