"""A whole Hand game through the real stack: four bots play 7 deals over gRPC against
``kishpa serve table``; the table writes the pot's ``buy_in`` and ``payout`` to its outbox and
enqueues them; a ``kishpa worker`` settles them into ``kishpa serve wallet`` (SQLite in a temp
dir). The pot is bought in and paid out exactly once, by ``games.hand``'s payout; the pot
account ends at zero and the wallet reconciles clean.

Real processes on Redis db 13 (the workers' test database; every key is the table's own) and
free ports, reusing the process helpers of the settlement tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pexpect
import pytest
import redis

from games.hand.game import GameState
from services.wallet.reconcile import reconcile_url
from shared import keys, stream
from tests.conftest import TEST_REDIS_URL
from tests.integration.workers_support import (
    KISHPA,
    SHARED,
    STARTING_TOKENS,
    Wallet,
    Worker,
    free_port,
    start_table_service,
    wait_for,
)
from tests.reference_settlement import add_movements, hand_movements
from tests.support.settled_games import TOKEN_SECRET, forget_tables, play_hand_game
from tests.support.stack import PROMPT, stack_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

__all__ = ["stack_env"]  # the fixture, imported so pytest finds it in this module


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The stack of this module runs on the table tests' own Redis database: the deadline
    index is per database, and other table services on a shared machine must not claim
    these tables' timers (they may not even know Hand)."""
    own = os.environ.get("TEST_TABLE_REDIS_URL")
    return own or urlunsplit(urlsplit(TEST_REDIS_URL)._replace(path="/11"))


PHASES = ["0:buy_in", "7:payout"]


async def test_a_hand_game_buys_into_the_pot_and_pays_it_out_once(tmp_path: Path) -> None:
    wallet = Wallet(free_port(), tmp_path / "wallet.sqlite3", SHARED).start(tmp_path / "wallet.log")
    worker = Worker(wallet.addr, tmp_path / "worker.log", SHARED).start(concurrency=2)
    table_process, port = start_table_service(tmp_path, worker, wallet, TOKEN_SECRET)
    client = SHARED.client()
    suffix = uuid.uuid4().hex[:8]
    players = [f"{name}-{suffix}" for name in ("ann", "bob", "cat", "dan")]
    table_id = ""
    try:
        table_id, view = await play_hand_game(port, players)
        assert view.round.round == 7
        state = json.loads(client.hget(keys.state(table_id), "state") or b"{}")
        game = GameState.from_dict(state["game"]["game"])
        assert game.finished

        outbox = {
            k.decode(): json.loads(v) for k, v in client.hgetall(keys.outbox(table_id)).items()
        }
        assert sorted(outbox) == PHASES
        wait_for(
            lambda: all(client.hexists(keys.settled(table_id), f) for f in PHASES),
            60,
            "the buy-in and the payout to be settled",
        )

        # Delivered again, both phases change nothing (the wallet's idempotency key).
        sender = worker.sender()
        replays = [
            sender.send_task(
                "kishpa.settle_phase",
                kwargs={"table_id": table_id, "round_no": int(f[0]), "phase": f[2:]},
            )
            for f in PHASES
        ]
        assert [r.get(timeout=30)["outcome"] for r in replays] == ["already_settled"] * 2

        # The wallet holds exactly games.hand's payout (stake in, the pot's split out), and the
        # tests' reference makes the same of the outbox records.
        payouts = game.payouts()
        expected = {
            p: STARTING_TOKENS - game.stake + payouts[seat] for seat, p in enumerate(players)
        }
        net: dict[str, int] = {}
        for field in PHASES:
            phase = field.split(":", 1)[1]
            add_movements(net, hand_movements(phase, outbox[field]["record"]))
        assert {p: STARTING_TOKENS + net.get(p, 0) for p in players} == expected
        assert net.get("pot", 0) == 0
        wallet_client = wallet.client()
        assert {p: wallet_client.balance(f"player:{p}") for p in players} == expected
        assert wallet_client.balance(f"pot:{table_id}") == 0
        assert sum(payouts) == game.pot == 4 * game.stake

        settled = [
            stream.decode(f)
            for _, f in client.xrange(keys.events(table_id))
            if f[b"type"] == b"settled"
        ]
        assert [(e.round, e.data["phase"]) for e in settled] == [(0, "buy_in"), (7, "payout")]
        assert settled[-1].data["balances"] == expected
        stored = client.hgetall(keys.balances(table_id))
        assert {k.decode(): int(v) for k, v in stored.items()} == expected

        report = reconcile_url(wallet.url)
        assert report.ok, list(report.discrepancies)
    finally:
        for process in (table_process, worker.process, wallet.process):
            if process is not None:
                process.stop()
        forget_tables(client, [table_id] if table_id else [])
        client.close()


