"""A player's entropy in every deal (issue 32): the SDK's defaults against real services.

A quick match of two SDK clients with their defaults (they declare, and contribute as soon as
the commitment is out) is dealt with both contributions, promptly (long before the 3 s
contribution deadline), and each player's verification names his own contribution; the
record names the declared and awaited seats. Clients that contribute only when asked
(``contribute=False``, what the SDK did by default before) are dealt in the commit that
seats them, with nothing in the deal the server did not choose: the deal-start latency of
both is measured from the table's own stream (``table_created`` to ``round_started``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from cli.play.bot import BotPlayer
from kishpa.table.v1 import table_pb2
from sdk import KishpaClient
from sdk.fairness import evidence_from_record, verify_round
from services.table.server import TableServer
from tests.support.fair_order import web_verdict
from tests.support.matchmaking_sdk import (  # the fixtures too
    ann_and_bob,
    client_for,
    env,
    prefix,
    quick_match,
    redis,
    redis_url,
    table_and_matchmaking,
    table_port,
    tables_made,
)
from tests.support.table_play import play_until
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

CONTRIBUTION_DEADLINE_MS = 3_000
__all__ = ["env", "prefix", "redis", "redis_url", "table_port", "tables_made"]


def _ms(event_id: str) -> int:
    return int(event_id.split("-", 1)[0])


async def _dealt(client: KishpaClient, table_id: str) -> table_pb2.TableView:

    async def dealt() -> table_pb2.TableView | None:
        view = await client.get_table(table_id)
        return view if view.round.round >= 1 else None

    return await wait_until(dealt, timeout=10, interval=0.02, message="the first deal")


async def _deal_start_ms(table: TableServer, table_id: str) -> tuple[int, list[Any]]:
    """Milliseconds from the table's creation to its first deal, on its own stream."""
    events = list(await table.tables.store.read_events(table_id, "0-0", count=2000))
    (created,) = [e for e in events if e.event.type == "table_created"]
    (started,) = [e for e in events if e.event.type == "round_started" and e.event.round == 1]
    return _ms(started.id) - _ms(created.id), events


async def test_a_quick_match_with_the_sdk_defaults_is_dealt_with_both_contributions(
    env: dict[str, Any], table_port: int, prefix: str, tables_made: set[str]
) -> None:
    async with table_and_matchmaking(env, table_port, prefix) as (table, mm):
        # Before: clients that neither declare nor contribute (the SDK's old default).
        async with (
            client_for(mm, table_port, contribute=False) as old_a,
            client_for(mm, table_port, contribute=False) as old_b,
        ):
            await old_a.login("Old A")
            await old_b.login("Old B")
            old_table = await quick_match(old_a, old_b)
            tables_made.add(old_table)
            await _dealt(old_a, old_table)
            before_ms, old_events = await _deal_start_ms(table, old_table)
            assert not [e for e in old_events if e.event.type == "contribution_accepted"]

        # After: the SDK's defaults.
        async with ann_and_bob(mm, table_port) as (ann, bob):
            table_id = await quick_match(ann, bob)
            tables_made.add(table_id)
            view = await _dealt(ann, table_id)
            after_ms, events = await _deal_start_ms(table, table_id)
            print(f"deal-start latency: {before_ms} ms without contributions, {after_ms} ms")
            # Both contributed promptly: dealt by the last contribution, not at the deadline.
            assert after_ms < CONTRIBUTION_DEADLINE_MS // 2, after_ms
            assert (
                not [
                    e
                    for e in events
                    if e.event.type == "deadline" and e.event.data.get("kind") == "contributions"
                ]
                or after_ms < CONTRIBUTION_DEADLINE_MS // 2
            )
            order = [
                e.event.type
                for e in events
                if e.event.type in ("seed_committed", "contribution_accepted", "round_started")
            ]
            assert order == [
                "seed_committed",
                "contribution_accepted",
                "contribution_accepted",
                "round_started",
            ]
            mine = {c.player_id: ann if c is ann else bob for c in (ann, bob)}
            assert ann.my_contribution(table_id, 1)
            assert bob.my_contribution(table_id, 1)

            channel = grpc.aio.insecure_channel(f"127.0.0.1:{table_port}")
            players = {
                p: BotPlayer(channel, c.session.token, bytes([n + 21]) * 80)
                for n, (p, c) in enumerate(mine.items())
            }
            await play_until(
                players,
                table_id,
                lambda v: v.round.round >= 2 or v.round.phase == table_pb2.ROUND_PHASE_ENDED,
            )
            await channel.close()
            assert view.round.round == 1
            for client in (ann, bob):
                record = await client.round_record(table_id, 1)
                assert record.record_version == 3
                assert list(record.bot_seats) == []
                assert list(record.declared_seats) == [0, 1]
                assert list(record.awaited_seats) == [0, 1]
                text = client.my_contribution(table_id, 1)
                assert text is not None
                result = verify_round(
                    evidence_from_record(record, my_contribution=text, i_declared=True)
                )
                assert result.ok, result.summary()
                assert result.whole_table
                assert result.contributed
                assert result.my_contribution == text
                assert "your contribution is in this deal" in result.summary()
                web = web_verdict(record)
                if web is not None:
                    assert web["ok"], web["summary"]
                    assert "your contribution is in this deal" in web["summary"]


