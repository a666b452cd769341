"""Envoy's gRPC-Web configuration (deploy/envoy/envoy.yaml) agrees with the Python edge's
allowlist, and the check says so when it does not."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.checks import ENVOY_CONFIG, ENVOY_SDS_DIR, check_envoy_routes, check_envoy_tls

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


def _context(config: dict[str, Any], cluster: str) -> dict[str, Any]:
    for item in config["static_resources"]["clusters"]:
        if item["name"] == cluster:
            context: dict[str, Any] = item["transport_socket"]["typed_config"]["common_tls_context"]
            return context
    raise KeyError(cluster)


def test_every_envoy_tls_context_takes_its_files_by_watched_sds() -> None:
    config = _config()
    assert check_envoy_tls(config) == []
    # Independent of the check: each cluster names the two shipped SDS files, and each file's
    # secret watches the directory cert-manager's Secret is mounted at.
    for cluster in ("matchmaking", "table", "wallet"):
        context = _context(config, cluster)
        (cert,) = context["tls_certificate_sds_secret_configs"]
        assert cert["sds_config"]["path_config_source"]["path"] == "/etc/envoy/sds/certificate.yaml"
        ca = context["combined_validation_context"]["validation_context_sds_secret_config"]
        assert ca["sds_config"]["path_config_source"]["path"] == "/etc/envoy/sds/ca.yaml"
    for name in ("certificate.yaml", "ca.yaml"):
        (secret,) = yaml.safe_load((ENVOY_SDS_DIR / name).read_text())["resources"]
        body = secret.get("tls_certificate") or secret["validation_context"]
        assert body["watched_directory"] == {"path": "/var/run/secrets/kishpa/tls"}


def test_inline_certificate_files_read_once_are_caught() -> None:
    config = copy.deepcopy(_config())
    context = _context(config, "table")
    del context["tls_certificate_sds_secret_configs"]
    context["tls_certificates"] = [
        {
            "certificate_chain": {"filename": "/var/run/secrets/kishpa/tls/tls.crt"},
            "private_key": {"filename": "/var/run/secrets/kishpa/tls/tls.key"},
        }
    ]
    assert check_envoy_tls(config) == [
        "envoy: cluster table reads inline certificate files only at start",
        "envoy: cluster table has no client certificate by SDS",
    ]


def test_an_unwatched_sds_secret_is_caught(tmp_path: Path) -> None:
    sds = tmp_path / "sds"
    shutil.copytree(ENVOY_SDS_DIR, sds)
    text = (sds / "certificate.yaml").read_text()
    (sds / "certificate.yaml").write_text(
        text.replace("      watched_directory: {path: /var/run/secrets/kishpa/tls}\n", "")
    )
    config = copy.deepcopy(_config())
    del _context(config, "wallet")["combined_validation_context"][
        "validation_context_sds_secret_config"
    ]["sds_config"]["path_config_source"]["watched_directory"]
    problems = check_envoy_tls(config, sds)
    assert (
        "envoy: cluster wallet validation_context SDS file /etc/envoy/sds/ca.yaml is not watched"
        in problems
    )
    assert (
        "envoy: cluster matchmaking tls_certificate secret edge_certificate does not watch its "
        "files' directory"
    ) in problems
