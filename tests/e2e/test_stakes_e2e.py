"""Stakes end to end (issue 17): a Hand game at stake 100 and a Kishpa table at stake 50,
played by bots to the end through real processes — ``kishpa serve table``, ``kishpa worker``
(Celery) and ``kishpa serve wallet`` (SQLite for Hand, PostgreSQL for Kishpa) — on Redis db
13 and free ports. The wallet ends holding exactly what the rules engine says, the pot and
the bowl end at 0, and the ledger reconciles clean.

The process helpers are the settlement tests' (tests/integration/workers_support.py); the
bots' game loops those of the stake-1 tests (test_workers_table_e2e.py, test_hand_game.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from devkit.postgres import temporary_postgres_database
from games.hand.game import GameState
from games.kishpa.record import end_postings, start_postings
from services.wallet.migrate import upgrade
from services.wallet.reconcile import reconcile_url
from shared import keys
from tests.conftest import TEST_DATABASE_URL
from tests.integration.workers_support import (
    SHARED,
    STARTING_TOKENS,
    free_port,
    wait_for,
)
from tests.reference_settlement import add_movements, hand_movements, kishpa_movements
from tests.support.settled_games import (
    UrlWallet,
    play_hand_game,
    play_two_round_game,
    settlement_stack,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with temporary_postgres_database(TEST_DATABASE_URL, prefix="kishpa_stakes") as url:
        upgrade(url)
        yield url


def _outbox(client: redis.Redis, table_id: str) -> dict[str, Any]:
    raw = client.hgetall(keys.outbox(table_id))
    return {k.decode(): json.loads(v) for k, v in raw.items()}


async def test_a_hand_game_at_stake_100_settles_the_pot_exactly(tmp_path: Path) -> None:
    with settlement_stack(tmp_path) as stack:
        client, wallet = stack.client, stack.wallet
        suffix = uuid.uuid4().hex[:8]
        players = [f"{name}-{suffix}" for name in ("ann", "bob", "cat", "dan")]
        table_id, view = await play_hand_game(stack.port, players, stake=100)
        stack.tables.append(table_id)
        assert view.settings.stake == 100
        state = json.loads(client.hget(keys.state(table_id), "state") or b"{}")
        game = GameState.from_dict(state["game"]["game"])
        assert game.finished
        assert (game.stake, game.pot) == (100, 400)
        outbox = _outbox(client, table_id)
        assert sorted(outbox) == ["0:buy_in", "7:payout"]
        assert all(entry["record"]["stake"] == 100 for entry in outbox.values())
        wait_for(
            lambda: all(client.hexists(keys.settled(table_id), f) for f in outbox),
            60,
            "the buy-in and the payout to be settled",
        )
        # The engine's split of the 400-token pot, and the wallet holding exactly that.
        payouts = game.payouts()
        assert sum(payouts) == 400
        expected = {p: STARTING_TOKENS - 100 + payouts[s] for s, p in enumerate(players)}
        net: dict[str, int] = {}
        for field, entry in outbox.items():
            phase = field.split(":", 1)[1]
            add_movements(net, hand_movements(phase, entry["record"]))
        assert net.get("pot", 0) == 0
        assert {p: STARTING_TOKENS + net.get(p, 0) for p in players} == expected
        wallet_client = wallet.client()
        assert {p: wallet_client.balance(f"player:{p}") for p in players} == expected
        assert wallet_client.balance(f"pot:{table_id}") == 0
        report = reconcile_url(wallet.url)
        assert report.ok, list(report.discrepancies)


async def test_a_kishpa_table_at_stake_50_settles_every_round_exactly(
    tmp_path: Path, postgres_url: str
) -> None:
    wallet = UrlWallet(free_port(), tmp_path / "unused", SHARED)
    wallet.database_url = postgres_url
    with settlement_stack(tmp_path, wallet) as stack:
        client = stack.client
        suffix = uuid.uuid4().hex[:8]
        players = [f"{name}-{suffix}" for name in ("ann", "bob", "cat")]
        stack.creators.append(players[0])
        # Last round pressed in round 1: round 2 is the last and its end empties the bowl.
        table_id = await play_two_round_game(stack.port, players, stack.tables, stake=50)
        outbox = _outbox(client, table_id)
        assert sorted(outbox) == ["1:end", "1:start", "2:end", "2:start"]
        wait_for(
            lambda: all(client.hexists(keys.settled(table_id), f) for f in outbox),
            60,
            "every phase of the table to be settled",
        )
        expected = dict.fromkeys(players, STARTING_TOKENS)
        bowl = 0
        for field in ("1:start", "1:end", "2:start", "2:end"):
            record = outbox[field]["record"]
            assert record["stake"] == 50
            rules = start_postings if field.endswith("start") else end_postings
            postings = rules(record)
            # Every amount the rules moved is the stake-1 amount times 50 (the last-round
            # split is checked by its total: it divides the bowl's tokens).
            single = rules({**record, "stake": 1, "bowl": record["bowl"] // 50})
            assert record["bowl"] % 50 == 0
            kept = [(p.from_account, p.to_account, p.reason) for p in postings]
            assert [p.amount for p in postings if p.reason != "bowl_split"] == [
                50 * p.amount for p in single if p.reason != "bowl_split"
            ]
            assert sum(p.amount for p in postings if p.reason == "bowl_split") == 50 * sum(
                p.amount for p in single if p.reason == "bowl_split"
            )
            assert [k for k in kept if k[2] != "bowl_split"] == [
                (p.from_account, p.to_account, p.reason) for p in single if p.reason != "bowl_split"
            ]
            phase = field.split(":", 1)[1]
            for account, change in kishpa_movements(phase, record).items():
                if account in expected:
                    expected[account] += change
                else:
                    bowl += change
        assert bowl == 0
        assert sum(expected.values()) == STARTING_TOKENS * len(players)
        wallet_client = wallet.client()
        assert {p: wallet_client.balance(f"player:{p}") for p in players} == expected
        assert wallet_client.balance(f"bowl:{table_id}") == 0
        stored = client.hgetall(keys.balances(table_id))
        assert {k.decode(): int(v) for k, v in stored.items()} == expected
        report = reconcile_url(wallet.url)
        assert report.ok, list(report.discrepancies)
