"""The fuzz suite: every RPC of every service (enumerated from the running servers'
descriptors, so a new RPC is covered without a line here) gets a seeded corpus of bad
bodies, bad fields and bad credentials against real wallet, table and matchmaking servers.

Asserted for every case: the right status class (never INTERNAL or UNKNOWN, never accepted),
an answer within 5 s, a reason, a short message; and for the whole run: no traceback in the
servers' logs and no change of state (ledger rows and balances, table version and stream
length, matchmaking keys). ``test_the_fuzz_suite_catches_a_removed_validation`` shows the
suite failing when a validation is taken away.
"""

from __future__ import annotations

import dataclasses
import uuid
from types import MappingProxyType
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from sqlalchemy import text

from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from kishpa.wallet.v1 import wallet_pb2
from services.common import access
from services.common.auth import bearer_metadata
from shared import keys as table_keys
from tests.integration.edge import fuzz
from tests.integration.edge.conftest import LogCapture, Stack

pytestmark = pytest.mark.integration

SEED = 11


async def _state(stack: Stack, table_id: str) -> dict[str, Any]:
    """Everything a refused request must leave as it was."""
    with stack.wallet.engine.connect() as conn:
        ledger = {
            name: conn.execute(text(f"SELECT count(*) FROM {name}")).scalar_one()  # noqa: S608
            for name in ("accounts", "batches", "postings")
        }
        balances = dict(conn.execute(text("SELECT id, balance FROM accounts")).all())
    version = await stack.redis.hget(table_keys.state(table_id), "version")
    length = await stack.redis.xlen(table_keys.events(table_id))
    pattern = stack.prefix.replace("{", "[{]").replace("}", "[}]") + ":*"
    mm_keys = sorted([k async for k in stack.redis.scan_iter(match=pattern)])
    return {
        "ledger": ledger,
        "balances": balances,
        "table": (version, length),
        "matchmaking": mm_keys,
    }


async def _fixture_state(stack: Stack) -> tuple[str, Any]:
    """A player with an opened wallet at a table he created: state for refusals to touch."""
    _, md = stack.player()
    await stack.wallet_stub.OpenWallet(wallet_pb2.OpenWalletRequest(), metadata=md)
    created = await stack.table_stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=table_pb2.TableSettings(
                game=common_pb2.GAME_KISHPA, seats=2, turn_time=Duration(seconds=600)
            ),
            request_id=uuid.uuid4().hex,
        ),
        metadata=md,
    )
    stack.tables.add(created.table.table_id)
    return created.table.table_id, md


def _servers(stack: Stack) -> dict[str, tuple[str, ...]]:
    return {
        "wallet": stack.wallet.server.service_names,
        "table": stack.table.server.service_names,
        "matchmaking": stack.matchmaking.server.service_names,
    }


def _as_an_allowed_caller(stack: Stack, case: fuzz.Case) -> fuzz.Case:
    """A bad body of an RPC the player may not call goes out as an identity that may call it:
    the access table would refuse the player before the body is read, and the suite is there
    to reach the body checks (docs/api.md, *Who may call what*)."""
    if case.what.startswith("credentials:") or access.allowed(case.rpc.path, {access.PLAYER}):
        return case
    allowed = sorted(access.ACCESS[case.rpc.path])
    identity = next(i for i in allowed if i.startswith(("service:", "admin:")))
    kind, _, name = identity.partition(":")
    if kind == "service":
        metadata = tuple(stack.service(name))
    else:
        token = stack.authority.issue_admin_token("fuzz-op", "Fuzz", roles=(name,)).token
        metadata = bearer_metadata(token)
    return dataclasses.replace(case, metadata=metadata)


async def test_every_rpc_refuses_bad_bodies_fields_and_credentials_cleanly(
    stack: Stack, logs: LogCapture
) -> None:
    rpcs = fuzz.rpcs_of(_servers(stack))
    # Every service of the platform is reached, and each has its RPCs enumerated.
    services = {r.path.split("/")[1] for r in rpcs}
    assert {
        "kishpa.wallet.v1.WalletService",
        "kishpa.table.v1.TableService",
        "kishpa.matchmaking.v1.MatchmakingService",
        "kishpa.auth.v1.AuthService",
    } <= services
    table_id, md = await _fixture_state(stack)
    before = await _state(stack, table_id)
    key = stack.authority._token_secret
    assert key is not None
    cases = [
        _as_an_allowed_caller(stack, case)
        for case in fuzz.corpus(rpcs, tuple(md), fuzz.bad_tokens(key, None), SEED)
    ]
    assert len(cases) > 10 * len(rpcs)
    findings = await fuzz.run_corpus(stack.channels, cases)
    print(f"fuzz: {len(cases)} cases over {len(rpcs)} RPCs")
    assert findings == [], "\n".join(f"{f.case}: {f.problem}" for f in findings[:40])
    assert await _state(stack, table_id) == before
    assert logs.tracebacks() == []


async def test_the_fuzz_suite_catches_a_removed_validation(
    stack: Stack, logs: LogCapture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test of the test: take two field rules away (the 64-bit stream id, the seated
    player id's length) and the suite's cases for them report wrong answers; put them back
    and the same cases pass."""
    from services.common import validation

    table_id, md = await _fixture_state(stack)
    rpcs = {r.path: r for r in fuzz.rpcs_of(_servers(stack))}
    watch = rpcs["/kishpa.table.v1.TableService/WatchTable"]
    join = rpcs["/kishpa.table.v1.TableService/JoinTable"]
    invalid = frozenset({grpc.StatusCode.INVALID_ARGUMENT})
    cases = [
        fuzz.Case(
            watch,
            "after_event_id over 64 bits",
            table_pb2.WatchTableRequest(
                table_id=table_id, after_event_id="18446744073709551616-0"
            ).SerializeToString(),
            tuple(md),
            invalid,
        ),
        fuzz.Case(
            join,
            "player_id of 65 characters",
            table_pb2.JoinTableRequest(
                table_id=table_id, player_id="q" * 65, request_id="j"
            ).SerializeToString(),
            tuple(md),
            invalid,
        ),
    ]
    assert await fuzz.run_corpus(stack.channels, cases) == []

    crippled = dict(validation.RULES)
    del crippled["kishpa.table.v1.WatchTableRequest.after_event_id"]
    del crippled["kishpa.table.v1.JoinTableRequest.player_id"]
    monkeypatch.setattr(validation, "RULES", MappingProxyType(crippled))
    validation._refused_when_unset.cache_clear()
    findings = await fuzz.run_corpus(stack.channels, cases)
    problems = {f.case.split(" [")[0]: f.problem for f in findings}
    # Redis refuses the stream id: INTERNAL; the player id reaches the servicer: not
    # INVALID_ARGUMENT. Either way the suite fails, naming the RPC.
    assert "/kishpa.table.v1.TableService/WatchTable" in problems, findings
    assert "/kishpa.table.v1.TableService/JoinTable" in problems, findings
    assert logs.tracebacks() != []  # the INTERNAL left a traceback: also a failure

    monkeypatch.undo()
    validation._refused_when_unset.cache_clear()
    assert await fuzz.run_corpus(stack.channels, cases) == []
