"""The alerting rules: well formed, on metrics the code really exports, each with a runbook."""

from __future__ import annotations

import re

import promql_parser
import pytest
import yaml
from prometheus_client import CollectorRegistry, Metric

import workers.metrics
from deploy.render import REPO_ROOT
from services.common.metrics import GrpcMetrics

pytestmark = pytest.mark.unit

ALERTS = REPO_ROOT / "deploy" / "monitoring" / "alerts.yaml"
OPERATIONS = REPO_ROOT / "docs" / "operations.md"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def _sample_names(families: list[Metric]) -> set[str]:
    return {f"{f.name}{suffix}" for f in families for suffix in SUFFIXES.get(f.type, ("",))}


def exported_metrics() -> set[str]:
    """Every series name the services and workers can export."""
    grpc_registry = CollectorRegistry()
    GrpcMetrics(registry=grpc_registry)
    families = list(grpc_registry.collect())
    import services.table.metrics

    for value in [*vars(workers.metrics).values(), *vars(services.table.metrics).values()]:
        if hasattr(value, "collect") and hasattr(value, "_name"):
            families.extend(value.collect())
    return _sample_names(families)


def rules() -> list[dict[str, object]]:
    document = yaml.safe_load(ALERTS.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_the_metric_inventory_is_not_empty() -> None:
    names = exported_metrics()
    assert "kishpa_grpc_server_handled_total" in names
    assert "kishpa_settlement_latency_seconds_bucket" in names


def test_every_expression_is_valid_promql() -> None:
    for rule in rules():
        promql_parser.parse(str(rule["expr"]))


def test_the_promql_check_can_fail() -> None:
    # `>` binds looser than `*`: matching a scalar comparison against a vector is an error.
    with pytest.raises(ValueError, match="vector matching only allowed between vectors"):
        promql_parser.parse("a > 0 * on (job) group_left b")


def test_alerts_use_only_exported_kishpa_metrics() -> None:
    exported = exported_metrics()
    for rule in rules():
        used = set(re.findall(r"\bkishpa_[a-z_]+\b", str(rule["expr"])))
        assert used <= exported, f"{rule['alert']}: unknown metrics {used - exported}"


def test_alerts_cover_money_errors_and_redis() -> None:
    names = {str(rule["alert"]) for rule in rules()}
    assert {
        "KishpaWalletReconciliationFailed",
        "KishpaSettlementDeadLetters",
        "KishpaSettlementLag",
        "KishpaRpcErrorRate",
        "KishpaRedisMemoryHigh",
    } <= names


def test_every_alert_has_a_severity_and_a_runbook_section() -> None:
    headings = set(re.findall(r"^### (\w+)$", OPERATIONS.read_text(), flags=re.MULTILINE))
    for rule in rules():
        alert = str(rule["alert"])
        labels = rule["labels"]
        annotations = rule["annotations"]
        assert isinstance(labels, dict)
        assert isinstance(annotations, dict)
        assert labels["severity"] in ("page", "ticket"), alert
        assert annotations["runbook"] == f"docs/operations.md#{alert.lower()}"
        assert alert in headings, f"docs/operations.md has no runbook for {alert}"


def _seconds(duration: str) -> int:
    value, unit = int(duration[:-1]), duration[-1]
    return value * {"s": 1, "m": 60, "h": 3600}[unit]


@pytest.mark.parametrize("outage_s", [20, 60, 150])
def test_an_expected_redis_outage_does_not_page(outage_s: int) -> None:
    """Every service call fails UNAVAILABLE during an outage: a rate rule over a window w
    stays above its threshold for at most outage + w, and pages only if that exceeds its
    ``for``. Each paging rule on server-side errors must outlast outages of minutes."""
    for rule in rules():
        expr = str(rule["expr"])
        if "kishpa_grpc_server_handled_total" not in expr or "UNAVAILABLE" not in expr:
            continue
        windows = {_seconds(w) for w in re.findall(r"\[(\d+[smh])\]", expr)}
        assert windows, rule["alert"]
        pending = _seconds(str(rule.get("for", "0s")))
        assert outage_s + max(windows) < pending, (rule["alert"], outage_s, windows, pending)
