"""The finance RPCs (export, reports, run records, the drift check's reads) through the real
wallet gRPC server, on real PostgreSQL and real SQLite.

Each module run gets its own ledger with a small scripted history in three periods; the
expected figures come from the test's own record of that history (and a bank load worked
out by hand), never from the code under test.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import text as sql

from devkit.postgres import temporary_postgres_database
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.errors import error_reason
from services.common.settings import Settings, load_settings
from services.wallet import finance
from services.wallet.batch import Posting
from services.wallet.database import create_wallet_engine
from services.wallet.ledger import Ledger
from services.wallet.migrate import upgrade
from services.wallet.reconcile import reconcile, reconcile_url
from services.wallet.server import WalletServer, create_wallet_server
from tests.conftest import TEST_DATABASE_URL

pytestmark = pytest.mark.integration

SECRETS = {"token_secret": "t" * 40, "service_secret": "s" * 40}
Md = tuple[tuple[str, str], ...]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def boundary() -> int:
    """A millisecond strictly after everything committed so far and strictly before
    anything committed next (waits, with a deadline, for the clock to pass it)."""
    cut = now_ms() + 1
    deadline = time.monotonic() + 5
    while now_ms() <= cut:
        assert time.monotonic() < deadline, "the clock did not move"
    return cut


@dataclass
class History:
    """What the test did to the ledger, and when (its own record)."""

    url: str
    players: list[str]
    tables: list[str]
    cuts: list[int]
    """t0 < period 1 < t1 < period 2 < t2 < period 3 < t3."""
    postings: list[tuple[int, Posting]] = field(default_factory=list)
    """(period 1..3, posting) in order, the hand-computed bank loads included."""


def _build(url: str) -> History:
    engine = create_wallet_engine(url, pool_size=1)
    ledger = Ledger(engine)
    tag = uuid.uuid4().hex[:8]
    p1, p2, p3 = (f"fin{n}-{tag}" for n in (1, 2, 3))
    kishpa, hand = f"tk-{tag}", f"th-{tag}"
    h = History(url, [p1, p2, p3], [kishpa, hand], [boundary()])

    def apply(period: int, key: str, postings: list[Posting]) -> None:
        ledger.apply_batch(key, postings)
        h.postings.extend((period, p) for p in postings)

    for p in (p1, p2, p3):
        ledger.open_wallet(p)
        h.postings.append((1, Posting("bank", f"player:{p}", 2000, "opening_grant")))
    h.cuts.append(boundary())
    bowl = f"bowl:{kishpa}"
    apply(
        2,
        f"kishpa:{kishpa}:1:start",
        [
            Posting(f"player:{p}", bowl, 5, "bowl_contribution", kishpa, 1, "start")
            for p in h.players
        ]
        + [Posting(f"player:{p2}", f"player:{p1}", 3, "bonus_doll", kishpa, 1, "start")],
    )
    apply(
        2,
        f"kishpa:{kishpa}:1:end",
        [
            Posting(f"player:{p2}", f"player:{p1}", 10, "win", kishpa, 1, "end"),
            Posting(f"player:{p3}", f"player:{p1}", 10, "win", kishpa, 1, "end"),
            Posting(bowl, f"player:{p1}", 15, "bowl_win", kishpa, 1, "end"),
        ],
    )
    apply(2, f"load-{tag}", [Posting("bank", f"player:{p3}", 50, "player_load")])
    h.cuts.append(boundary())
    pot = f"pot:{hand}"
    apply(
        3,
        f"kishpa:{hand}:0:buy_in",
        [Posting(f"player:{p}", pot, 20, "pot_buy_in", hand, 0, "buy_in") for p in h.players],
    )
    apply(
        3,
        f"kishpa:{hand}:0:payout",
        [
            Posting(pot, f"player:{p1}", 40, "pot_payout", hand, 0, "payout"),
            Posting(pot, f"player:{p2}", 20, "pot_payout", hand, 0, "payout"),
        ],
    )
    # p3 holds 2000 - 5 - 10 + 50 - 20 = 2015 and pays 3000: short 985, so the wallet loads
    # it from the bank in ceil(985 / 50) = 20 loads of 50 first (docs/rules/kishpa.md section 5).
    ledger.apply_batch(
        f"big-{tag}", [Posting(f"player:{p3}", f"player:{p1}", 3000, "win", kishpa, 2, "end")]
    )
    h.postings.extend(
        (3, Posting("bank", f"player:{p3}", 50, "bank_load", kishpa, 2, "end")) for _ in range(20)
    )
    h.postings.append((3, Posting(f"player:{p3}", f"player:{p1}", 3000, "win", kishpa, 2, "end")))
    h.cuts.append(boundary())
    engine.dispose()
    return h


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def history(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[History]:
    """A migrated ledger of each kind holding the scripted history."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('finance') / 'wallet.sqlite3'}"
        upgrade(url)
        yield _build(url)
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        yield _build(url)


