"""Every RPC called by every identity over mutual TLS, against docs/api.md's table.

Real servers (wallet on SQLite, table on Redis, matchmaking on Redis) all require client
certificates; each identity calls with its own workload certificate (operators and players
through the edge's) and its own token. The expected outcome of each (RPC, identity) pair is
read from the table in docs/api.md, *Who may call what* (the docs, not the code under test):
a "yes" must get past the gate (any answer but the gate's refusal), an empty cell must be
refused with PERMISSION_DENIED and one of the gate's reasons.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import pytest
from google.protobuf import descriptor_pool, message_factory

from devkit.tlscerts import TestCA
from kishpa.admin.v1 import admin_pb2  # noqa: F401 - registers the descriptors
from kishpa.auth.v1 import auth_pb2  # noqa: F401
from kishpa.matchmaking.v1 import matchmaking_pb2  # noqa: F401
from kishpa.table.v1 import table_pb2  # noqa: F401
from kishpa.wallet.v1 import wallet_pb2  # noqa: F401
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.errors import error_reason
from services.common.settings import load_settings
from services.matchmaking.server import create_matchmaking_server
from services.table.server import create_table_server
from services.wallet.migrate import upgrade
from services.wallet.server import create_wallet_server
from shared.tls import ClientTls, aio_channel
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.integration

DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"
SECRETS = {"token_secret": "t" * 40, "service_secret": "s" * 40}
REDIS_URL = os.environ.get("TEST_TABLE_REDIS_URL") or urlunsplit(
    urlsplit(TEST_REDIS_URL)._replace(path="/11")
)
GATE_REASONS = {
    "ADMIN_REQUIRED",
    "SERVICE_REQUIRED",
    "PLAYER_REQUIRED",
    "SERVICE_NOT_ALLOWED",
    "ROLE_REQUIRED",
    "METHOD_NOT_DECLARED",
}
SERVER_OF = {"auth": "matchmaking", "matchmaking": "matchmaking", "table": "table"}


def documented_matrix() -> tuple[list[str], dict[str, dict[str, bool]]]:
    """(identities, {"wallet.WalletService/ApplyBatch": {identity: allowed}}) from the docs."""
    text = DOCS.read_text()
    section = text[text.index("### Who may call what") :]
    lines = [ln for ln in section.splitlines() if ln.startswith("| ")]
    header = [c.strip().strip("`") for c in lines[0].strip("|").split("|")][1:]
    # The identity columns (the last one, "browser", says what the edge forwards).
    identities = [c for c in header if c == "player" or ":" in c]
    matrix: dict[str, dict[str, bool]] = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not re.fullmatch(r"`[a-z]+\.\w+/\w+`", cells[0]):
            break
        matrix[cells[0].strip("`")] = {
            who: cell in {"yes", "anyone"}
            for who, cell in zip(header, cells[1:], strict=True)
            if who in identities
        }
    return identities, matrix


def _full_name(short: str) -> str:
    package, rest = short.split(".", 1)
    return f"/kishpa.{package}.v1.{rest}"


async def _call(channel: grpc.aio.Channel, method: str, metadata: Any) -> tuple[str, str]:
    service_name, rpc = method.strip("/").split("/")
    pool = descriptor_pool.Default()
    desc = pool.FindServiceByName(service_name).methods_by_name[rpc]
    request_cls = message_factory.GetMessageClass(desc.input_type)
    response_cls = message_factory.GetMessageClass(desc.output_type)
    kwargs = {
        "request_serializer": request_cls.SerializeToString,
        "response_deserializer": response_cls.FromString,
    }
    try:
        if desc.server_streaming:
            call = channel.unary_stream(method, **kwargs)(
                request_cls(), metadata=metadata, timeout=1.5
            )
            await call.read()
            call.cancel()
        else:
            await channel.unary_unary(method, **kwargs)(
                request_cls(), metadata=metadata, timeout=10
            )
    except grpc.aio.AioRpcError as exc:
        return exc.code().name, error_reason(exc)
    return "OK", ""


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    ca = TestCA(tmp_path / "pki")

    def tls(name: str) -> dict[str, Any]:
        issued = ca.issue(
            name, cert_file=tmp_path / f"{name}-srv.crt", key_file=tmp_path / f"{name}-srv.key"
        )
        return {
            "tls_cert_file": str(issued.cert_file),
            "tls_key_file": str(issued.key_file),
            "tls_ca_file": str(ca.ca_file),
        }

    base = {"grpc_port": 0, "metrics_port": 0, "redis_url": REDIS_URL, **SECRETS}
    table = create_table_server(
        load_settings("table", **base, **tls("table")), address="127.0.0.1:0", timers=False
    )
    await table.start()
    url = f"sqlite:///{tmp_path / 'wallet.sqlite3'}"
    upgrade(url)
    wallet_settings = load_settings(
        "wallet",
        **base,
        **tls("wallet"),
        database_url=url,
        table_addr=f"127.0.0.1:{table.port}",
    )
    wallet = create_wallet_server(wallet_settings, address="127.0.0.1:0")
    await wallet.start()
    mm = create_matchmaking_server(
        load_settings(
            "matchmaking",
            **base,
            **tls("matchmaking"),
            table_addr=f"127.0.0.1:{table.port}",
            wallet_addr=f"127.0.0.1:{wallet.port}",
        ),
        address="127.0.0.1:0",
        key_prefix="i26-matrix",
        sweeper=False,
    )
    await mm.start()
    try:
        yield {
            "ca": ca,
            "ports": {"table": table.port, "wallet": wallet.port, "matchmaking": mm.port},
            "authority": TokenAuthority.from_settings(wallet_settings),
        }
    finally:
        await mm.stop(0)
        await wallet.stop(0)
        await table.stop(0)


async def test_every_rpc_with_every_identity_matches_the_documented_table(
    servers: dict[str, Any],
) -> None:
    identities, matrix = documented_matrix()
    assert len(matrix) >= 40, "the docs' table lost rows"
    authority: TokenAuthority = servers["authority"]
    ca: TestCA = servers["ca"]
    certs: dict[str, ClientTls] = {}

    def client_tls(workload: str) -> ClientTls:
        if workload not in certs:
            issued = ca.issue(workload)
            certs[workload] = ClientTls(ca.ca_file, issued.cert_file, issued.key_file)
        return certs[workload]

    def credential(identity: str) -> tuple[str, Any]:
        """(the workload certificate to connect with, the call metadata) of an identity."""
        if identity == "player":
            return "edge", bearer_metadata(authority.issue_player_token("p-matrix", "M").token)
        kind, name = identity.split(":")
        if kind == "service":
            return name, bearer_metadata(authority.issue_service_token(name).token)
        token = authority.issue_admin_token(f"op-{name}", roles=(name,)).token
        return "edge", bearer_metadata(token)

    channels: dict[tuple[str, str], grpc.aio.Channel] = {}
    mismatches = []
    try:
        for method_short, expected in sorted(matrix.items()):
            package = method_short.split(".", 1)[0]
            target = SERVER_OF.get(package, "wallet")
            port = servers["ports"][target]

            async def one(
                identity: str, target: str = target, port: int = port, method: str = method_short
            ) -> tuple[str, str, str]:
                workload, metadata = credential(identity)
                key = (target, workload)
                if key not in channels:
                    channels[key] = aio_channel(f"127.0.0.1:{port}", client_tls(workload))
                code, reason = await _call(channels[key], _full_name(method), metadata)
                return identity, code, reason

            for identity, code, reason in await asyncio.gather(*(one(i) for i in identities)):
                refused = code == "PERMISSION_DENIED" and reason in GATE_REASONS
                if expected[identity] == refused or code in {"UNAUTHENTICATED", "INTERNAL"}:
                    mismatches.append((method_short, identity, code, reason))
    finally:
        for ch in channels.values():
            await ch.close()
    assert mismatches == []
