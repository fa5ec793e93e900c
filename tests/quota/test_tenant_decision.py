"""The tenant level in the one decision (issue 25): Kafka's numbers at both levels.

Kafka's own vectors (ClientQuotaManagerTest's 2100 ms, ControllerMutationQuotaManagerTest's
8000 ms) are reproduced with the quota at the tenant level, at the client level, and at both:
the decision carries the larger throttle, and a request with no tenant or an exempt principal
is decided as the facts say.
"""

from __future__ import annotations

from quotagate.quota import (
    DEFAULT,
    QuotaManagers,
    RequestFacts,
    admit,
    classify,
    decide,
)
from quotagate.quota.quota_file import load_quota_file
from quotagate.quota.throttle_choice import Cause

T0 = 1_700_000_000_000
PRODUCE = classify(0, 9, acks=1)
FETCH = classify(1, 12)
CREATE_TOPICS_STRICT = classify(19, 6)
CREATE_TOPICS_PERMISSIVE = classify(19, 5)


def _produce(
    managers: QuotaManagers, user: str, size: int, now: int, tenant: str = "t"
) -> tuple[int, Cause, int]:
    return decide(managers, RequestFacts(PRODUCE, user, "c", 0, 9, now, size, tenant=tenant))


def _kafka_produce_vector(managers: QuotaManagers, tenant: str = "t") -> int:
    """ClientQuotaManagerTest: ten seconds at 400 B/s, then 2300 bytes at 10.5 s."""
    for second in range(10):
        throttle, _, _ = _produce(managers, "alice", 400, T0 + second * 1000, tenant)
        assert throttle == 0
    return _produce(managers, "alice", 2300, T0 + 10_500, tenant)[0]


def test_kafkas_produce_vector_on_the_tenant_level() -> None:
    managers = QuotaManagers.create()
    managers.update_quota({"tenant": "t"}, "producer_byte_rate", 500)
    assert _kafka_produce_vector(managers) == 2100


def test_the_default_tenant_quota_holds_each_tenant_on_its_own_rate() -> None:
    managers = QuotaManagers.create()
    managers.update_quota({"tenant": None}, "producer_byte_rate", 500)
    assert _kafka_produce_vector(managers, "t1") == 2100
    # Another tenant has a rate of its own: its first 400 bytes pass.
    assert _produce(managers, "alice", 400, T0 + 10_600, "t2")[0] == 0


def test_a_request_with_no_tenant_pays_nothing_at_the_tenant_level() -> None:
    managers = QuotaManagers.create()
    managers.update_quota({"tenant": None}, "producer_byte_rate", 500)
    assert _kafka_produce_vector(managers, tenant="") == 0
    assert managers.tenants is not None
    assert not managers.tenants.produce.quota_sensors()


def test_the_members_of_a_tenant_share_its_rate() -> None:
    """Two users at 200 B/s each are one tenant at 400 B/s: Kafka's vector again."""
    managers = QuotaManagers.create()
    managers.update_quota({"tenant": "t"}, "producer_byte_rate", 500)
    for second in range(10):
        for user in ("alice", "bob"):
            assert _produce(managers, user, 200, T0 + second * 1000)[0] == 0
    assert _produce(managers, "bob", 2300, T0 + 10_500)[0] == 2100


def test_the_larger_of_the_two_levels_wins() -> None:
    """Client quota 500 and tenant quota 1000: the client's 2100 ms wins; swapped, the
    tenant's; and each level still records every byte."""
    for client_quota, tenant_quota in ((500, 1000), (1000, 500)):
        managers = QuotaManagers.create()
        managers.update_quota({"user": "alice"}, "producer_byte_rate", client_quota)
        managers.update_quota({"tenant": "t"}, "producer_byte_rate", tenant_quota)
        throttle = _kafka_produce_vector(managers)
        assert throttle == 2100
        assert managers.tenants is not None
        tenant_metric = managers.tenants.produce.quota_metric("t", "")
        client_metric = managers.produce.quota_metric("alice", "c")
        assert tenant_metric is not None and client_metric is not None
        assert tenant_metric.peek(T0 + 10_500) == client_metric.peek(T0 + 10_500)


