"""The production identity model over real mutual TLS servers (issue 32).

A wallet (SQLite) and a table service (Redis) run with ``KISHPA_PRODUCTION=1``: one
certificate per workload from a CA made here, no shared service key anywhere, operators from
an identity provider played by the test (``test_common_oidc.Provider``: its own RSA and EC
keys, a JWKS endpoint on loopback).

Then every workload's full set of secrets (its certificate and key, the keys in its
environment and secret files, plus a leaked former shared service key for good measure) is
used to forge every token we can think of, over that workload's own certificate: none makes
an operator (``CreditPlayer`` refused, the balance and audit log unchanged) or another
workload (``ApplyBatch``, the worker's; ``TableService.CloseTable``, the wallet's). The
controls show the same calls succeed for the real caller, so the refusals are not a setup
that refuses everything.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import jwt
import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from devkit.tlscerts import TestCA
from kishpa.admin.v1 import admin_pb2, admin_pb2_grpc
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.access import WORKLOADS
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.errors import error_reason
from services.common.settings import REQUIRED_SECRETS, TOKEN_SECRET_ENV, load_settings
from services.common.tls import ClientTls, aio_channel
from services.table.server import create_table_server
from services.wallet.migrate import upgrade
from services.wallet.server import create_wallet_server
from tests.conftest import TEST_REDIS_URL
from tests.integration.test_common_oidc import AUDIENCE, Provider
from tests.integration.test_common_oidc import provider as provider  # the fixture

pytestmark = pytest.mark.integration

TOKEN_SECRET = "t" * 40
FORMER_SHARED_KEY = "s" * 40
"""A shared service key from before production mode, as if it had leaked from a pod."""
THRESHOLD = 500
START = 2000
REDIS_URL = os.environ.get("TEST_TABLE_REDIS_URL") or urlunsplit(
    urlsplit(TEST_REDIS_URL)._replace(path="/11")
)


@dataclass
class Production:
    ca: TestCA
    provider: Provider
    wallet_port: int
    table_port: int
    channels: dict[str, grpc.aio.Channel]

    def channel(self, workload: str, port: int) -> grpc.aio.Channel:
        """A mutual TLS channel presenting ``workload``'s own certificate."""
        key = f"{workload}:{port}"
        if key not in self.channels:
            issued = self.ca.issue(workload)
            self.channels[key] = aio_channel(
                f"127.0.0.1:{port}", ClientTls(self.ca.ca_file, issued.cert_file, issued.key_file)
            )
        return self.channels[key]

    def operator(self, subject: str, *roles: str, **claims: Any) -> tuple[tuple[str, str], ...]:
        token = self.provider.token(
            "ec-1", sub=subject, roles=[f"kishpa-{r}" for r in roles], **claims
        )
        return bearer_metadata(token)


def _server_tls(ca: TestCA, workload: str) -> dict[str, str]:
    issued = ca.issue(
        workload,
        cert_file=ca.directory / f"{workload}-server.crt",
        key_file=ca.directory / f"{workload}-server.key",
    )
    return {
        "tls_cert_file": str(issued.cert_file),
        "tls_key_file": str(issued.key_file),
        "tls_ca_file": str(ca.ca_file),
    }