async def test_a_player_alone_with_bots_through_the_sdk_defaults_gets_his_contribution_in(
    env: dict[str, Any],
    table_port: int,
    prefix: str,
    tables_made: set[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A private table of one player and a house bot is full, so it starts the moment it is
    created; the SDK declared for its creator, so the deal waits for him, and
    ``create_private_table`` returns once its contribution dealt it."""
    from games import table as games_table

    monkeypatch.setattr(games_table, "AUTOPLAY_DELAY_MS", 50)
    async with (
        table_and_matchmaking(env, table_port, prefix) as (table, mm),
        client_for(mm, table_port) as ann,
    ):
        await ann.login("Ann")
        private = await ann.create_private_table(
            2, bots=1, turn_seconds=60, reveal_window_seconds=2
        )
        table_id = private.table_id
        tables_made.add(table_id)
        text = ann.my_contribution(table_id, 1)
        assert text is not None
        view = await _dealt(ann, table_id)
        latency_ms, _ = await _deal_start_ms(table, table_id)
        print(f"deal-start latency alone with a bot: {latency_ms} ms")
        assert latency_ms < CONTRIBUTION_DEADLINE_MS // 2, latency_ms
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{table_port}")
        me = {ann.player_id: BotPlayer(channel, ann.session.token, b"\x17" * 80)}
        await play_until(
            me,
            table_id,
            lambda v: (
                v.round.round >= 2
                or v.round.phase == table_pb2.ROUND_PHASE_ENDED
                or v.status == table_pb2.TABLE_STATUS_CLOSED
            ),
        )
        await channel.close()
        assert view.round.round == 1
        record = await ann.round_record(table_id, 1)
        assert list(record.bot_seats) == [1]
        assert list(record.declared_seats) == [0]
        assert list(record.awaited_seats) == [0]
        result = verify_round(evidence_from_record(record, my_contribution=text, i_declared=True))
        assert result.ok, result.summary()
        assert result.bots_only
        assert result.my_contribution == text
        assert "your contribution is in this deal" in result.summary()


async def test_later_deals_wait_for_nobody_when_sdk_clients_watch(
    env: dict[str, Any], table_port: int, prefix: str, tables_made: set[str]
) -> None:
    """Two SDK clients with their defaults play a private table through the SDK's own bot
    loop (which watches the table): each later deal's commitment comes with the previous
    reveal, both contribute at once in the background, so the deal is dealt when its pause
    ends without waiting for anyone; every deal has both contributions and each player's
    verification names his own."""
    from cli.play.bot import BotSeat

    async with (
        table_and_matchmaking(env, table_port, prefix) as (table, mm),
        ann_and_bob(mm, table_port) as (ann, bob),
    ):
        private = await ann.create_private_table(
            2, turn_seconds=20, reveal_window_seconds=1, next_round_pause_ms=300
        )
        table_id = private.table_id
        tables_made.add(table_id)
        await bob.join_by_code(private.invite_code)
        seats = [BotSeat(ann, table_id, last_round_after=2), BotSeat(bob, table_id)]
        stats = await asyncio.wait_for(asyncio.gather(*(s.play() for s in seats)), 120)
        assert all(s.closed and not s.errors for s in stats), [s.errors for s in stats]
        events = list(await table.tables.store.read_events(table_id, "0-0", count=5000))
        waits = [
            e
            for e in events
            if e.event.type == "deadline" and e.event.data.get("kind") == "contributions"
        ]
        deals = sorted({e.event.round for e in events if e.event.type == "round_started"})
        assert deals == [1, 2, 3]
        # Deals 2 and 3 were due after the pause: both contributions were already in.
        assert [w.event.round for w in waits if w.event.round >= 1] == []
        for deal in deals:
            for client in (ann, bob):
                record = await client.round_record(table_id, deal)
                assert len(record.contributions) == 2, (deal, record.contributions)
                text = client.my_contribution(table_id, deal)
                assert text is not None, deal
                result = verify_round(
                    evidence_from_record(record, my_contribution=text, i_declared=True)
                )
                assert result.ok, result.summary()
                assert result.my_contribution == text