@pytest.fixture
def settings(history: History) -> Settings:
    return load_settings("wallet", database_url=history.url, **SECRETS)


@pytest.fixture
async def stub(settings: Settings) -> AsyncIterator[wallet_pb2_grpc.WalletServiceStub]:
    server: WalletServer = create_wallet_server(settings, address="127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            yield wallet_pb2_grpc.WalletServiceStub(channel)
    finally:
        await server.stop(1)


@pytest.fixture
def authority(settings: Settings) -> TokenAuthority:
    return TokenAuthority.from_settings(settings)


@pytest.fixture
def svc(authority: TokenAuthority) -> Md:
    return bearer_metadata(authority.issue_service_token("worker").token)


def stamp(ms: int) -> Timestamp:
    value = Timestamp()
    value.FromMilliseconds(ms)
    return value


def reason_text(value: int) -> str:
    return wallet_pb2.TransferReason.Name(value).removeprefix("TRANSFER_REASON_").lower()  # type: ignore[arg-type]


def movement(t: wallet_pb2.Transfer) -> tuple[str, str, int, str, str, int, str]:
    p = t.posting
    return (
        p.from_account,
        p.to_account,
        p.amount,
        reason_text(p.reason),
        p.table_id,
        p.round,
        p.phase,
    )


def own(p: Posting) -> tuple[str, str, int, str, str, int, str]:
    return (p.from_account, p.to_account, p.amount, p.reason, p.table_id, p.round, p.phase)


async def export_all(
    stub: wallet_pb2_grpc.WalletServiceStub, md: Md, **fields: object
) -> list[wallet_pb2.ExportTransfersResponse]:
    request = wallet_pb2.ExportTransfersRequest(**fields)  # type: ignore[arg-type]
    return [chunk async for chunk in stub.ExportTransfers(request, metadata=md)]


async def test_an_export_streams_a_period_in_chunks_and_resumes_from_any_cursor(
    history: History, stub: wallet_pb2_grpc.WalletServiceStub, svc: Md
) -> None:
    t0, t3 = history.cuts[0], history.cuts[3]
    chunks = await export_all(stub, svc, since=stamp(t0), until=stamp(t3), chunk_size=7)
    rows = [t for c in chunks for t in c.transfers]
    # Every posting of the history, in the order the test made them (commit order).
    assert [movement(t) for t in rows] == [own(p) for _, p in history.postings]
    assert len(chunks) == -(-len(rows) // 7)
    assert all(len(c.transfers) == 7 for c in chunks[:-1])
    assert chunks[-1].cursor == ""
    assert len({t.transfer_id for t in rows}) == len(rows)
    assert all(t0 <= t.create_time.ToMilliseconds() < t3 for t in rows)
    assert all(t.batch_id > 0 for t in rows)
    # Resuming after chunk k gives exactly the rows after it.
    for k in (0, 2, len(chunks) - 2):
        rest = await export_all(
            stub, svc, since=stamp(t0), until=stamp(t3), chunk_size=7, cursor=chunks[k].cursor
        )
        resumed = [t.transfer_id for c in rest for t in c.transfers]
        assert resumed == [t.transfer_id for t in rows[(k + 1) * 7 :]]


async def test_an_export_as_columns_carries_the_history_and_resumes_the_same_way(
    history: History, stub: wallet_pb2_grpc.WalletServiceStub, svc: Md
) -> None:
    """``columns=True``: the same postings, ids, times and cursors, one column per field."""
    t0, t3 = history.cuts[0], history.cuts[3]
    period = {"since": stamp(t0), "until": stamp(t3), "chunk_size": 7}
    chunks = await export_all(stub, svc, columns=True, **period)
    assert all(not c.transfers for c in chunks)
    rows = [
        (src, dst, amount, reason_text(reason), table, rnd, phase)
        for c in chunks
        for src, dst, amount, reason, table, rnd, phase in zip(
            c.columns.from_account,
            c.columns.to_account,
            c.columns.amount,
            c.columns.reason,
            c.columns.table_id,
            c.columns.round,
            c.columns.phase,
            strict=True,
        )
    ]
    assert rows == [own(p) for _, p in history.postings]
    ids = [i for c in chunks for i in c.columns.transfer_id]
    times = [ms for c in chunks for ms in c.columns.create_time_ms]
    assert all(t0 <= ms < t3 for ms in times)
    assert all(len(c.columns.batch_id) == len(c.columns.seq) == 7 for c in chunks[:-1])
    # The same postings and cursors as the Transfer messages (checked against the history
    # in the test above).
    plain = await export_all(stub, svc, **period)
    assert ids == [t.transfer_id for c in plain for t in c.transfers]
    assert times == [t.create_time.ToMilliseconds() for c in plain for t in c.transfers]
    assert [c.cursor for c in chunks] == [c.cursor for c in plain]
    rest = await export_all(stub, svc, columns=True, cursor=chunks[1].cursor, **period)
    assert [i for c in rest for i in c.columns.transfer_id] == ids[14:]


async def test_export_filters_by_period_account_table_and_reason(
    history: History, stub: wallet_pb2_grpc.WalletServiceStub, svc: Md
) -> None:
    t0, t1, t2, t3 = history.cuts
    p3 = f"player:{history.players[2]}"
    kishpa = history.tables[0]
    cases = [
        ({"since": stamp(t1), "until": stamp(t2)}, lambda n, p: n == 2),
        ({"since": stamp(t0), "until": stamp(t3), "account": p3}, lambda n, p: p3 in own(p)[:2]),
        (
            {"since": stamp(t0), "until": stamp(t3), "table_id": kishpa},
            lambda n, p: p.table_id == kishpa,
        ),
        (
            {
                "since": stamp(t1),
                "until": stamp(t3),
                "reason": wallet_pb2.TRANSFER_REASON_WIN,
            },
            lambda n, p: n >= 2 and p.reason == "win",
        ),
    ]
    for fields, keep in cases:
        chunks = await export_all(stub, svc, **fields)
        got = [movement(t) for c in chunks for t in c.transfers]
        assert got == [own(p) for n, p in history.postings if keep(n, p)], fields
    # An empty period is one empty, final chunk.
    empty = await export_all(stub, svc, since=stamp(t3), until=stamp(t3 + 1))
    assert [(len(c.transfers), c.cursor) for c in empty] == [(0, "")]


def expected_totals(history: History, periods: set[int]) -> dict[str, tuple[int, int, int, int]]:
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for n, p in history.postings:
        if n in periods:
            t = totals[p.reason]
            t[0] += 1
            t[1] += p.amount
            t[2] += p.amount if p.from_account == "bank" else 0
            t[3] += p.amount if p.to_account == "bank" else 0
    return {r: (a, b, c, d) for r, (a, b, c, d) in totals.items()}


async def test_reason_totals_and_the_period_summary_match_the_record(
    history: History, stub: wallet_pb2_grpc.WalletServiceStub, svc: Md
) -> None:
    _, t1, _, t3 = history.cuts
    reply = await stub.GetReasonTotals(
        wallet_pb2.GetReasonTotalsRequest(since=stamp(t1), until=stamp(t3)), metadata=svc
    )
    got = {
        reason_text(t.reason): (t.postings, t.tokens, t.from_bank, t.to_bank) for t in reply.totals
    }
    assert got == expected_totals(history, {2, 3})
    # Worked by hand for period 3: 20 automatic loads of 50, and the 3,000 win.
    assert got["bank_load"] == (20, 1000, 1000, 0)

    summary = await stub.GetPeriodSummary(
        wallet_pb2.GetPeriodSummaryRequest(since=stamp(t1), until=stamp(t3)), metadata=svc
    )
    # Only this history is in the ledger: before t1 the three grants, 6,000 outstanding.
    assert summary.opening_outstanding == 6000
    # Issued since: a 50-token player load and 1,000 of bank loads; nothing returned.
    assert summary.closing_outstanding == 6000 + 50 + 1000
    opening = {k.kind: (k.tokens, k.accounts) for k in summary.opening}
    closing = {k.kind: (k.tokens, k.accounts) for k in summary.closing}
    assert opening == {"player": (6000, 3), "bowl": (0, 0), "pot": (0, 0), "bank": (-6000, 1)}
    # The bowl kept 0 (15 in, 15 won), the pot 0 (60 in, 60 paid out).
    assert closing == {"player": (7050, 3), "bowl": (0, 0), "pot": (0, 0), "bank": (-7050, 1)}
    moved = {
        reason_text(m.reason): (m.postings, m.tokens, m.from_bank, m.to_bank)
        for m in summary.movements
    }
    assert moved == expected_totals(history, {2, 3})
    # The movements come in the reasons' documented order.
    order = [m.reason for m in summary.movements]
    assert order == sorted(order)


async def test_balances_as_of_a_past_moment(
    history: History, stub: wallet_pb2_grpc.WalletServiceStub, svc: Md
) -> None:
    accounts = [f"player:{p}" for p in history.players] + [f"bowl:{history.tables[0]}"]
    for cut_index, cut in enumerate(history.cuts):
        expected = dict.fromkeys(accounts, 0)
        for n, p in history.postings:
            if n <= cut_index:
                for account, sign in ((p.from_account, -1), (p.to_account, 1)):
                    if account in expected:
                        expected[account] += sign * p.amount
        reply = await stub.GetBalancesAsOf(
            wallet_pb2.GetBalancesAsOfRequest(as_of=stamp(cut), accounts=accounts), metadata=svc
        )
        assert [(b.account, b.tokens, b.ils) for b in reply.balances] == [
            (a, expected[a], 2 * expected[a]) for a in accounts
        ]
        assert sum(k.tokens for k in reply.kinds) == 0
    # Today's figures at t3 are the balances now.
    # p3: 2,015 + 20 loads of 50 - 3,000 = 15 (loads come in whole 50s)
    assert expected[accounts[2]] == 15
    assert expected[accounts[0]] == 2000 - 5 + 3 + 10 + 10 + 15 - 20 + 40 + 3000


async def test_the_drift_checks_reads_of_one_table(
    history: History, stub: wallet_pb2_grpc.WalletServiceStub, svc: Md
) -> None:
    kishpa = history.tables[0]
    reply = await stub.GetTableLedger(
        wallet_pb2.GetTableLedgerRequest(table_id=kishpa), metadata=svc
    )
    assert (reply.bowl, reply.pot) == (0, 0)
    keys = [b.request_id for b in reply.batches]
    assert keys[:2] == [f"kishpa:{kishpa}:1:start", f"kishpa:{kishpa}:1:end"]
    assert len(keys) == 3
    assert keys[2].startswith("big-")
    assert [len(b.transfers) for b in reply.batches] == [4, 3, 21]
    # The drift check asks for the rounds it checks only: round 2 is the big batch alone.
    two = await stub.GetTableLedger(
        wallet_pb2.GetTableLedgerRequest(table_id=kishpa, rounds=[2]), metadata=svc
    )
    assert [b.request_id for b in two.batches] == keys[2:]
    assert (two.bowl, two.pot) == (reply.bowl, reply.pot)
    one = await stub.GetTableLedger(
        wallet_pb2.GetTableLedgerRequest(table_id=kishpa, rounds=[1, 7]), metadata=svc
    )
    assert [b.request_id for b in one.batches] == keys[:2]
    too_many = stub.GetTableLedger(
        wallet_pb2.GetTableLedgerRequest(table_id=kishpa, rounds=list(range(1, 102))),
        metadata=svc,
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await too_many
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    nobody = await stub.GetTableLedger(
        wallet_pb2.GetTableLedgerRequest(table_id="none-such"), metadata=svc
    )
    assert (nobody.bowl, nobody.pot, len(nobody.batches)) == (0, 0, 0)
    listed = await stub.ListTableAccounts(wallet_pb2.ListTableAccountsRequest(), metadata=svc)
    assert [b.account for b in listed.balances] == []  # every bowl and pot is back at 0


async def test_runs_are_recorded_and_listed(
    history: History, stub: wallet_pb2_grpc.WalletServiceStub, svc: Md, authority: TokenAuthority
) -> None:
    report = reconcile_url(history.url, source="test")
    assert report.ok
    assert report.run_id > 0
    run = wallet_pb2.ReconciliationRun(
        kind="drift",
        scope="3 tables",
        source="test",
        start_time=stamp(now_ms()),
        duration=Duration(nanos=12_000_000),
        ok=False,
        discrepancies=1,
        result_json=json.dumps({"differences": [{"check": "bowl_mismatch"}]}),
    )
    recorded = await stub.RecordReconciliationRun(
        wallet_pb2.RecordReconciliationRunRequest(run=run), metadata=svc
    )
    assert recorded.run_id > report.run_id
    admin = bearer_metadata(authority.issue_admin_token("fin", "fin", roles=("finance",)).token)
    listed = await stub.ListReconciliationRuns(
        wallet_pb2.ListReconciliationRunsRequest(), metadata=admin
    )
    newest = listed.runs[0]
    assert (newest.run_id, newest.kind, newest.ok, newest.discrepancies) == (
        recorded.run_id,
        "drift",
        False,
        1,
    )
    assert json.loads(newest.result_json)["differences"][0]["check"] == "bowl_mismatch"
    ledger_runs = await stub.ListReconciliationRuns(
        wallet_pb2.ListReconciliationRunsRequest(kind="ledger", page_size=1), metadata=svc
    )
    first = ledger_runs.runs[0]
    assert (first.run_id, first.kind, first.ok, first.source) == (
        report.run_id,
        "ledger",
        True,
        "test",
    )
    assert json.loads(first.result_json)["postings"] == len(history.postings)
    # Paging goes on past the page.
    assert ledger_runs.next_page_token or len(ledger_runs.runs) == 1


async def expect_error(call: object, code: grpc.StatusCode, reason: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    assert info.value.code() == code, info.value.details()
    assert error_reason(info.value) == reason


async def test_refusals_are_clear_and_change_nothing(
    history: History, stub: wallet_pb2_grpc.WalletServiceStub, svc: Md, authority: TokenAuthority
) -> None:
    t0, t3 = history.cuts[0], history.cuts[3]
    player = bearer_metadata(authority.issue_player_token(history.players[0], "x").token)
    admin = bearer_metadata(authority.issue_admin_token("fin", "fin", roles=("finance",)).token)
    support = bearer_metadata(authority.issue_admin_token("sup", "sup").token)
    period = {"since": stamp(t0), "until": stamp(t3)}
    denied = grpc.StatusCode.PERMISSION_DENIED
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    await expect_error(export_all(stub, player, **period), denied, "SERVICE_REQUIRED")
    await expect_error(export_all(stub, support, **period), denied, "ROLE_REQUIRED")
    await expect_error(
        stub.GetReasonTotals(wallet_pb2.GetReasonTotalsRequest(**period), metadata=player),
        denied,
        "SERVICE_REQUIRED",
    )
    await expect_error(
        stub.GetTableLedger(wallet_pb2.GetTableLedgerRequest(table_id="x"), metadata=player),
        denied,
        "SERVICE_REQUIRED",
    )
    # Only the jobs (the worker identity) store a run; a finance operator may not, and hears
    # the operators' reason for a service-only RPC (issue 32), not SERVICE_NOT_ALLOWED.
    run = wallet_pb2.ReconciliationRun(
        kind="drift", scope="s", source="t", start_time=stamp(t0), ok=True
    )
    await expect_error(
        stub.RecordReconciliationRun(
            wallet_pb2.RecordReconciliationRunRequest(run=run), metadata=admin
        ),
        denied,
        "SERVICE_REQUIRED",
    )
    for bad_run in (
        wallet_pb2.ReconciliationRun(
            kind="other", scope="s", source="t", start_time=stamp(t0), ok=True
        ),
        wallet_pb2.ReconciliationRun(
            kind="drift", scope="s", source="t", start_time=stamp(t0), ok=False
        ),
        wallet_pb2.ReconciliationRun(kind="drift", scope="s", source="t", ok=True),
    ):
        await expect_error(
            stub.RecordReconciliationRun(
                wallet_pb2.RecordReconciliationRunRequest(run=bad_run), metadata=svc
            ),
            invalid,
            "INVALID_RUN",
        )
    await expect_error(
        export_all(stub, svc, since=stamp(t3), until=stamp(t0)), invalid, "INVALID_PERIOD"
    )
    await expect_error(export_all(stub, svc, until=stamp(t3)), invalid, "INVALID_PERIOD")
    await expect_error(
        export_all(stub, svc, cursor="bm90IGEgY3Vyc29y", **period), invalid, "INVALID_CURSOR"
    )
    await expect_error(
        export_all(stub, svc, chunk_size=5001, **period), invalid, "INVALID_CHUNK_SIZE"
    )
    await expect_error(
        export_all(stub, svc, account="wallet:x", **period), invalid, "UNKNOWN_ACCOUNT"
    )
    await expect_error(
        stub.GetBalancesAsOf(
            wallet_pb2.GetBalancesAsOfRequest(as_of=stamp(t3), accounts=["bank"] * 101),
            metadata=svc,
        ),
        invalid,
        "TOO_MANY_ACCOUNTS",
    )
    await expect_error(
        stub.ListReconciliationRuns(
            wallet_pb2.ListReconciliationRunsRequest(kind="x"), metadata=svc
        ),
        invalid,
        "INVALID_RUN_KIND",
    )
    # A finance operator reads.
    ok = await stub.GetReasonTotals(wallet_pb2.GetReasonTotalsRequest(**period), metadata=admin)
    assert sum(t.postings for t in ok.totals) == len(history.postings)


@pytest.fixture(scope="module")
def property_ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    url = f"sqlite:///{tmp_path_factory.mktemp('asof') / 'wallet.sqlite3'}"
    upgrade(url)
    engine = create_wallet_engine(url, pool_size=1)
    yield Ledger(engine)
    engine.dispose()


@hsettings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    moves=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(1, 500), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_property_as_of_at_every_cut_is_the_prefix_of_the_postings(
    property_ledger: Ledger, moves: list[tuple[int, int, int, bool]]
) -> None:
    """Whatever batches run, the balances as of a moment between two of them are the sums of
    the postings before it, and a period's close adds up (opening + issued - returned)."""
    tag = uuid.uuid4().hex[:8]
    accounts = [f"bowl:prop{n}-{tag}" for n in range(3)]
    held = Counter[str]()
    prefixes: list[tuple[int, dict[str, int]]] = []
    for n, (src, dst, amount, from_bank) in enumerate(moves):
        cut = boundary()
        prefixes.append((cut, {a: held[a] for a in accounts}))
        source = (
            "bank" if from_bank or src == dst or held[accounts[src]] < amount else accounts[src]
        )
        property_ledger.apply_batch(
            f"prop-{tag}-{n}", [Posting(source, accounts[dst], amount, "bank_load")]
        )
        held[source] -= amount
        held[accounts[dst]] += amount
    prefixes.append((boundary(), {a: held[a] for a in accounts}))
    engine = property_ledger.engine
    for cut, expected in prefixes:
        assert finance.balances_as_of(engine, cut, accounts).balances == expected
    summary = finance.period_summary(engine, prefixes[0][0], prefixes[-1][0])
    issued = sum(m.from_bank - m.to_bank for m in summary.movements)
    assert summary.opening_outstanding + issued == summary.closing_outstanding
    assert issued == sum(held[a] for a in accounts)


def test_the_in_database_batch_check_finds_what_the_streaming_one_finds() -> None:
    """PostgreSQL compares batches with their results in one query; SQLite (and the baseline)
    streams both through Python. On a clean ledger and a doctored one they agree."""
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)
        engine = create_wallet_engine(url, pool_size=1)
        try:
            ledger = Ledger(engine)
            for player in ("a", "b"):
                ledger.open_wallet(player)
            for n in range(4):
                ledger.apply_batch(
                    f"k{n}",
                    [
                        Posting("player:a", "player:b", 1 + n, "win"),
                        Posting("player:b", "player:a", 1, "bonus_doll"),
                    ],
                )
            fast, slow = reconcile(engine, in_database=True), reconcile(engine, in_database=False)
            assert fast.ok
            assert slow.ok
            assert (fast.batches, fast.postings) == (slow.batches, slow.postings) == (6, 10)
            with engine.begin() as conn:
                conn.execute(
                    sql(
                        "UPDATE postings SET amount = amount + 5 WHERE seq = 0 AND batch_id = "
                        "(SELECT id FROM batches WHERE idempotency_key = :k)"
                    ),
                    {"k": "k1"},
                )
                conn.execute(
                    sql("UPDATE batches SET result = replace(result, '\"win\"', '\"bowl_win\"') "
                        "WHERE idempotency_key = :k"),
                    {"k": "k2"},
                )  # fmt: skip
                conn.execute(
                    sql(
                        "DELETE FROM postings WHERE seq = 1 AND batch_id = "
                        "(SELECT id FROM batches WHERE idempotency_key = :k)"
                    ),
                    {"k": "k3"},
                )
            fast, slow = reconcile(engine, in_database=True), reconcile(engine, in_database=False)
        finally:
            engine.dispose()
    found = [(d.check, d.subject) for d in fast.discrepancies]
    assert found == [(d.check, d.subject) for d in slow.discrepancies]
    doctored = {s.split("(")[-1].rstrip(")") for c, s in found if c == "batch_balanced"}
    assert doctored == {"k1", "k2", "k3"}
    assert ("postings_match", "player:a") in found