@pytest.fixture
async def production(
    tmp_path: Path,
    provider: Provider,
) -> AsyncIterator[Production]:
    ca = TestCA(tmp_path / "pki")
    common: dict[str, Any] = {
        "grpc_port": 0,
        "metrics_port": 0,
        "production": True,
        "token_secret": TOKEN_SECRET,
        "oidc_issuer": provider.issuer,
        "oidc_audience": AUDIENCE,
        "oidc_jwks_url": provider.jwks_url,  # type: ignore[attr-defined]
    }
    table = create_table_server(
        load_settings("table", redis_url=REDIS_URL, **common, **_server_tls(ca, "table")),
        address="127.0.0.1:0",
        timers=False,
    )
    await table.start()
    url = f"sqlite:///{tmp_path / 'wallet.sqlite3'}"
    upgrade(url)
    wallet_settings = load_settings(
        "wallet",
        database_url=url,
        table_addr=f"127.0.0.1:{table.port}",
        admin_approval_threshold=THRESHOLD,
        **common,
        **_server_tls(ca, "wallet"),
    )
    assert wallet_settings.certificate_identity
    assert not TokenAuthority.from_settings(wallet_settings).shared_service_key
    wallet = create_wallet_server(wallet_settings, address="127.0.0.1:0")
    await wallet.start()
    prod = Production(ca, provider, wallet.port, table.port, {})
    try:
        yield prod
    finally:
        for channel in prod.channels.values():
            await channel.close()
        await wallet.stop(0)
        await table.stop(0)


async def _outcome(call: Any) -> tuple[str, str]:
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return exc.code().name, error_reason(exc) or ""
    return "OK", ""


def _hs(key: str, **claims: Any) -> str:
    now = int(time.time())
    return jwt.encode({"iat": now, "exp": now + 120, "iss": "kishpa", **claims}, key, "HS256")


def forgeries(workload: str, key_pem: bytes, provider: Provider) -> dict[str, str | None]:
    """Every token the workload's secrets can make that might pass for someone else."""
    hs_keys = [FORMER_SHARED_KEY]
    if TOKEN_SECRET_ENV in REQUIRED_SECRETS.get(workload, ()):
        hs_keys.append(TOKEN_SECRET)
    tokens: dict[str, str | None] = {"no token": None}
    finance = ["kishpa-finance"]
    for i, key in enumerate(hs_keys):
        tokens[f"hs{i} admin"] = _hs(
            key, sub="admin:mallory", typ="admin", role="admin", roles=["finance"]
        )
        tokens[f"hs{i} service:worker"] = _hs(
            key, sub="service:worker", typ="service", role="service"
        )
        tokens[f"hs{i} service:wallet"] = _hs(
            key, sub="service:wallet", typ="service", role="service"
        )
        tokens[f"hs{i} player"] = _hs(key, sub="p-mallory", typ="player", name="M")
        tokens[f"hs{i} as provider"] = _hs(
            key, iss=provider.issuer, aud=AUDIENCE, sub="mallory", roles=finance
        )
    # The workload's own TLS key (EC P-256) signing provider-looking tokens, naming each of
    # the provider's key ids (the RSA one included: the algorithm/key mismatch).
    tls_key: Any = load_pem_private_key(key_pem, password=None)
    now = int(time.time())
    for kid in ("ec-1", "rsa-1", "mallory-1"):
        claims = {
            "iss": provider.issuer,
            "aud": AUDIENCE,
            "sub": "mallory",
            "roles": finance,
            "iat": now,
            "exp": now + 120,
        }
        tokens[f"tls key kid={kid}"] = jwt.encode(
            claims, tls_key, algorithm="ES256", headers={"kid": kid}
        )
    return tokens


def _metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return bearer_metadata(token) if token else ()