def test_admission_of_a_produce_carries_the_tenant_throttle() -> None:
    managers = QuotaManagers.create()
    managers.update_quota({"tenant": "t"}, "producer_byte_rate", 500)
    for second in range(10):
        admit(managers, RequestFacts(PRODUCE, "a", "c", 0, 9, T0 + second * 1000, 400, tenant="t"))
    admission = admit(
        managers, RequestFacts(PRODUCE, "a", "c", 0, 9, T0 + 10_500, 2300, tenant="t")
    )
    assert admission.throttle_ms == 2100


def test_a_throttled_fetch_is_taken_back_from_both_levels() -> None:
    managers = QuotaManagers.create(2, 1)
    managers.update_quota({"tenant": "t"}, "consumer_byte_rate", 1000)
    managers.update_quota({"user": "alice"}, "consumer_byte_rate", 10**9)
    facts = RequestFacts(FETCH, "alice", "c", 1, 12, T0, response_bytes=5000, tenant="t")
    throttle, cause, _ = decide(managers, facts)
    assert throttle > 0 and cause is Cause.TENANT_FETCH  # the tenant's quota throttled
    assert managers.tenants is not None
    tenant_metric = managers.tenants.fetch.quota_metric("t", "")
    client_metric = managers.fetch.quota_metric("alice", "c")
    assert tenant_metric is not None and client_metric is not None
    assert tenant_metric.peek(T0) == 0 == client_metric.peek(T0)


def _mutation_managers() -> QuotaManagers:
    """ControllerMutationQuotaManagerTest's quota (10/s, 10 windows: a burst of 100)."""
    return QuotaManagers.create(controller_window_num=10, controller_window_size_s=1)


def test_strict_mutations_are_refused_by_the_tenant_level() -> None:
    """Kafka's strict vector (90, 90 admitted, the third refused, 8000 ms) on the tenant."""
    managers = _mutation_managers()
    managers.update_quota({"tenant": "t"}, "controller_mutation_rate", 10)
    facts = RequestFacts(
        CREATE_TOPICS_STRICT, "a", "c", 19, 6, T0, mutation_counts=(90, 90, 90), tenant="t"
    )
    admission = admit(managers, facts)
    assert list(admission.admitted) == [True, True, False]
    assert admission.error_code == 89
    assert decide(managers, facts, admission)[:2] == (8000, Cause.TENANT_CONTROLLER_MUTATION)


def test_a_topic_refused_by_one_level_is_charged_to_neither() -> None:
    managers = _mutation_managers()
    managers.update_quota({"tenant": "t"}, "controller_mutation_rate", 10)
    managers.update_quota({"user": "a"}, "controller_mutation_rate", 1000)
    first = RequestFacts(
        CREATE_TOPICS_STRICT, "a", "c", 19, 6, T0, mutation_counts=(180,), tenant="t"
    )
    assert list(admit(managers, first).admitted) == [True]
    second = RequestFacts(
        CREATE_TOPICS_STRICT, "a", "c", 19, 6, T0, mutation_counts=(5,), tenant="t"
    )
    assert list(admit(managers, second).admitted) == [False]
    # A burst of 10 windows x 1000 less the 180 admitted: the refused 5 are not charged.
    assert managers.controller.tokens("a", "c", T0) == 10 * 1000 - 180
    assert managers.tenants is not None
    assert managers.tenants.controller.tokens("t", "", T0) == -80


def test_permissive_mutations_throttle_by_the_larger_level() -> None:
    managers = _mutation_managers()
    managers.update_quota({"tenant": "t"}, "controller_mutation_rate", 10)
    managers.update_quota({"user": "a"}, "controller_mutation_rate", 20)
    facts = RequestFacts(
        CREATE_TOPICS_PERMISSIVE, "a", "c", 19, 5, T0, mutation_counts=(90, 90, 90), tenant="t"
    )
    admission = admit(managers, facts)
    assert all(admission.admitted)
    # Tenant: 100 - 270 = -170 tokens at 10/s: 17000 ms (Kafka's permissive vector);
    # client: 200 - 270 = -70 at 20/s: 3500 ms.
    assert decide(managers, facts, admission)[0] == 17000


