"""Prometheus's scrape jobs (deploy/monitoring/scrape.yaml) match how each process serves
``/metrics``: https with the kishpa CA and a name in the workload's cert-manager certificate
for the gRPC services, plain http for the worker. The TLS settings are then used, as
Prometheus would, against a real ``/metrics`` listener over TLS."""

from __future__ import annotations

import http.client
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.contract import WORKLOADS
from deploy.render import REPO_ROOT
from devkit.tlscerts import TestCA
from services.common.server import start_tls_http_server
from services.common.tls import CertificateFiles, reloading_ssl_context

SCRAPE = REPO_ROOT / "deploy" / "monitoring" / "scrape.yaml"
CERTIFICATES = REPO_ROOT / "deploy" / "k8s" / "components" / "mtls" / "certificates.yaml"
CA_MOUNT = "/etc/prometheus/secrets/kishpa-ca/ca.crt"


def _jobs() -> dict[str, dict[str, Any]]:
    config = yaml.safe_load(SCRAPE.read_text())
    return {job["job_name"]: job for job in config["scrape_configs"]}


def _dns_names(workload: str) -> list[str]:
    for doc in yaml.safe_load_all(CERTIFICATES.read_text()):
        if (
            doc
            and doc["kind"] == "Certificate"
            and doc["metadata"]["name"] == f"kishpa-tls-{workload}"
        ):
            names: list[str] = doc["spec"]["dnsNames"]
            return names
    raise KeyError(workload)


def _kept(job: dict[str, Any], label: str) -> str | None:
    for rule in job["relabel_configs"]:
        if rule.get("action") == "keep" and rule["source_labels"] == [label]:
            regex: str = rule["regex"]
            return regex
    return None


def test_every_process_with_a_metrics_port_has_its_own_job() -> None:
    jobs = _jobs()
    scraped = {w.name for w in WORKLOADS.values() if w.metrics_port is not None}
    assert scraped == {"wallet", "table", "matchmaking", "worker"}
    assert set(jobs) == {f"kishpa-{name}" for name in scraped}
    for name in scraped:
        job = jobs[f"kishpa-{name}"]
        assert _kept(job, "__meta_kubernetes_pod_label_app_kubernetes_io_name") == name
        assert _kept(job, "__meta_kubernetes_pod_container_port_name") == "metrics"


def test_the_grpc_services_are_scraped_over_tls_with_their_certificate_name() -> None:
    jobs = _jobs()
    for name in ("wallet", "table", "matchmaking"):
        job = jobs[f"kishpa-{name}"]
        assert job["scheme"] == "https"
        assert job["tls_config"]["ca_file"] == CA_MOUNT
        assert "insecure_skip_verify" not in job["tls_config"]
        assert job["tls_config"]["server_name"] in _dns_names(name)
    # workers/metrics.py serves plain HTTP.
    assert jobs["kishpa-worker"]["scheme"] == "http"
    assert "tls_config" not in jobs["kishpa-worker"]


def _scrape(port: int, ca_file: Path, server_name: str) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(ca_file))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    with raw, context.wrap_socket(raw, server_hostname=server_name) as tls:
        tls.sendall(f"GET /metrics HTTP/1.1\r\nHost: {server_name}\r\n\r\n".encode())
        response = http.client.HTTPResponse(tls)
        response.begin()
        return response.status, response.read()


def test_the_scrape_settings_complete_a_handshake_with_a_real_metrics_listener(
    tmp_path: Path,
) -> None:
    job = _jobs()["kishpa-wallet"]
    server_name = job["tls_config"]["server_name"]
    ca = TestCA(tmp_path / "pki")
    issued = ca.issue("wallet", dns_names=_dns_names("wallet"))
    files = CertificateFiles(issued.cert_file, issued.key_file, ca.ca_file)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    httpd, thread = start_tls_http_server(port, reloading_ssl_context(files), addr="127.0.0.1")
    try:
        status, body = _scrape(port, ca.ca_file, server_name)
        assert status == 200
        assert b"# TYPE" in body
        # A name the certificate does not carry fails verification, as Prometheus would.
        with pytest.raises(ssl.SSLCertVerificationError):
            _scrape(port, ca.ca_file, "wallet.example.org")
    finally:
        httpd.shutdown()
        thread.join(timeout=5)
