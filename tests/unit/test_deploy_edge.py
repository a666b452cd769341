"""Envoy's gRPC-Web configuration (deploy/envoy/envoy.yaml) agrees with the Python edge's
allowlist, and the check says so when it does not."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from deploy.checks import ENVOY_CONFIG, check_envoy_routes

pytestmark = pytest.mark.unit


def _config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(ENVOY_CONFIG.read_text())
    return config


def _routes(config: dict[str, Any]) -> list[dict[str, Any]]:
    manager = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
    routes: list[dict[str, Any]] = manager["typed_config"]["route_config"]["virtual_hosts"][0][
        "routes"
    ]
    return routes


def test_the_shipped_envoy_config_routes_exactly_the_exposed_rpcs() -> None:
    assert check_envoy_routes(_config()) == []


def test_a_service_only_rpc_routed_by_envoy_is_caught() -> None:
    config = copy.deepcopy(_config())
    _routes(config).insert(
        0,
        {
            "match": {"path": "/kishpa.wallet.v1.WalletService/ApplyBatch"},
            "route": {"cluster": "wallet"},
        },
    )
    assert check_envoy_routes(config) == [
        "envoy: routes /kishpa.wallet.v1.WalletService/ApplyBatch, which the edge does not expose"
    ]


def test_a_prefix_route_or_a_wrong_cluster_is_caught() -> None:
    config = copy.deepcopy(_config())
    routes = _routes(config)
    routes.insert(0, {"match": {"prefix": "/kishpa.wallet.v1"}, "route": {"cluster": "wallet"}})
    draw = next(r for r in routes if r["match"].get("path", "").endswith("/Draw"))
    draw["route"]["cluster"] = "wallet"
    problems = check_envoy_routes(config)
    assert any("forwards more than one exact RPC path" in p for p in problems)
    assert any("TableService/Draw goes to ('wallet', 50051)" in p for p in problems)


def test_without_the_grpc_web_filter_envoy_would_not_translate() -> None:
    config = copy.deepcopy(_config())
    manager = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
    filters = manager["typed_config"]["http_filters"]
    filters[:] = [f for f in filters if f["name"] != "envoy.filters.http.grpc_web"]
    assert "envoy: no envoy.filters.http.grpc_web filter" in check_envoy_routes(config)
