"""The asyncio connection's write guard (services/common/redis_client.GuardedConnection),
against the test Redis: a connection whose transport the event loop tore down while it sat
in the pool raises ConnectionError or reconnects, never a transport-internal error.

redis-py 8.1.0 leaked all three (#4287: ``'NoneType' object has no attribute 'writelines'``,
``TypeError: 'NoneType' object is not callable``, uvloop's ``RuntimeError: ... the handler is
closed``); the cluster client retries only exact ``ConnectionError``s, so callers got INTERNAL
while a master restarted. 8.2 converts the first two itself (the controls below show it), not
uvloop's, and still fails a write on a connection closed while idle instead of reconnecting:
the guard stays for those two.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio
import redis.exceptions

from services.common.redis_client import GuardedConnection, async_client
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.integration


class _TornDownWriter:
    """A writer whose transport is lost the moment it is written to, as when the peer's
    reset is processed between redis-py's connected-check and its write."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.closing = False

    @property
    def transport(self) -> Any:
        writer = self

        class Transport:
            def is_closing(self) -> bool:
                return writer.closing

            def abort(self) -> None:
                writer.closing = True

            def close(self) -> None:
                writer.closing = True

        return Transport()

    def writelines(self, data: object) -> None:
        self.closing = True
        raise self.error

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self.closing = True

    async def wait_closed(self) -> None:
        return None


ERRORS = [
    AttributeError("'NoneType' object has no attribute 'writelines'"),
    TypeError("'NoneType' object is not callable"),
    RuntimeError("unable to perform operation on <TCPTransport closed=True>; handler is closed"),
]


def _connection(cls: type[redis.asyncio.Connection]) -> redis.asyncio.Connection:
    url = redis.asyncio.connection.parse_url(TEST_REDIS_URL)
    return cls(**{k: v for k, v in url.items() if k in ("host", "port", "db", "password")})


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
async def test_a_write_on_a_torn_down_transport_is_a_connection_error(error: BaseException) -> None:
    connection = _connection(GuardedConnection)
    try:
        await connection.connect()
        connection._writer = _TornDownWriter(error)  # type: ignore[assignment]
        with pytest.raises(redis.exceptions.ConnectionError, match=r"closed .*while writing"):
            await connection.send_command("PING", check_health=False)
        # ... and the connection is usable again: it reconnects on its next command.
        await connection.send_command("PING")
        assert await connection.read_response() in (b"PONG", "PONG")
    finally:
        await connection.disconnect()


@pytest.mark.parametrize("error", ERRORS[:2], ids=lambda e: type(e).__name__)
async def test_the_library_now_converts_the_asyncio_loops_errors(error: BaseException) -> None:
    # The control: redis-py 8.2's own connection does this part of the guard's job.
    connection = _connection(redis.asyncio.Connection)
    try:
        await connection.connect()
        connection._writer = _TornDownWriter(error)  # type: ignore[assignment]
        with pytest.raises(redis.exceptions.ConnectionError):
            await connection.send_command("PING", check_health=False)
    finally:
        await connection.disconnect()


async def test_without_the_guard_uvloops_error_leaks() -> None:
    # The control: redis-py's own connection lets uvloop's transport error through.
    error = ERRORS[2]
    connection = _connection(redis.asyncio.Connection)
    try:
        await connection.connect()
        connection._writer = _TornDownWriter(error)  # type: ignore[assignment]
        with pytest.raises(RuntimeError):
            await connection.send_command("PING", check_health=False)
    finally:
        await connection.disconnect()


async def test_without_the_guard_a_connection_closed_while_idle_fails_its_write() -> None:
    connection = _connection(redis.asyncio.Connection)
    try:
        await connection.connect()
        assert connection._writer is not None
        connection._writer.transport.abort()
        with pytest.raises(redis.exceptions.ConnectionError, match="before write"):
            await connection.send_command("PING", check_health=False)
    finally:
        await connection.disconnect()


async def test_a_connection_closed_while_idle_reconnects_before_writing() -> None:
    connection = _connection(GuardedConnection)
    try:
        await connection.connect()
        assert connection._writer is not None
        connection._writer.transport.abort()  # the peer's reset, seen by the event loop
        await connection.send_command("PING", check_health=False)
        assert await connection.read_response() in (b"PONG", "PONG")
    finally:
        await connection.disconnect()


async def test_the_service_clients_use_the_guarded_connection() -> None:
    client = async_client(TEST_REDIS_URL)
    try:
        assert client.connection_pool.connection_class is GuardedConnection
        assert await client.ping()
    finally:
        await client.aclose()
