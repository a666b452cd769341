"""The Grafana dashboard: valid JSON and PromQL, only metrics the code exports, all of them."""

from __future__ import annotations

import json
import re
from typing import Any

import promql_parser
import pytest
from prometheus_client import CollectorRegistry

import services.matchmaking.metrics
import services.table.metrics
import services.wallet.servicer
import workers.metrics
from deploy.render import REPO_ROOT
from services.common.metrics import GrpcMetrics

pytestmark = pytest.mark.unit

DASHBOARD = REPO_ROOT / "deploy" / "monitoring" / "grafana-dashboard.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def families() -> dict[str, set[str]]:
    """Every metric family the services and workers export -> its series names."""
    registry = CollectorRegistry()
    GrpcMetrics(registry=registry)
    found = list(registry.collect())
    modules = (
        workers.metrics,
        services.table.metrics,
        services.matchmaking.metrics,
        services.wallet.servicer,
    )
    for module in modules:
        for value in vars(module).values():
            if hasattr(value, "collect") and hasattr(value, "_name"):
                found.extend(value.collect())
    return {f.name: {f.name + s for s in SUFFIXES.get(f.type, ("",))} for f in found}


def expressions() -> list[str]:
    document: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in document["panels"] for target in panel.get("targets", [])]


def test_every_panel_query_is_valid_promql_on_exported_metrics() -> None:
    exported = set().union(*families().values())
    for expr in expressions():
        promql_parser.parse(expr)
        used = set(re.findall(r"\bkishpa_[a-z_]+", expr))
        assert used <= exported, f"{expr}: unknown metrics {used - exported}"


def test_every_exported_metric_has_a_panel() -> None:
    used = {name for expr in expressions() for name in re.findall(r"\bkishpa_[a-z_]+", expr)}
    missing = [family for family, series in families().items() if not series & used]
    assert not missing, f"no panel shows {missing}"
