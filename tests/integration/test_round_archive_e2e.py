"""The round archive through real processes: bots play a Kishpa game (two rounds) and a Hand
game (seven deals) through ``kishpa serve table``; a ``kishpa worker`` settles them into
``kishpa serve wallet`` and archives every ended round (SQLite and PostgreSQL archives).

Then, as a player would: the archived record of every round the stream still holds is the
same bytes the live table serves, and a round whose events left Redis (once the next was
dealt) is served by the archive alone; the tables' Redis keys are deleted (closed and
expired) and the rounds are still listed and each still verifies with the SDK's verifier;
the player's games carry the nets the reference settlement (tests/reference_settlement.py)
computes from the outbox.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import sqlalchemy as sa

from archive.database import create_archive_engine
from archive.migrate import upgrade
from archive.store import ArchiveStore
from cli.wallet_explain import RULES
from devkit.postgres import temporary_postgres_database
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import history_pb2, history_pb2_grpc, table_pb2, table_pb2_grpc
from sdk.fairness import evidence_from_record, verify_round
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.errors import error_reason
from services.wallet.schema import postings
from shared import keys, stream
from shared.phase_record import parse_phase_record
from tests.conftest import TEST_DATABASE_URL
from tests.integration.workers_support import (
    KISHPA,
    SHARED,
    Wallet,
    Worker,
    free_port,
    wait_for,
)
from tests.integration.workers_support import start_table_service as table_service
from tests.reference_settlement import add_movements, hand_movements, kishpa_movements
from tests.support.settled_games import (
    TABLE_KEYS,
    TOKEN_SECRET,
    forget_tables,
    play_hand_game,
    play_two_round_game,
)
from workers.archive_write import archive_phase

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(params=["sqlite", "postgres"])
def archive_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'archive.sqlite3'}"
        upgrade(url)
        yield url
        return
    with temporary_postgres_database(TEST_DATABASE_URL) as url:
        upgrade(url)  # production migrates PostgreSQL with `kishpa migrate`
        yield url


def _md(secret: str, player: str) -> Any:
    return bearer_metadata(TokenAuthority(secret).issue_player_token(player, player).token)


async def _records(
    port: int, secret: str, table_id: str, rounds: list[int], players: list[str]
) -> dict[tuple[int, str], bytes]:
    """Every seated player's GetRoundRecord of every round, as bytes."""
    out = {}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)
        for round_no in rounds:
            for player in players:
                answer = await stub.GetRoundRecord(
                    table_pb2.GetRoundRecordRequest(table_id=table_id, round=round_no),
                    metadata=_md(secret, player),
                )
                out[(round_no, player)] = answer.record.SerializeToString(deterministic=True)
    return out


async def _history(port: int, secret: str, player: str, table_id: str) -> tuple[Any, Any]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = history_pb2_grpc.HistoryServiceStub(channel)
        games = await stub.ListPlayerGames(
            history_pb2.ListPlayerGamesRequest(page_size=1), metadata=_md(secret, player)
        )
        rounds = await stub.ListTableRounds(
            history_pb2.ListTableRoundsRequest(table_id=table_id), metadata=_md(secret, player)
        )
        return games, rounds


def _settled_batches(client: Any, table_id: str, fields: list[str]) -> list[str]:
    marks = client.hgetall(keys.settled(table_id))
    # Fields starting with "_" are settle.lua's own (`_trimmed`, `_events_from`...).
    settled = {k.decode(): json.loads(v) for k, v in marks.items() if not k.startswith(b"_")}
    return [settled[f]["batch_id"] for f in fields if settled[f]["batch_id"]]


def _redelivered(client: Any, store: ArchiveStore, table_id: str, field: str) -> bool:
    """What a redelivered settlement task writes for an archived phase: the worker's own
    archive step, with the batch and postings the phase was settled with."""
    record = parse_phase_record(client.hget(keys.outbox(table_id), field))
    settled = [
        stream.decode(f)
        for _, f in client.xrange(keys.events(table_id))
        if f[b"type"] == b"settled"
    ]
    (event,) = [
        e for e in settled if e.round == record.round_no and e.data["phase"] == record.phase
    ]
    return archive_phase(
        client,
        store,
        record,
        batch_id=str(event.data["batch_id"]),
        postings=list(event.data["postings"]),
    )


