"""``kishpa play`` through a pseudo-terminal against the real services as processes.

The wallet (SQLite in a temporary directory), table and matchmaking services run as
``kishpa serve`` subprocesses on free ports, with the machine's Redis; the test types at
``kishpa play --bots 3`` like a person would and plays a round to its end.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pexpect
import pytest
import redis

from shared import keys as table_keys
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis database of the matchmaking tests' own (db 14 of the test server unless
    ``TEST_MATCHMAKING_REDIS_URL`` says otherwise): the table services started here run the
    deadline timers of their database, and must neither serve nor be served by the tables
    of other tests on the shared machine."""
    own = os.environ.get("TEST_MATCHMAKING_REDIS_URL")
    return own or urlunsplit(urlsplit(TEST_REDIS_URL)._replace(path="/14"))


KISHPA = str(Path(sys.executable).with_name("kishpa"))
SCREENSHOTS = Path(
    os.environ.get(
        "KISHPA_SCREENSHOT_DIR", Path(__file__).resolve().parents[2] / "var" / "screenshots"
    )
)
"""Where the test leaves what the terminal showed (kishpa-play.log with its colours,
kishpa-verify.txt): the source of the captures in docs/fairness.md."""
SERVICES = ("wallet", "table", "matchmaking")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"service exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


@pytest.fixture(scope="module")
def stack_env(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[dict[str, str]]:
    """The environment a client needs to reach the three services started for the module."""
    tmp = tmp_path_factory.mktemp("stack")
    ports = {name: _free_port() for name in SERVICES}
    # A matchmaking key space of this stack's own: its seatings name the tables it made.
    prefix = f"kishpa:{{mm-e2e-{uuid.uuid4().hex[:12]}}}"
    env = dict(
        os.environ,
        KISHPA_MATCHMAKING_KEY_PREFIX=prefix,
        REDIS_URL=redis_url,
        DATABASE_URL=f"sqlite:///{tmp / 'wallet.sqlite3'}",
        KISHPA_TOKEN_SECRET=secrets.token_urlsafe(48),
        KISHPA_SERVICE_SECRET=secrets.token_urlsafe(48),
        # No Celery workers here: settlement records stay in the outbox.
        KISHPA_TABLE_ENQUEUE="0",
        KISHPA_LOG_FORMAT="json",
        KISHPA_LOG_LEVEL="WARNING",
        KISHPA_WALLET_ADDR=f"127.0.0.1:{ports['wallet']}",
        KISHPA_TABLE_ADDR=f"127.0.0.1:{ports['table']}",
        KISHPA_MATCHMAKING_ADDR=f"127.0.0.1:{ports['matchmaking']}",
    )
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for name in SERVICES:
            child_env = dict(
                env, KISHPA_GRPC_PORT=str(ports[name]), KISHPA_METRICS_PORT=str(_free_port())
            )
            log = (tmp / f"{name}.log").open("wb")
            process = subprocess.Popen(
                [KISHPA, "serve", name], env=child_env, stdout=log, stderr=subprocess.STDOUT
            )
            processes.append(process)
            _wait_for_port(ports[name], process)
        yield env
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # No workers settle these tables: their outbox records would stay forever.
        for table_id in _tables_seated_by(redis_url, prefix):
            _delete_table(redis_url, table_id)


def _tables_seated_by(redis_url: str, prefix: str) -> set[str]:
    """The tables this stack's matchmaking seated anyone at (from its own key space), and
    that key space deleted."""
    client = redis.Redis.from_url(redis_url)
    try:
        pattern = prefix.replace("{", "[{]").replace("}", "[}]") + ":*"
        tables: set[str] = set()
        for key in client.scan_iter(match=pattern):
            if key.decode().endswith(":table"):
                raw = client.get(key)
                if raw is not None:
                    tables.add(str(json.loads(raw)["table_id"]))
            client.delete(key)
        return tables
    finally:
        client.close()


def _delete_table(redis_url: str, table_id: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.delete(
        table_keys.state(table_id),
        table_keys.events(table_id),
        table_keys.requests(table_id),
        table_keys.outbox(table_id),
        table_keys.balances(table_id),
        table_keys.settled(table_id),
    )
    client.zrem(table_keys.deadlines(table_id), table_id)
    client.zrem(table_keys.unsettled(table_id), table_id)
    client.close()


PROMPT = "kishpa> "


def test_play_a_round_against_three_bots(stack_env: dict[str, str], redis_url: str) -> None:
    child = pexpect.spawn(
        KISHPA,
        ["play", "--name", "Ann", "--bots", "3", "--turn-seconds", "60", "--reveal-seconds", "3"],
        env={**stack_env, "COLUMNS": "100", "TERM": "xterm"},
        encoding="utf-8",
        timeout=60,
    )
    table_id = ""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    child.logfile_read = (SCREENSHOTS / "kishpa-play.log").open("w", encoding="utf-8")
    try:
        child.expect(r"Table (\S+) · invite code (?:\x1b\[[0-9;]*m)*([A-Z0-9]{6})")
        table_id = child.match.group(1)
        child.expect("Round 1")
        by_hand = 0
        while True:
            index = child.expect(
                [
                    "Your turn — you start",
                    "Your turn — draw",
                    "reveal the kishpa now",
                    "Round 1 is over",
                ],
                timeout=120,
            )
            if index == 3:
                break
            child.expect(PROMPT)
            if index == 2:
                child.sendline("reveal")
                child.expect("You revealed the kishpa")
            elif by_hand < 2:
                # The first turns by hand: draw (unless starting), then throw tile number 1.
                if index == 1:
                    child.sendline("draw")
                    child.expect("You drew")
                    child.expect("Now discard a tile")
                    child.expect(PROMPT)
                child.sendline("discard 1")
                child.expect("You discarded")
                by_hand += 1
            else:
                # Later turns: the bot's choice for the player ("auto").
                child.sendline("auto")
                child.expect("Auto: ")
        assert by_hand >= 1
        # The SDK recomputed the deal from the revealed seed (docs/fairness.md).
        child.expect(
            r"Round 1: table verified \(commitment, your client seed, your 1[45] dealt tiles"
        )
        child.sendline("help")
        child.expect("make the next round the last one")
        child.sendline("discard 99")
        child.expect("You have no tile '99'")
        child.sendline("quit")
        child.expect("Bye!")
        child.expect(pexpect.EOF, timeout=30)
        child.close()
        assert child.exitstatus == 0
        # Later, the same player checks the round again from the server's record of it.
        verify = subprocess.run(
            [KISHPA, "verify", "--table", table_id, "--round", "1"],
            env=stack_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        (SCREENSHOTS / "kishpa-verify.txt").write_text(
            f"$ kishpa verify --table {table_id} --round 1\n{verify.stdout}", encoding="utf-8"
        )
        assert "seat 1: table verified (commitment, your 15 dealt tiles" in verify.stdout
    finally:
        if child.isalive():
            child.terminate(force=True)
        if table_id:
            _delete_table(redis_url, table_id)
