"""How the tests choose their servers (tests/backends.py): URL, then testcontainers, then local.

There is no Docker engine on this machine: the container path is checked with stand-in
starters that record what was asked, and the Docker probe against a real socket server.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import KINDS, LOCAL_URLS, Starters, choose, docker_reachable

pytestmark = pytest.mark.unit


def starters(started: list[str]) -> Starters:
    def container(kind: str) -> str:
        started.append(f"container:{kind}")
        return f"redis://container-{kind}:1/0"

    def local(kind: str) -> str:
        started.append(f"local:{kind}")
        return f"redis://local-{kind}:2/0"

    return Starters(
        container={k: (lambda k=k: container(k)) for k in KINDS},
        local={"redis-cluster": lambda: local("redis-cluster")},
    )


@pytest.mark.parametrize("kind", KINDS)
def test_an_explicit_url_wins_and_starts_nothing(kind: str) -> None:
    started: list[str] = []
    env = {
        "TEST_REDIS_URL": "redis://mine:6379/3",
        "TEST_REDIS_CLUSTER_URL": "redis+cluster://mine:7000",
        "TEST_DATABASE_URL": "postgresql+psycopg://u:secret@db:5432/x",
        "TEST_RABBITMQ_URL": "amqp://guest:guest@mq:5672//",
    }
    choice = choose(kind, env, docker=lambda: pytest.fail("no probe"), starters=starters(started))
    assert choice.source == "url"
    assert choice.url in env.values()
    assert started == []
    assert "secret" not in choice.describe()


@pytest.mark.parametrize("kind", ["redis", "postgres", "rabbitmq"])
def test_without_a_url_a_reachable_docker_engine_gives_a_container(kind: str) -> None:
    started: list[str] = []
    choice = choose(kind, {}, docker=lambda: True, starters=starters(started))
    assert (choice.source, started) == ("testcontainers", [f"container:{kind}"])


@pytest.mark.parametrize("kind", ["redis", "postgres", "rabbitmq"])
def test_without_url_or_docker_the_machines_servers_are_used(kind: str) -> None:
    started: list[str] = []
    choice = choose(kind, {}, docker=lambda: False, starters=starters(started))
    assert (choice.source, choice.url, started) == ("local", LOCAL_URLS[kind], [])


def test_a_cluster_without_url_is_started_locally_even_with_docker() -> None:
    started: list[str] = []
    selected = starters(started)
    selected.container = {k: v for k, v in selected.container.items() if k != "redis-cluster"}
    choice = choose("redis-cluster", {}, docker=lambda: True, starters=selected)
    assert (choice.source, started) == ("local", ["local:redis-cluster"])


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown server kind"):
        choose("mongodb", {}, docker=lambda: False, starters=Starters())


@pytest.fixture
def fake_engine(tmp_path: Path) -> Iterator[tuple[Path, list[bytes]]]:
    """A unix socket answering like a Docker engine's ``/_ping``."""
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    requests: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            requests.append(conn.recv(1024))
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, requests
    thread.join(5)
    server.close()


def test_the_docker_probe_pings_the_engine(fake_engine: tuple[Path, list[bytes]]) -> None:
    path, requests = fake_engine
    assert docker_reachable({"DOCKER_HOST": f"unix://{path}"})
    assert requests[0].startswith(b"GET /_ping ")


def test_no_engine_means_no_docker(tmp_path: Path) -> None:
    assert not docker_reachable({"DOCKER_HOST": f"unix://{tmp_path / 'absent.sock'}"})
    assert not docker_reachable({"DOCKER_HOST": "tcp://127.0.0.1:1"}, timeout_s=0.5)