def test_an_exempt_principal_is_metered_but_never_throttled_nor_refused() -> None:
    managers = _mutation_managers()
    managers.update_quota({"tenant": "t"}, "producer_byte_rate", 500)
    managers.update_quota({"user": DEFAULT}, "controller_mutation_rate", 10)
    managers.set_exempt_principals(["User:alice"])
    assert _kafka_produce_vector(managers) == 0
    assert managers.tenants is not None
    metric = managers.tenants.produce.quota_metric("t", "")
    assert metric is not None and metric.peek(T0 + 10_500) > 500  # metered all the same
    facts = RequestFacts(
        CREATE_TOPICS_STRICT, "alice", "c", 19, 6, T0, mutation_counts=(90, 90, 90), tenant="t"
    )
    admission = admit(managers, facts)
    assert all(admission.admitted) and admission.error_code == 0
    assert decide(managers, facts, admission)[0] == 0
    assert managers.controller.tokens("alice", "c", T0) == -170
    # Another member of the tenant is throttled by what the exempt one used.
    assert _produce(managers, "bob", 100, T0 + 10_600)[0] > 0


def test_a_quota_file_configures_prefixes_and_tenants() -> None:
    """The file ``quotas apply`` takes and the replay's candidates are written in."""
    quota_file = load_quota_file(
        """
        [[quota]]
        tenant = "t"
        producer_byte_rate = 500

        [[quota]]
        defaults = ["tenant"]
        request_percentage = 50

        [[quota]]
        client-id-prefix = "bar-"
        producer_byte_rate = 1000
        """
    )
    managers = QuotaManagers.from_quota_file(quota_file)
    assert managers.tenants is not None
    assert managers.tenants.produce.quota_limit("t", "") == 500
    assert managers.tenants.request.quota_limit("other", "") == 50
    assert managers.produce.quota_limit("u", "bar-1") == 1000
    assert _kafka_produce_vector(managers) == 2100


def test_the_decision_names_the_level_that_won() -> None:
    """Kafka records a throttle on the sensor of the quota that throttled: the decision says
    which level's it is (the client's on a tie, as the tenant level only adds a bound), and
    ``by_cause`` gives that level's manager."""
    cases = {
        (500, 1000): Cause.PRODUCE,
        (1000, 500): Cause.TENANT_PRODUCE,
        (500, 500): Cause.PRODUCE,
    }
    for (client_quota, tenant_quota), expected in cases.items():
        managers = QuotaManagers.create()
        managers.update_quota({"user": "alice"}, "producer_byte_rate", client_quota)
        managers.update_quota({"tenant": "t"}, "producer_byte_rate", tenant_quota)
        for second in range(10):
            _produce(managers, "alice", 400, T0 + second * 1000)
        throttle, cause, _ = _produce(managers, "alice", 2300, T0 + 10_500)
        assert (throttle > 0, cause) == (True, expected), (client_quota, tenant_quota)
    assert managers.tenants is not None
    assert managers.by_cause(Cause.TENANT_PRODUCE) is managers.tenants.produce
    assert managers.by_cause(Cause.PRODUCE) is managers.produce


def test_a_tenant_request_quota_wins_as_tenant_request() -> None:
    managers = QuotaManagers.create(2, 1)
    managers.update_quota({"tenant": "t"}, "request_percentage", 1.0)
    facts = RequestFacts(FETCH, "alice", "c", 1, 12, T0, request_time_ns=50_000_000, tenant="t")
    throttle, cause, _ = decide(managers, facts)
    assert throttle > 0 and cause is Cause.TENANT_REQUEST
    without_tenant = QuotaManagers.create(2, 1)
    without_tenant.update_quota({"tenant": "t"}, "request_percentage", 1.0)
    facts = RequestFacts(FETCH, "alice", "c", 1, 12, T0, request_time_ns=50_000_000)
    assert decide(without_tenant, facts)[:2] == (0, Cause.NONE)
