"""The own-configs stage on hand-built exchanges: the default broker resource is answered with
the gateway's dynamic configs when the upstream has none to give, but an upstream's
authorization failure stands."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.static.primitive import i8

from quotagate.enforcement import QuotaEnforcement, QuotaRuntime, QuotaSettings
from quotagate.protocol import api_table
from quotagate.protocol.kio_nested import build, nested
from support.exchanges import (
    chain,
    exchange,
    request_body,
    response_body,
    run_request,
    run_response,
    sent_response,
)

DESCRIBE_CONFIGS = 32
VERSION = 4
BROKER = 4
RULES = "RULE:client-id:^(team)-.*$/$1/"


def _stages() -> Any:
    runtime = QuotaRuntime(QuotaSettings(num_partitions=1))
    runtime.store_sync.set_tenant_rules(RULES, "User:admin")
    return chain(QuotaEnforcement(runtime).stages())


def _describe_default_broker() -> Any:
    schema: Any = api_table.request_schema(DESCRIBE_CONFIGS, VERSION)
    resource = build(
        nested(schema, "DescribeConfigsResource"),
        resource_type=i8(BROKER),
        resource_name="",
        configuration_keys=None,
    )
    return request_body(
        DESCRIBE_CONFIGS,
        VERSION,
        resources=(resource,),
        include_synonyms=False,
        include_documentation=False,
    )


def _upstream_answer(error: KioErrorCode) -> Any:
    schema: Any = api_table.response_schema(DESCRIBE_CONFIGS, VERSION)
    result = build(
        nested(schema, "DescribeConfigsResult"),
        error_code=error,
        error_message="refused upstream",
        resource_type=i8(BROKER),
        resource_name="",
        configs=(),
    )
    return response_body(
        DESCRIBE_CONFIGS, VERSION, throttle_time=datetime.timedelta(0), results=(result,)
    )


def _described(upstream_error: KioErrorCode) -> Any:
    stages = _stages()
    ex = exchange(_describe_default_broker())
    seen = run_request(stages, ex)
    run_response(stages, ex, seen, _upstream_answer(upstream_error))
    (result,) = sent_response(ex).results
    return result


@pytest.mark.parametrize("error", [KioErrorCode.invalid_request, KioErrorCode.unknown_server_error])
def test_a_default_broker_the_upstream_cannot_describe_lists_the_gateways_configs(
    error: KioErrorCode,
) -> None:
    result = _described(error)
    assert result.error_code == KioErrorCode.none
    assert {c.name: c.value for c in result.configs} == {"tenant.mapping.rules": RULES}


@pytest.mark.parametrize(
    "error",
    [KioErrorCode.cluster_authorization_failed, KioErrorCode.topic_authorization_failed],
)
def test_an_authorization_failure_upstream_is_not_papered_over(error: KioErrorCode) -> None:
    result = _described(error)
    assert result.error_code == error
    assert result.configs == ()