def _kishpa(env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [KISHPA, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


async def _refusals(port: int, secret: str, players: list[str], table_id: str) -> None:
    """Client input mistakes get the documented statuses, never INTERNAL."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = history_pb2_grpc.HistoryServiceStub(channel)
        me = _md(secret, players[0])
        stranger = _md(secret, f"stranger-{uuid.uuid4().hex[:6]}")
        cases = [
            (
                stub.ListPlayerGames(history_pb2.ListPlayerGamesRequest(page_size=-1), metadata=me),
                grpc.StatusCode.INVALID_ARGUMENT,
                "INVALID_PAGE_SIZE",
            ),
            (
                stub.ListPlayerGames(
                    history_pb2.ListPlayerGamesRequest(page_token="x!"), metadata=me
                ),
                grpc.StatusCode.INVALID_ARGUMENT,
                "BAD_PAGE_TOKEN",
            ),
            (
                stub.ListPlayerGames(
                    history_pb2.ListPlayerGamesRequest(player_id=players[1]), metadata=me
                ),
                grpc.StatusCode.PERMISSION_DENIED,
                "NOT_YOURSELF",
            ),
            (
                stub.ListTableRounds(
                    history_pb2.ListTableRoundsRequest(table_id=table_id), metadata=stranger
                ),
                grpc.StatusCode.PERMISSION_DENIED,
                "NOT_SEATED",
            ),
            (
                stub.ListTableRounds(
                    history_pb2.ListTableRoundsRequest(table_id="no-such-table"), metadata=me
                ),
                grpc.StatusCode.NOT_FOUND,
                "TABLE_NOT_FOUND",
            ),
            (
                stub.ListTableRounds(history_pb2.ListTableRoundsRequest(table_id=""), metadata=me),
                grpc.StatusCode.INVALID_ARGUMENT,
                "BAD_TABLE_ID",
            ),
        ]
        # A token of one request is refused by another (the games of one player are not a
        # table's rounds).
        first = await stub.ListPlayerGames(
            history_pb2.ListPlayerGamesRequest(page_size=1), metadata=me
        )
        cases.append(
            (
                stub.ListTableRounds(
                    history_pb2.ListTableRoundsRequest(
                        table_id=table_id, page_token=first.next_page_token
                    ),
                    metadata=me,
                ),
                grpc.StatusCode.INVALID_ARGUMENT,
                "BAD_PAGE_TOKEN",
            ),
        )
        for call, code, reason in cases:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call
            assert refused.value.code() == code, refused.value.details()
            assert error_reason(refused.value) == reason


async def test_every_round_is_archived_once_serves_the_same_bytes_and_outlives_its_table(
    tmp_path: Path, archive_url: str
) -> None:
    archived = {"ARCHIVE_DATABASE_URL": archive_url}
    # A table service that cannot see the archive: the live answer to compare with.
    live_only = {"ARCHIVE_DATABASE_URL": f"sqlite:///{tmp_path / 'absent.sqlite3'}"}
    wallet = Wallet(free_port(), tmp_path / "wallet.sqlite3", SHARED).start(tmp_path / "wallet.log")
    worker = Worker(wallet.addr, tmp_path / "worker.log", SHARED, extra_env=archived)
    worker.start(concurrency=2)
    started = [
        table_service(tmp_path, worker, wallet, TOKEN_SECRET, "kishpa", **archived),
        table_service(tmp_path, worker, wallet, TOKEN_SECRET, "kishpa-live", **live_only),
        table_service(tmp_path, worker, wallet, TOKEN_SECRET, "hand", **archived),
        table_service(tmp_path, worker, wallet, TOKEN_SECRET, "hand-live", **live_only),
    ]
    (_, k_port), (_, k_live), (_, h_port), (_, h_live) = started
    client = SHARED.client()
    engine = create_archive_engine(archive_url)
    store = ArchiveStore(engine)
    suffix = uuid.uuid4().hex[:8]
    k_players = [f"{n}-{suffix}" for n in ("ann", "bob", "cat")]
    h_players = [f"{n}-{suffix}" for n in ("dan", "eve", "fay", "gus")]
    tables: list[str] = []
    try:
        k_table = await play_two_round_game(k_port, k_players, tables)
        h_table, _ = await play_hand_game(h_port, h_players)
        tables.append(h_table)
        k_fields = ["1:start", "1:end", "2:start", "2:end"]
        h_fields = ["0:buy_in", "7:payout"]
        for table_id, fields in ((k_table, k_fields), (h_table, h_fields)):
            wait_for(
                lambda t=table_id, f=fields: all(client.hexists(keys.settled(t), x) for x in f),
                90,
                f"every phase of {table_id} to be settled",
            )
        outbox = {
            t: {k.decode(): json.loads(v) for k, v in client.hgetall(keys.outbox(t)).items()}
            for t in (k_table, h_table)
        }

        # Exactly the ended rounds, once each, with the batches Redis says settled them.
        k_rows = store.table_rounds(k_table, after_round=0, limit=100)
        h_rows = store.table_rounds(h_table, after_round=0, limit=100)
        assert [r.round_no for r in k_rows] == [1, 2]
        assert [r.round_no for r in h_rows] == [1, 2, 3, 4, 5, 6, 7]
        assert all(r.record is not None for r in k_rows + h_rows)
        assert k_rows[0].batch_ids == tuple(_settled_batches(client, k_table, k_fields[:2]))
        assert k_rows[1].batch_ids == tuple(_settled_batches(client, k_table, k_fields[2:]))
        assert h_rows[-1].batch_ids == tuple(_settled_batches(client, h_table, h_fields))
        assert all(r.settled_round == 7 and not r.batch_ids for r in h_rows[:-1])

        # The nets are the reference settlement's, from the outbox records.
        for round_no, row in ((1, k_rows[0]), (2, k_rows[1])):
            net: dict[str, int] = {}
            for phase in ("start", "end"):
                record = outbox[k_table][f"{round_no}:{phase}"]["record"]
                add_movements(net, kishpa_movements(phase, record))
            assert row.results == {p: net.get(p, 0) for p in k_players}
        h_net: dict[str, int] = {}
        for field in h_fields:
            add_movements(h_net, hand_movements(field[2:], outbox[h_table][field]["record"]))
        assert h_rows[-1].results == {p: h_net.get(p, 0) for p in h_players}

        # A worker killed after the archive write and before settle.lua marked the phase
        # runs it again: the same rows, nothing more, no conflict (both games' endings).
        for table_id, field in ((k_table, "2:end"), (h_table, "7:payout")):
            again = _redelivered(client, store, table_id, field)
            assert again is False, (table_id, field)
        assert store.table_rounds(k_table, after_round=0, limit=100) == k_rows
        assert store.table_rounds(h_table, after_round=0, limit=100) == h_rows

        # The archive answers with the very bytes the live table serves: the rounds the
        # stream still holds (a Kishpa table's last round, every deal of a Hand game).
        k_archived = await _records(k_port, TOKEN_SECRET, k_table, [1, 2], k_players)
        assert {k: v for k, v in k_archived.items() if k[0] == 2} == await _records(
            k_live, TOKEN_SECRET, k_table, [2], k_players
        )
        deals = list(range(1, 8))
        h_archived = await _records(h_port, TOKEN_SECRET, h_table, deals, h_players)
        assert h_archived == await _records(h_live, TOKEN_SECRET, h_table, deals, h_players)

        # Round 1 left Redis once round 2 was dealt (settle.lua, at round 2's start: the
        # stream of a table that plays on holds its current round): the live table no
        # longer has it, the archive serves it.
        assert client.hget(keys.settled(k_table), "_events_from") is not None
        with pytest.raises(grpc.aio.AioRpcError) as trimmed:
            await _records(k_live, TOKEN_SECRET, k_table, [1], k_players[:1])
        assert trimmed.value.code() == grpc.StatusCode.NOT_FOUND
        assert error_reason(trimmed.value) == "ROUND_NOT_FOUND"
        assert (1, k_players[0]) in k_archived

        # The tables close and expire: their keys are gone from Redis.
        for table_id in (k_table, h_table):
            client.delete(*(key(table_id) for key in TABLE_KEYS))
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await _records(k_live, TOKEN_SECRET, k_table, [1], k_players[:1])
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        assert await _records(k_port, TOKEN_SECRET, k_table, [1, 2], k_players) == k_archived
        assert await _records(h_port, TOKEN_SECRET, h_table, deals, h_players) == h_archived
        for raw in [*k_archived.values(), *h_archived.values()]:
            record = table_pb2.RoundRecord.FromString(raw)
            # The deal's seat marks (record version 3) are archived too, and verified.
            assert record.record_version == 3, (record.table_id, record.round)
            result = verify_round(evidence_from_record(record))
            assert result.ok, (record.table_id, record.round, result)

        games, rounds = await _history(k_port, TOKEN_SECRET, k_players[1], k_table)
        assert [(g.table_id, g.round) for g in games.games] == [(k_table, 2)]  # newest first
        assert games.next_page_token
        assert games.games[0].net_tokens == k_rows[1].results[k_players[1]]
        assert games.games[0].seat_count == 3
        assert [r.round for r in rounds.rounds] == [1, 2]
        assert len(rounds.rounds[0].moves) > 0
        games, rounds = await _history(h_port, TOKEN_SECRET, h_players[0], h_table)
        assert [(g.table_id, g.round, g.game) for g in games.games] == [
            (h_table, 7, common_pb2.GAME_HAND)
        ]
        assert games.games[0].net_tokens == h_net.get(h_players[0], 0)
        assert [r.round for r in rounds.rounds] == deals
        await _refusals(k_port, TOKEN_SECRET, k_players, k_table)

        # `kishpa history` as the player: his games, and the table's rounds verified from
        # the archive (the table is gone from Redis).
        cli_env = {
            **SHARED.env(),
            "KISHPA_TOKEN": TokenAuthority(TOKEN_SECRET)
            .issue_player_token(k_players[0], "a")
            .token,
            "KISHPA_TABLE_ADDR": f"127.0.0.1:{k_port}",
        }
        games_out = _kishpa(cli_env, "history", "--json")
        assert [(g["table_id"], g["round"]) for g in games_out] == [(k_table, 2), (k_table, 1)]
        assert [g["net_tokens"] for g in games_out] == [
            k_rows[1].results[k_players[0]],
            k_rows[0].results[k_players[0]],
        ]
        rounds_out = _kishpa(cli_env, "history", "rounds", k_table, "--verify", "--json")
        assert [r["round"] for r in rounds_out] == [1, 2]
        assert all(r["verified"].startswith("table verified (") for r in rounds_out), rounds_out

        # Finance follows a posting of round 1's end to the round and the rule behind it.
        end_batch = k_rows[0].batch_ids[-1]
        ledger = sa.create_engine(wallet.url)
        with ledger.connect() as conn:
            transfer = conn.execute(
                sa.select(postings.c.id, postings.c.reason)
                .where(postings.c.batch_id == int(end_batch))
                .order_by(postings.c.seq)
            ).first()
        ledger.dispose()
        assert transfer is not None
        finance_env = {**SHARED.env(), "DATABASE_URL": wallet.url, **archived}
        (explained,) = _kishpa(finance_env, "wallet", "explain", str(transfer.id), "--json")
        assert explained["phase"] == {
            "table_id": k_table,
            "round": 1,
            "phase": "end",
            "game": "kishpa",
        }
        assert explained["round"]["round"] == 1
        assert explained["round"]["results"] == k_rows[0].results
        assert explained["round"]["batch_ids"] == list(k_rows[0].batch_ids)
        assert explained["transfer"]["reason"] == transfer.reason
        assert explained["transfer"]["rule"] == RULES[transfer.reason]
        assert transfer.id in [p["transfer_id"] for p in explained["batch"]["postings"]]
    finally:
        engine.dispose()
        for process, _ in started:
            process.stop()
        if wallet.process is not None:
            wallet.process.stop()
        worker.stop()
        forget_tables(client, tables)
        client.close()
