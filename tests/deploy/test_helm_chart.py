"""The Helm chart (deploy/helm/quotagate, issue 35): it lints and renders for every value set
in its ci/ folder and for its defaults; every rendered Kubernetes object validates against
Kubernetes' own schemas (kubernetes-validate), the Prometheus Operator's objects carry the
repository's rules, and the quotagate.toml it renders is one the gateway accepts. Helm is
built from the Go module proxy by `make helm` into the cache (tools/jars.cache_root)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from jars import cache_root

from quotagate.commands.plugins import load_gateway_config
from quotagate.gateway.config import ConfigError
from support.certificates import CertificateAuthority

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "quotagate"
EXAMPLES = ROOT / "examples"
KUBERNETES = "1.30.0"
VALUE_SETS = ["defaults", *sorted(p.name for p in (CHART / "ci").glob("*.yaml"))]
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}


def _helm() -> Path:
    helm = cache_root() / "bin" / "helm"
    assert helm.exists(), f"{helm} is missing: `make helm` builds it (make test does)"
    return helm


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(_helm()), *args], check=False, capture_output=True, text=True, timeout=120
    )


def _values(name: str) -> list[str]:
    return [] if name == "defaults" else ["-f", str(CHART / "ci" / name)]


def _render(name: str, *extra: str) -> list[dict[str, Any]]:
    done = _run("template", "qg", str(CHART), *_values(name), *extra)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def test_there_are_three_value_sets_at_least() -> None:
    assert len(VALUE_SETS) >= 3


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_chart_lints(name: str) -> None:
    done = _run("lint", "--strict", str(CHART), *_values(name))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_manifest_validates(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    documents = _render(name)
    kinds = {doc["kind"] for doc in documents}
    assert {"StatefulSet", "Service", "ConfigMap"} <= kinds
    for doc in documents:
        if doc["kind"] in OPERATOR_KINDS:
            _check_operator_object(doc)
            continue
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    _check_pod(next(d for d in documents if d["kind"] == "StatefulSet"))
    config = next(
        d for d in documents if d["kind"] == "ConfigMap" and "quotagate.toml" in d["data"]
    )
    # The rendered config is one `quotagate serve` accepts, as the pod would read it.
    path = tmp_path / "quotagate.toml"
    path.write_text(_mounted(config["data"]["quotagate.toml"], tmp_path), encoding="utf-8")
    monkeypatch.setenv("POD_NAME", "qg-quotagate-0")
    monkeypatch.setenv("UPSTREAM_PASSWORD", "not-a-real-password")
    settings = load_gateway_config(path)
    assert settings.gateway_id == "qg-quotagate-0"
    assert settings.metrics_listen is not None


def _mounted(text: str, root: Path) -> str:
    """The config with the files the pod mounts under /etc/quotagate made under ``root``:
    a TLS certificate and key for the listener, a CA for the upstream."""
    authority = CertificateAuthority(root)
    leaf = authority.server()
    etc = root / "etc"
    for directory, name, source in (
        ("tls", "tls.crt", leaf.certificate),
        ("tls", "tls.key", leaf.key),
        ("upstream-ca", "ca.crt", authority.certificate),
    ):
        (etc / directory).mkdir(parents=True, exist_ok=True)
        (etc / directory / name).write_bytes(source.read_bytes())
    return text.replace("/etc/quotagate/", f"{etc}/")


def _check_pod(statefulset: dict[str, Any]) -> None:
    pod = statefulset["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["allowPrivilegeEscalation"] is False
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def _check_operator_object(doc: dict[str, Any]) -> None:
    """The Prometheus Operator's kinds are not Kubernetes': their schemas are the operator's
    CRDs, not at hand here. What matters of them is checked instead."""
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    assert doc["metadata"]["name"]
    if doc["kind"] == "PrometheusRule":
        rules = yaml.safe_load((EXAMPLES / "prometheus" / "quotagate-alerts.yml").read_text())
        assert doc["spec"] == rules
    else:
        (endpoint,) = doc["spec"]["endpoints"]
        assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
        assert doc["spec"]["selector"]["matchLabels"]


def test_the_charts_copies_are_the_examples() -> None:
    for copy, original in (
        ("quotagate-alerts.yml", EXAMPLES / "prometheus" / "quotagate-alerts.yml"),
        ("quotagate-dashboard.json", EXAMPLES / "grafana" / "quotagate-dashboard.json"),
    ):
        assert (CHART / "files" / copy).read_bytes() == original.read_bytes(), copy


def test_sni_renders_one_port_and_ports_one_per_broker() -> None:
    def service_ports(name: str) -> list[int]:
        service = next(
            d for d in _render(name) if d["kind"] == "Service" and "clusterIP" not in d["spec"]
        )
        return [p["port"] for p in service["spec"]["ports"]]

    assert service_ports("sni-values.yaml") == [9092]
    assert service_ports("ports-values.yaml") == [9092, 9100, 9101, 9102, 9103, 9104]


@pytest.mark.parametrize(
    ("values", "says"),
    [
        (["--set", "replicaCount=2"], "replicaCount > 1 needs fleet.enabled"),
        (["--set", "listener.routing=sni"], "sni needs listener.securityProtocol SSL"),
        (["--set", "listener.securityProtocol=SSL"], "needs listener.tlsSecret"),
        (["--set", "gateway.workers=auto"], "gateway.workers other than 1 needs fleet"),
        (["--set", "listener.nosuchkey=1"], "nosuchkey"),
        (["--set", "listener.sni.hostPattern=kafka.example.com"], "hostPattern"),
    ],
)
def test_wrong_values_are_refused_with_the_reason(values: list[str], says: str) -> None:
    done = _run("template", "qg", str(CHART), *values)
    assert done.returncode != 0
    assert says in done.stderr


def test_a_config_without_the_pod_name_says_how_to_fix_it(tmp_path: Path) -> None:
    (config,) = (d for d in _render("defaults") if d["kind"] == "ConfigMap")
    path = tmp_path / "quotagate.toml"
    path.write_text(config["data"]["quotagate.toml"], encoding="utf-8")
    with pytest.raises(ConfigError, match="POD_NAME is not set"):
        load_gateway_config(path)
