"""One chunk of synthetic usage events, drawn from a ``Population``.

Chunk ``i`` of seed ``s`` is always the same events, whoever draws it: the Spark job and
the tests both call ``event_chunk``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from quotagate.pipeline.generate.population import ADMIN, CONSUMER, PRODUCER, Population
from quotagate.quota import STRICT_SINCE_VERSION
from quotagate.quota import request_rules as rules
from quotagate.usage.schema import TOPIC_BYTES_TYPE, USAGE_SCHEMA

# (api_key, probability) per role; the rest of a role's traffic is Metadata etc.
_API_MIX: dict[int, tuple[list[int], list[float]]] = {
    PRODUCER: ([rules.PRODUCE, 3, 18, 22], [0.9, 0.06, 0.02, 0.02]),
    CONSUMER: ([rules.FETCH, 8, 12, 3, 2], [0.78, 0.08, 0.1, 0.02, 0.02]),
    ADMIN: (
        [rules.CREATE_TOPICS, rules.DELETE_TOPICS, rules.CREATE_PARTITIONS, 3, 32],
        [0.45, 0.15, 0.1, 0.2, 0.1],
    ),
}
_MUTATION_SIZES: dict[int, list[int]] = {
    rules.CREATE_TOPICS: [1, 3, 6, 12, 24, 50],
    rules.DELETE_TOPICS: [1, 3, 6, 12],
    rules.CREATE_PARTITIONS: [1, 2, 4, 8],
}


def event_chunk(pop: Population, seed: int, chunk: int, count: int) -> pa.RecordBatch:
    rng = np.random.default_rng([seed, chunk])
    client = rng.choice(pop.size, size=count, p=pop.weight)
    ts_ms = _timestamps(pop, rng, client)
    role = pop.role[client]
    api_key = _api_keys(rng, role)
    api_version = _api_versions(pop, api_key, client)
    request_bytes, response_bytes = _sizes(pop, rng, client, api_key)
    mutations = _mutations(rng, api_key)
    gateway_us = np.rint(rng.lognormal(np.log(120.0), 0.6, count)).astype(np.int64)
    upstream_us = np.where(
        (api_key == rules.FETCH) | (rng.random(count) < 0.3),
        0,
        np.rint(rng.lognormal(np.log(600.0), 0.9, count)),
    ).astype(np.int64)
    columns: dict[str, pa.Array] = {
        "ts_ms": pa.array(ts_ms, pa.int64()),
        "gateway_id": _pick(pop.gateways, client % len(pop.gateways)),
        "listener": _pick(pop.listeners, (client // 3) % len(pop.listeners)),
        "principal": _pick(pop.principals, client),
        "client_id": _pick(pop.client_ids, client),
        "client_host": _pick(pop.hosts, client),
        "api_key": pa.array(api_key, pa.int16()),
        "api_version": pa.array(api_version, pa.int16()),
        "request_bytes": pa.array(request_bytes, pa.int32()),
        "response_bytes": pa.array(response_bytes, pa.int32()),
        "topics": _topics(pop, rng, client, api_key, request_bytes),
        "partition_mutations": pa.array(mutations, pa.int32()),
        # Producers wait for the leader (acks=1); nothing else carries acks.
        "acks": pa.array(np.ones(count, np.int8), pa.int8(), mask=api_key != rules.PRODUCE),
        "follower": pa.array(np.zeros(count, bool), pa.bool_()),
        "validate_only": pa.array(np.zeros(count, bool), pa.bool_()),
        "gateway_time_us": pa.array(gateway_us, pa.int64()),
        "upstream_time_us": pa.array(upstream_us, pa.int64()),
        "throttle_ms": pa.array(np.zeros(count, np.int32), pa.int32()),
        "throttle_cause": pa.array([""] * count, pa.string()),
        "error_code": pa.array(np.zeros(count, np.int16), pa.int16()),
        "tenant": pa.array([""] * count, pa.string()),
        "shadow_throttle_ms": pa.nulls(count, pa.int32()),
    }
    return pa.RecordBatch.from_arrays(
        [columns[name] for name in USAGE_SCHEMA.names], schema=USAGE_SCHEMA
    )


def _timestamps(
    pop: Population, rng: np.random.Generator, client: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    count = len(client)
    # Outside bursts, time follows the daily cycle (inverse-CDF sampling).
    offset_s = np.interp(rng.random(count), pop.cycle_cdf_p, pop.cycle_cdf_s)
    in_burst = rng.random(count) < pop.burst_fraction[client]
    which = rng.integers(0, pop.burst_start_s.shape[1], count)
    burst_offset = (
        pop.burst_start_s[client, which] + rng.random(count) * pop.burst_len_s[client, which]
    )
    offset_s = np.where(in_burst, burst_offset, offset_s)
    offset_ms = np.minimum(np.floor(offset_s * 1000.0), pop.duration_s * 1000 - 1)
    return (pop.start_ms + offset_ms).astype(np.int64)


def _api_keys(rng: np.random.Generator, role: npt.NDArray[np.int8]) -> npt.NDArray[np.int64]:
    out = np.empty(len(role), np.int64)
    for r, (keys, probs) in _API_MIX.items():
        mask = role == r
        out[mask] = rng.choice(keys, size=int(mask.sum()), p=probs)
    return out


def _api_versions(
    pop: Population, api_key: npt.NDArray[np.int64], client: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    version = np.where(api_key == rules.PRODUCE, 9, np.where(api_key == rules.FETCH, 13, 4))
    strict = pop.strict_admin[client]
    for key, since in STRICT_SINCE_VERSION.items():
        mask = api_key == key
        version = np.where(mask, np.where(strict, since + 1, since - 1), version)
    return version.astype(np.int64)


def _sizes(
    pop: Population,
    rng: np.random.Generator,
    client: npt.NDArray[np.int64],
    api_key: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    count = len(client)
    payload = np.clip(rng.lognormal(pop.size_log_mean[client], 0.6), 64, 4_000_000)
    small_req = rng.integers(40, 300, count)
    small_resp = rng.integers(30, 2000, count)
    request = np.where(api_key == rules.PRODUCE, payload + 80, small_req)
    response = np.where(api_key == rules.FETCH, payload + 120, small_resp)
    return np.rint(request).astype(np.int64), np.rint(response).astype(np.int64)


def _mutations(rng: np.random.Generator, api_key: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    out = np.zeros(len(api_key), np.int64)
    for key, sizes in _MUTATION_SIZES.items():
        mask = api_key == key
        out[mask] = rng.choice(sizes, size=int(mask.sum()))
    return out


def _topics(
    pop: Population,
    rng: np.random.Generator,
    client: npt.NDArray[np.int64],
    api_key: npt.NDArray[np.int64],
    request_bytes: npt.NDArray[np.int64],
) -> pa.Array:
    """Produce requests split their record bytes over one or two of the client's topics."""
    offsets = [0]
    names: list[str] = []
    sizes: list[int] = []
    second = (rng.random(len(client)) < 0.3).tolist()
    for i, (key, who, size) in enumerate(
        zip(api_key.tolist(), client.tolist(), request_bytes.tolist(), strict=True)
    ):
        if key == rules.PRODUCE:
            own = pop.topics[who]
            records = max(size - 80, 0)
            if second[i] and len(own) > 1:
                first_part = records // 2
                names += [own[0], own[1]]
                sizes += [first_part, records - first_part]
            else:
                names.append(own[0])
                sizes.append(records)
        offsets.append(len(names))
    values = pa.StructArray.from_arrays(
        [pa.array(names, pa.string()), pa.array(sizes, pa.int32())],
        fields=list(TOPIC_BYTES_TYPE),
    )
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values).cast(
        USAGE_SCHEMA.field("topics").type
    )


def _pick(values: list[str], index: npt.NDArray[np.int64]) -> pa.Array:
    return pa.DictionaryArray.from_arrays(
        pa.array(index, pa.int32()), pa.array(values, pa.string())
    ).cast(pa.string())