async def test_no_workloads_secrets_mint_an_operator_or_another_workload(
    production: Production,
) -> None:
    admin = admin_pb2_grpc.AdminServiceStub(production.channel("edge", production.wallet_port))
    support = production.operator("sue", "support")
    # A player with a wallet (opened by the player himself, over the edge's certificate).
    player = f"p{uuid.uuid4().hex[:12]}"
    own = TokenAuthority(TOKEN_SECRET).issue_player_token(player, "Pat").token
    edge_wallet = wallet_pb2_grpc.WalletServiceStub(
        production.channel("edge", production.wallet_port)
    )
    await edge_wallet.OpenWallet(wallet_pb2.OpenWalletRequest(), metadata=bearer_metadata(own))

    async def balance() -> int:
        reply = await admin.ListPlayerTransfers(
            admin_pb2.ListPlayerTransfersRequest(player_id=player), metadata=support
        )
        return int(reply.balance)

    assert await balance() == START
    accepted: list[tuple[str, str, str]] = []
    outcomes: set[tuple[str, str]] = set()
    for workload in WORKLOADS:
        issued = production.ca.issue(workload)
        wallet_ch = production.channel(workload, production.wallet_port)
        table_ch = production.channel(workload, production.table_port)
        for label, token in forgeries(workload, issued.key_pem, production.provider).items():
            md = _metadata(token)
            credit = admin_pb2_grpc.AdminServiceStub(wallet_ch).CreditPlayer(
                admin_pb2.CreditPlayerRequest(
                    player_id=player,
                    amount=7,
                    reason="forged",
                    ticket="T-0",
                    request_id=uuid.uuid4().hex,
                ),
                metadata=md,
                timeout=10,
            )
            calls = {"CreditPlayer": credit}
            if workload != "worker":
                calls["ApplyBatch"] = wallet_pb2_grpc.WalletServiceStub(wallet_ch).ApplyBatch(
                    wallet_pb2.ApplyBatchRequest(
                        request_id=uuid.uuid4().hex,
                        postings=[
                            wallet_pb2.Posting(
                                from_account="bank",
                                to_account=f"player:{player}",
                                amount=7,
                                reason=wallet_pb2.TRANSFER_REASON_BOWL_WIN,
                                table_id="t-forged",
                            )
                        ],
                    ),
                    metadata=md,
                    timeout=10,
                )
            if workload != "wallet":
                calls["CloseTable"] = table_pb2_grpc.TableServiceStub(table_ch).CloseTable(
                    table_pb2.CloseTableRequest(
                        table_id="t-none", reason="forged", closed_by="m", request_id="c1"
                    ),
                    metadata=md,
                    timeout=10,
                )
            for rpc, call in calls.items():
                code, reason = await _outcome(call)
                outcomes.add((code, reason))
                if code not in {"UNAUTHENTICATED", "PERMISSION_DENIED"}:
                    accepted.append((workload, label, f"{rpc}: {code} {reason}"))
    assert accepted == []
    # The refusals name what was wrong, never a crash (codes the docs list).
    assert {reason for _, reason in outcomes} <= {
        "TOKEN_MISSING",  # the edge's certificate alone: a proxy is nobody by itself
        "ADMIN_REQUIRED",
        "SERVICE_REQUIRED",
        "SERVICE_NOT_ALLOWED",
        "TOKEN_INVALID",
        "SERVICE_TOKEN_NOT_ACCEPTED",
        "OPERATOR_TOKEN_NOT_ACCEPTED",
    }, outcomes
    assert {"OPERATOR_TOKEN_NOT_ACCEPTED", "SERVICE_TOKEN_NOT_ACCEPTED", "ADMIN_REQUIRED"} <= {
        reason for _, reason in outcomes
    }
    assert await balance() == START
    audit = await admin.ListAuditEntries(
        admin_pb2.ListAuditEntriesRequest(player_id=player, page_size=100), metadata=support
    )
    assert [e for e in audit.entries if e.action == admin_pb2.ADMIN_ACTION_CREDIT] == []

    # Controls: the same calls do work for the callers they belong to.
    reply = await admin.CreditPlayer(
        admin_pb2.CreditPlayerRequest(
            player_id=player, amount=7, reason="goodwill", ticket="T-1", request_id="ok-1"
        ),
        metadata=production.operator("fay", "finance"),
    )
    assert reply.balance == START + 7
    worker = wallet_pb2_grpc.WalletServiceStub(production.channel("worker", production.wallet_port))
    applied = await worker.GetBalance(  # the worker by its certificate alone
        wallet_pb2.GetBalanceRequest(account=f"player:{player}"), timeout=10
    )
    assert applied.balance.tokens == START + 7