def test_kishpa_bots_play_hand_tables_to_the_end(stack_env: dict[str, str]) -> None:
    """``kishpa bots --game hand``: bots log in, sit at private Hand tables through
    matchmaking and play all 7 deals of each through the SDK."""
    finished = subprocess.run(
        [KISHPA, "bots", "--game", "hand", "--tables", "3", "--pause-ms", "50"],
        env={**stack_env, "COLUMNS": "120"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    out = finished.stdout + finished.stderr
    assert finished.returncode == 0, out
    assert re.search(r"tables closed\s*│\s*3 / 3", out), out
    assert re.search(r"rounds played\s*│\s*21\s", out), out  # 3 tables x 7 deals
    assert re.search(r"errors\s*│\s*none", out), out


def test_kishpa_play_a_hand_deal_against_a_bot(stack_env: dict[str, str], redis_url: str) -> None:
    """``kishpa play --game hand`` in a pseudo-terminal: a few turns by hand, the rest with
    ``auto``, until the first deal is scored."""
    child = pexpect.spawn(
        KISHPA,
        ["play", "--game", "hand", "--name", "Ann", "--bots", "1", "--turn-seconds", "60"],
        env={**stack_env, "COLUMNS": "120", "TERM": "xterm"},
        encoding="utf-8",
        timeout=60,
    )
    table_id = ""
    client = redis.Redis.from_url(redis_url)
    try:
        child.expect(r"Table (\S+) · invite code")
        table_id = child.match.group(1)
        child.expect("Hand · deal 1")
        by_hand = 0
        while True:
            index = child.expect(
                [
                    "Your turn — draw",
                    "then discard a card",
                    "in a meld or lay-off",
                    r"Round 1: (?:deal|table) (?:NOT )?verified[^\r\n]*",
                ],
                timeout=120,
            )
            if index == 3:
                # The SDK recomputed the deal from the revealed seed (docs/fairness.md).
                verdict = child.match.group(0)
                assert verdict.startswith("Round 1: table verified (commitment, "), verdict
                assert re.search(r"your 1[45] dealt cards, turned card", verdict), verdict
                child.expect("Deal 1 scored")
                break
            child.expect(PROMPT)
            if index == 0 and by_hand < 2:
                child.sendline("draw")
                child.expect("You drew")
            elif index == 1 and by_hand < 2:
                child.sendline("discard 1")
                child.expect("You discarded")
                by_hand += 1
            else:
                child.sendline("auto")
                child.expect("Auto: ")
        assert by_hand >= 1
        child.sendline("help")
        child.expect("lay melds")
        child.sendline("discard 99")
        child.expect("You have no card '99'")
        child.sendline("quit")
        child.expect("Bye!")
        child.expect(pexpect.EOF, timeout=30)
        child.close()
        assert child.exitstatus == 0
    finally:
        if child.isalive():
            child.terminate(force=True)
        if table_id:
            for key in (keys.state, keys.events, keys.requests, keys.outbox, keys.balances):
                client.delete(key(table_id))
            client.zrem(keys.deadlines(table_id), table_id)
            client.zrem(keys.unsettled(table_id), table_id)
        client.close()