async def test_an_operator_cli_certificate_grants_nothing_without_a_provider_token(
    production: Production,
) -> None:
    """The CLI's certificate (a name that is no workload) only opens the TLS door."""
    admin = admin_pb2_grpc.AdminServiceStub(
        production.channel("operator-cli", production.wallet_port)
    )
    request = admin_pb2.ListAuditEntriesRequest(page_size=1)
    assert await _outcome(admin.ListAuditEntries(request, timeout=10)) == (
        "UNAUTHENTICATED",
        "TOKEN_MISSING",
    )
    ok = await admin.ListAuditEntries(
        request, metadata=production.operator("sue", "support"), timeout=10
    )
    assert ok is not None
    # The wallet reaches the table service as ``wallet`` by its certificate alone.
    close = admin.CloseTable(
        admin_pb2.CloseTableRequest(
            table_id="no-such-table", reason="stuck", ticket="T-2", request_id="c-ops"
        ),
        metadata=production.operator("otto", "ops"),
        timeout=10,
    )
    assert await _outcome(close) == ("NOT_FOUND", "TABLE_NOT_FOUND")


async def test_two_operators_means_two_subjects_of_the_provider(production: Production) -> None:
    admin = admin_pb2_grpc.AdminServiceStub(
        production.channel("operator-cli", production.wallet_port)
    )
    player = f"p{uuid.uuid4().hex[:12]}"
    own = TokenAuthority(TOKEN_SECRET).issue_player_token(player, "Pat").token
    await wallet_pb2_grpc.WalletServiceStub(
        production.channel("edge", production.wallet_port)
    ).OpenWallet(wallet_pb2.OpenWalletRequest(), metadata=bearer_metadata(own))
    rid = uuid.uuid4().hex
    asked = await admin.CreditPlayer(
        admin_pb2.CreditPlayerRequest(
            player_id=player, amount=THRESHOLD + 1, reason="refund", ticket="T-3", request_id=rid
        ),
        metadata=production.operator("ann", "finance"),
    )
    assert asked.pending_approval
    approve = admin_pb2.ApproveAdjustmentRequest(request_id=rid, reason="ok", ticket="T-3")
    # The same subject under another display name is still the same operator.
    for md in (
        production.operator("ann", "finance"),
        production.operator("ann", "finance", name="Someone Else"),
    ):
        assert await _outcome(admin.ApproveAdjustment(approve, metadata=md)) == (
            "PERMISSION_DENIED",
            "SAME_OPERATOR",
        )
    done = await admin.ApproveAdjustment(approve, metadata=production.operator("bob", "finance"))
    assert done.balance == START + THRESHOLD + 1
    assert done.entry.admin_id == "oidc:ann"


async def test_operator_tokens_live_at_most_the_configured_lifetime(
    production: Production,
) -> None:
    admin = admin_pb2_grpc.AdminServiceStub(
        production.channel("operator-cli", production.wallet_port)
    )
    request = admin_pb2.ListAuditEntriesRequest(page_size=1)
    now = int(time.time())
    ten_minutes = production.operator("sue", "support", iat=now, exp=now + 600)
    assert await admin.ListAuditEntries(request, metadata=ten_minutes) is not None
    two_hours = production.operator("sue", "support", iat=now, exp=now + 7200)
    assert await _outcome(admin.ListAuditEntries(request, metadata=two_hours)) == (
        "UNAUTHENTICATED",
        "TOKEN_LIFETIME_TOO_LONG",
    )


async def test_a_call_through_the_edge_without_a_token_must_sign_in(
    production: Production,
) -> None:
    """The edge forwards players' calls: its certificate alone is nobody, so a browser
    that lost its token hears UNAUTHENTICATED (sign in again), not a permission refusal."""
    wallet = wallet_pb2_grpc.WalletServiceStub(production.channel("edge", production.wallet_port))
    assert await _outcome(wallet.GetBalance(wallet_pb2.GetBalanceRequest(), timeout=10)) == (
        "UNAUTHENTICATED",
        "TOKEN_MISSING",
    )
