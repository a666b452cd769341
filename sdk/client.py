"""``KishpaClient``: the typed Python client of the Kishpa services (start reading here).

One object per signed-in player::

    async with KishpaClient.from_env() as client:
        await client.login("Ann")
        ticket = await client.join_queue(seats=4)
        ticket = await client.wait_for_table(ticket.ticket_id)
        view = await client.get_table(ticket.table_id)
        async for event in client.watch_table(ticket.table_id, view.last_event_id):
            ...

What it does for you:

* **the token** — ``login`` stores it; every call carries it as ``authorization: Bearer``;
  it is refreshed (``RefreshToken``) shortly before it expires.
* **request ids** — every mutation gets a fresh ``request_id`` (pass your own to make a
  retry of *your* operation idempotent too).
* **retries** — a call whose server was unreachable (``UNAVAILABLE``, a passed deadline, a
  persisting conflict: the platform's one policy, :mod:`shared.retry`) is retried with the
  same request, so the server applies it at most once, with capped jittered pauses for up to
  30 s (``KISHPA_RETRY_BUDGET_S``, or ``retry=RetryPolicy(budget_s=...)``). While it retries
  the client is *reconnecting*: ``on_reconnecting(True)`` is called once, and
  ``on_reconnecting(False)`` when a call gets through again (``kishpa play`` shows it).
* **resuming** — ``watch_table`` reconnects after a dropped stream from the last event it
  delivered, for the same budget: nothing is lost and nothing is delivered twice.
* **errors** — a refused call raises :class:`~sdk.errors.KishpaError` (code, reason, message).
* **fair deals** — the client contributes to every deal of its tables by default: it declares
  so when it asks for a seat and sends a random contribution as soon as each deal's
  commitment is out (:mod:`sdk.contributing`; ``KishpaClient(contribute=False)`` opts out).

Messages are the generated ones (``kishpa.table.v1.table_pb2.TableView``...): their fields
are documented in ``protos/`` and ``docs/api.md``.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import grpc
import jwt

from kishpa.auth.v1 import auth_pb2, auth_pb2_grpc
from kishpa.common.v1 import common_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2_grpc as mm_grpc
from kishpa.table.v1 import history_pb2, history_pb2_grpc, table_pb2, table_pb2_grpc
from sdk.contributing import SEED_COMMITTED, Contributions, new_contribution
from sdk.errors import EVENTS_TRIMMED, KishpaError, error_reason, retry_after_s
from sdk.retry import (
    STREAM_RETRYABLE,
    Attempts,
    RetryPolicy,
    client_backoff,
    code_in,
    is_retryable,
    retrying,
)
from shared.tls import ClientTls, aio_channel, client_tls_from_env

R = TypeVar("R")

DEFAULT_MATCHMAKING_ADDR = "127.0.0.1:50053"
DEFAULT_TABLE_ADDR = "127.0.0.1:50052"
CALL_TIMEOUT_S = 15.0
REFRESH_MARGIN = 0.2
"""Refresh the token when less than this share of its lifetime is left."""
CHANNEL_OPTIONS = (
    # Keep long WatchTable streams alive through idle NATs (the server allows 20 s pings).
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    # Reconnect to a restarted server as often as the retry policy tries (gRPC's default
    # backoff grows to 120 s: a client could sit out a server's return for a minute).
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2_000),
)
TABLE_CLOSED = "table_closed"


def table_settings(
    game: common_pb2.Game.ValueType,
    seats: int,
    *,
    stake: int = 1,
    turn_seconds: int = 0,
    reveal_window_seconds: int = 0,
    next_round_pause_ms: int = 0,
    bots: int = 0,
) -> table_pb2.TableSettings:
    """Settings for a new table; a zero timer is left unset (the server's default);
    ``bots``: seats the table service fills with its house bots."""
    settings = table_pb2.TableSettings(game=game, seats=seats, stake=stake, bots=bots)
    if turn_seconds:
        settings.turn_time.FromSeconds(turn_seconds)
    if reveal_window_seconds:
        settings.reveal_window.FromSeconds(reveal_window_seconds)
    if next_round_pause_ms:
        settings.next_round_pause.FromMilliseconds(next_round_pause_ms)
    return settings


def _code(exc: BaseException) -> grpc.StatusCode | None:
    """The status a failed call ended with (``None``: not a call's failure)."""
    code = getattr(exc, "code", None) if isinstance(exc, grpc.RpcError) else None
    return code() if callable(code) else None


def _wait(exc: BaseException) -> float | None:
    """The pause a rate-limited call was told to take (``RESOURCE_EXHAUSTED`` with
    ``retry_after_ms``), else ``None``."""
    if not isinstance(exc, grpc.RpcError) or _code(exc) != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    return retry_after_s(exc)


def new_request_id() -> str:
    """A fresh idempotency key (a UUID)."""
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class Session:
    """Who the client is signed in as, and until when his token is valid."""

    player_id: str
    display_name: str
    token: str
    issued_at: float
    expires_at: float

    def needs_refresh(self, now: float) -> bool:
        """True when less than ``REFRESH_MARGIN`` of the token's lifetime is left."""
        lifetime = max(self.expires_at - self.issued_at, 1.0)
        return self.expires_at - now < lifetime * REFRESH_MARGIN


class KishpaClient:
    """A player's connection to the matchmaking (login) and table services."""

    def __init__(
        self,
        matchmaking_addr: str = DEFAULT_MATCHMAKING_ADDR,
        table_addr: str = DEFAULT_TABLE_ADDR,
        *,
        retry: RetryPolicy | None = None,
        clock: Callable[[], float] = time.time,
        on_reconnecting: Callable[[bool], None] | None = None,
        tls: ClientTls | None = None,
        tls_from_env: bool = True,
        contribute: bool = True,
    ) -> None:
        """Open (lazy) channels to both services; nothing is sent until the first call.

        ``retry``: the retry policy (default: :func:`sdk.retry.client_backoff`, 30 s);
        ``on_reconnecting(True/False)``: told when the client starts retrying an
        unreachable server and when it got through again. TLS: ``tls`` (the CA to verify
        the servers against, and a client certificate for mutual TLS), else
        ``KISHPA_TLS_CA_FILE`` (and ``KISHPA_TLS_CERT_FILE``/``_KEY_FILE``) from the
        environment unless ``tls_from_env=False``; without either, plaintext.
        ``contribute`` (default): declare at every seat and contribute to every deal
        (:mod:`sdk.contributing`); False: neither, unless asked."""
        if tls is None and tls_from_env:
            tls = client_tls_from_env()
        self._mm_channel = aio_channel(matchmaking_addr, tls, options=CHANNEL_OPTIONS)
        self._table_channel = aio_channel(table_addr, tls, options=CHANNEL_OPTIONS)
        self._owns_channels = True
        self._auth = auth_pb2_grpc.AuthServiceStub(self._mm_channel)
        self._mm = mm_grpc.MatchmakingServiceStub(self._mm_channel)
        self._tables = table_pb2_grpc.TableServiceStub(self._table_channel)
        self._history = history_pb2_grpc.HistoryServiceStub(self._table_channel)
        self.retry = retry or client_backoff()
        self._clock = clock
        self._session: Session | None = None
        self._device_id = uuid.uuid4().hex
        self.on_reconnecting = on_reconnecting
        self.reconnecting = False
        self.reconnects = 0
        """How many times the client started reconnecting (outages it rode out or not)."""
        self.contributes = contribute
        self.contributions = Contributions()

    @classmethod
    def over_channel(
        cls,
        channel: grpc.aio.Channel,
        *,
        retry: RetryPolicy | None = None,
        contribute: bool = True,
    ) -> KishpaClient:
        """A client whose calls all go over one existing channel (a test's, a tool's that
        reaches the services behind one address); ``close`` leaves the channel open."""
        client = cls.__new__(cls)
        client._mm_channel = client._table_channel = channel
        client._owns_channels = False
        client._auth = auth_pb2_grpc.AuthServiceStub(channel)
        client._mm = mm_grpc.MatchmakingServiceStub(channel)
        client._tables = table_pb2_grpc.TableServiceStub(channel)
        client._history = history_pb2_grpc.HistoryServiceStub(channel)
        client.retry = retry or client_backoff()
        client._clock = time.time
        client._session = None
        client._device_id = uuid.uuid4().hex
        client.on_reconnecting = None
        client.reconnecting = False
        client.reconnects = 0
        client.contributes = contribute
        client.contributions = Contributions()
        return client

    @classmethod
    def from_env(cls, *, retry: RetryPolicy | None = None) -> KishpaClient:
        """A client for ``KISHPA_MATCHMAKING_ADDR`` and ``KISHPA_TABLE_ADDR`` (or defaults)."""
        return cls(
            os.environ.get("KISHPA_MATCHMAKING_ADDR", DEFAULT_MATCHMAKING_ADDR),
            os.environ.get("KISHPA_TABLE_ADDR", DEFAULT_TABLE_ADDR),
            retry=retry,
        )

    async def __aenter__(self) -> KishpaClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close both channels (streams in progress end); not a channel it was given."""
        self.contributions.cancel()
        if not self._owns_channels:
            return
        await self._mm_channel.close()
        await self._table_channel.close()

    # ---- calls -------------------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The signed-in player (raises if ``login`` was not called)."""
        if self._session is None:
            raise RuntimeError("not signed in: call login() first")
        return self._session

    @property
    def player_id(self) -> str:
        """The signed-in player's id."""
        return self.session.player_id

    async def _metadata(self) -> tuple[tuple[str, str], ...]:
        session = self.session
        if session.needs_refresh(self._clock()):
            await self.refresh_token()
            session = self.session
        return (("authorization", "Bearer " + session.token),)

    async def _call(
        self,
        method: Callable[..., Any],
        request: Any,
        *,
        authenticated: bool = True,
    ) -> Any:
        """One unary call with the token, retried (same request) while unreachable, and
        after the wait the server names when it refuses a call as rate-limited (a refused
        call changed nothing, so sending it again is safe)."""

        async def attempt() -> Any:
            metadata = await self._metadata() if authenticated else None
            response = await method(request, metadata=metadata, timeout=CALL_TIMEOUT_S)
            self._set_reconnecting(False)
            return response

        def retryable(exc: BaseException) -> bool:
            code = _code(exc)
            return code is not None and is_retryable(code, hinted=_wait(exc) is not None)

        def note(_tried: int, exc: BaseException, _pause: float) -> None:
            if _wait(exc) is None:  # unreachable, not rate-limited
                self._set_reconnecting(True)

        try:
            return await retrying(
                attempt,
                self.retry,
                retry_on=retryable,
                pause_hint=_wait,
                on_retry=note,
                from_first_failure=True,  # the first try may take its whole deadline
            )
        except grpc.RpcError as exc:
            raise KishpaError.from_rpc(exc) from None

    def _reopening(self) -> Attempts:
        """The retry state of a watch stream: reopened after :data:`STREAM_RETRYABLE`
        codes, the budget counting from the first failure of an outage."""
        return Attempts(self.retry, retry_on=code_in(STREAM_RETRYABLE), from_first_failure=True)

    def _outage_of(self, attempts: Attempts, opened: float) -> None:
        """A stream that stayed open longer than the longest pause was up (a quiet table
        sends nothing for minutes), so its failure starts a new outage."""
        if time.monotonic() - opened > self.retry.max_delay_s:
            attempts.reset()

    def _set_reconnecting(self, reconnecting: bool) -> None:
        """Note (and tell ``on_reconnecting``) that the services became unreachable, or
        reachable again."""
        if reconnecting == self.reconnecting:
            return
        self.reconnecting = reconnecting
        if reconnecting:
            self.reconnects += 1
        if self.on_reconnecting is not None:
            self.on_reconnecting(reconnecting)

    # ---- sign-in -----------------------------------------------------------------------

    async def login(self, display_name: str, *, device_id: str | None = None) -> Session:
        """Sign in as a new guest named ``display_name`` (1-32 characters).

        ``device_id`` names the app install (guest logins are limited per device and the
        starting tokens are granted once per device); an app keeps one and passes it. By
        default each client object uses a random id of its own.

        The development login: the server mints a player id and opens his wallet with the
        starting tokens. Retried while the server is unreachable with one ``request_id`` for
        the whole attempt, so a retry whose first answer was lost gets the same player (and
        his starting tokens) rather than a second guest.
        """
        response: auth_pb2.LoginResponse = await self._call(
            self._auth.Login,
            auth_pb2.LoginRequest(
                display_name=display_name,
                device_id=device_id or self._device_id,
                request_id=new_request_id(),
            ),
            authenticated=False,
        )
        now = self._clock()
        self._session = Session(
            response.player_id,
            response.display_name,
            response.token,
            now,
            float(response.expire_time.seconds),
        )
        return self._session

    def use_token(self, token: str) -> Session:
        """Sign in with a player token obtained elsewhere (a saved session, a test).

        The player, name and lifetime are read from the token's claims; the server still
        verifies it on every call.
        """
        claims = jwt.decode(token, options={"verify_signature": False})
        self._session = Session(
            str(claims["sub"]),
            str(claims.get("name", "")),
            token,
            float(claims["iat"]),
            float(claims["exp"]),
        )
        return self._session

    async def sign_in_with_provider_token(self, provider_token: str) -> Session:
        """Sign in with an OpenID Connect provider's token (when the services accept one).

        The token is exchanged (``RefreshToken``) for a Kishpa player token of the player
        the provider's user maps to; that one is kept and refreshed as after ``login``.
        """
        try:
            response: auth_pb2.RefreshTokenResponse = await self._auth.RefreshToken(
                auth_pb2.RefreshTokenRequest(),
                metadata=(("authorization", "Bearer " + provider_token),),
                timeout=CALL_TIMEOUT_S,
            )
        except grpc.RpcError as exc:
            raise KishpaError.from_rpc(exc) from None
        return self.use_token(response.token)

    async def refresh_token(self) -> Session:
        """Exchange the still-valid token for a fresh one (done automatically before calls)."""
        session = self.session
        metadata = (("authorization", "Bearer " + session.token),)
        try:
            response: auth_pb2.RefreshTokenResponse = await self._auth.RefreshToken(
                auth_pb2.RefreshTokenRequest(), metadata=metadata, timeout=CALL_TIMEOUT_S
            )
        except grpc.RpcError as exc:
            raise KishpaError.from_rpc(exc) from None
        self._session = Session(
            session.player_id,
            session.display_name,
            response.token,
            self._clock(),
            float(response.expire_time.seconds),
        )
        return self._session

    # ---- matchmaking -------------------------------------------------------------------

    async def join_queue(
        self,
        seats: int = 4,
        stake: int = 1,
        game: common_pb2.Game.ValueType = common_pb2.GAME_KISHPA,
        *,
        client_seed: str = "",
        will_contribute: bool | None = None,
        request_id: str | None = None,
    ) -> mm_pb2.QueueTicket:
        """Queue for a quick match; the ticket is already MATCHED if this completed a table
        (or if the player already sits at a live table: he is sent back to it).
        ``client_seed`` is mixed into the shuffles of the table he is matched to.

        ``will_contribute``: this client promises to :meth:`contribute` to every deal as soon
        as its commitment is out (``TableView.next_deal``, the ``seed_committed`` event), so
        the table's deals, the first included, wait for it (up to a short deadline) and no
        deal is one the server alone chose (docs/fairness.md). A client that sets it and
        does not contribute slows its table by that deadline each deal. Unset: what the
        client does (``contribute``, by default it declares and contributes)."""
        response: mm_pb2.JoinQueueResponse = await self._call(
            self._mm.JoinQueue,
            mm_pb2.JoinQueueRequest(
                game=game,
                seats=seats,
                stake=stake,
                client_seed=client_seed,
                will_contribute=self._declares(will_contribute),
                request_id=request_id or new_request_id(),
            ),
        )
        if response.ticket.state == mm_pb2.TICKET_STATE_MATCHED:
            await self.contribute_to_open_deal(response.ticket.table_id)
        return response.ticket

    async def cancel_queue(self, ticket_id: str) -> mm_pb2.QueueTicket:
        """Leave the queue (KishpaError FAILED_PRECONDITION/TICKET_MATCHED if too late)."""
        response: mm_pb2.CancelQueueResponse = await self._call(
            self._mm.CancelQueue,
            mm_pb2.CancelQueueRequest(ticket_id=ticket_id, request_id=new_request_id()),
        )
        return response.ticket

    async def watch_queue(self, ticket_id: str) -> AsyncIterator[mm_pb2.QueueTicket]:
        """The ticket now, then each change, until matched, cancelled or expired.

        A dropped stream is reopened (the server sends the current state first).
        """
        attempts = self._reopening()
        while True:
            call = self._mm.WatchQueue(
                mm_pb2.WatchQueueRequest(ticket_id=ticket_id), metadata=await self._metadata()
            )
            opened = time.monotonic()
            try:
                async for message in call:
                    attempts.reset()
                    self._set_reconnecting(False)
                    if message.ticket.state == mm_pb2.TICKET_STATE_MATCHED:
                        # The first deal may be waiting for this seat's contribution.
                        await self.contribute_to_open_deal(message.ticket.table_id)
                    yield message.ticket
                return
            except grpc.RpcError as exc:
                self._outage_of(attempts, opened)
                pause = attempts.pause_after(exc)
                if pause is None:
                    raise KishpaError.from_rpc(exc) from None
            finally:
                call.cancel()
            self._set_reconnecting(True)
            await asyncio.sleep(pause)
            attempts.next()

    async def wait_for_table(self, ticket_id: str) -> mm_pb2.QueueTicket:
        """Wait until the ticket is matched and return it (``table_id`` and ``seat`` set).

        Raises KishpaError (FAILED_PRECONDITION, ``TICKET_CANCELLED``/``TICKET_EXPIRED``)
        if it ends any other way. (A ticket ``join_queue`` returned already MATCHED needs
        no waiting; one sending the player back to his table has no ticket id.)
        """
        last: mm_pb2.QueueTicket | None = None
        async for ticket in self.watch_queue(ticket_id):
            last = ticket
        if last is None or last.state != mm_pb2.TICKET_STATE_MATCHED:
            name = mm_pb2.TicketState.Name(last.state) if last else "TICKET_STATE_UNSPECIFIED"
            reason = name.replace("TICKET_STATE_", "TICKET_")
            raise KishpaError(
                grpc.StatusCode.FAILED_PRECONDITION, reason, f"the ticket ended {name}"
            )
        return last

    async def create_private_table(
        self,
        seats: int = 4,
        *,
        turn_seconds: int = 0,
        reveal_window_seconds: int = 0,
        next_round_pause_ms: int = 0,
        stake: int = 1,
        game: common_pb2.Game.ValueType = common_pb2.GAME_KISHPA,
        client_seed: str = "",
        will_contribute: bool | None = None,
        request_id: str | None = None,
        bots: int = 0,
    ) -> mm_pb2.CreatePrivateTableResponse:
        """Create a table for friends (the caller sits in seat 0 and is its creator;
        ``bots`` seats go to house bots: a table full of them starts at once).

        Share ``invite_code``; the game starts by itself when every seat is taken (or when
        the creator calls :meth:`start_game`). Zero timers mean the server's defaults.
        """
        response: mm_pb2.CreatePrivateTableResponse = await self._call(
            self._mm.CreatePrivateTable,
            mm_pb2.CreatePrivateTableRequest(
                settings=table_settings(
                    game,
                    seats,
                    stake=stake,
                    turn_seconds=turn_seconds,
                    reveal_window_seconds=reveal_window_seconds,
                    next_round_pause_ms=next_round_pause_ms,
                    bots=bots,
                ),
                client_seed=client_seed,
                will_contribute=self._declares(will_contribute),
                request_id=request_id or new_request_id(),
            ),
        )
        await self.contribute_to_open_deal(response.table_id)
        return response

    async def join_by_code(
        self,
        invite_code: str,
        *,
        client_seed: str = "",
        will_contribute: bool | None = None,
        request_id: str | None = None,
    ) -> mm_pb2.JoinByCodeResponse:
        """Sit at the private table of an invite code (case and dashes do not matter;
        ``will_contribute`` as for :meth:`join_queue`).

        KishpaError NOT_FOUND (``INVITE_NOT_FOUND``) for a wrong or expired code,
        FAILED_PRECONDITION (``TABLE_FULL``, ``GAME_STARTED``) when it takes nobody more.
        """
        response: mm_pb2.JoinByCodeResponse = await self._call(
            self._mm.JoinByCode,
            mm_pb2.JoinByCodeRequest(
                invite_code=invite_code,
                client_seed=client_seed,
                will_contribute=self._declares(will_contribute),
                request_id=request_id or new_request_id(),
            ),
        )
        await self.contribute_to_open_deal(response.table_id)
        return response

    async def my_table(self) -> mm_pb2.GetMyTableResponse | None:
        """The live table the player sits at, or None (a reconnecting app asks this first)."""
        try:
            response: mm_pb2.GetMyTableResponse = await self._call(
                self._mm.GetMyTable, mm_pb2.GetMyTableRequest()
            )
        except KishpaError as exc:
            if exc.code == grpc.StatusCode.NOT_FOUND:
                return None
            raise
        return response

    # ---- the table ---------------------------------------------------------------------

    async def get_table(self, table_id: str) -> table_pb2.TableView:
        """The table as this player may see it (his own rack, public facts)."""
        response: table_pb2.GetTableResponse = await self._call(
            self._tables.GetTable, table_pb2.GetTableRequest(table_id=table_id)
        )
        return response.table

    async def start_game(self, table_id: str) -> table_pb2.TableView:
        """Start the first round with the players seated (creator only, 2 or more)."""
        response: table_pb2.StartGameResponse = await self._call(
            self._tables.StartGame,
            table_pb2.StartGameRequest(table_id=table_id, request_id=new_request_id()),
        )
        return response.table

    async def leave_table(self, table_id: str) -> table_pb2.TableView:
        """Leave a table: before the game the seat is freed; during it the server plays the
        seat (auto-play) until the player acts again."""
        response: table_pb2.LeaveTableResponse = await self._call(
            self._tables.LeaveTable,
            table_pb2.LeaveTableRequest(table_id=table_id, request_id=new_request_id()),
        )
        return response.table

    async def draw(self, table_id: str, *, from_discards: bool = False) -> table_pb2.DrawResponse:
        """Draw from the pile, or (``from_discards``) the top discard; the tile is in
        ``response.tile``."""
        source = table_pb2.DRAW_SOURCE_DISCARD if from_discards else table_pb2.DRAW_SOURCE_PILE
        response: table_pb2.DrawResponse = await self._call(
            self._tables.Draw,
            table_pb2.DrawRequest(table_id=table_id, source=source, request_id=new_request_id()),
        )
        return response

    async def discard(self, table_id: str, tile_id: int) -> table_pb2.TableView:
        """Discard a tile of the rack (by id), ending the turn."""
        response: table_pb2.DiscardResponse = await self._call(
            self._tables.Discard,
            table_pb2.DiscardRequest(
                table_id=table_id, tile_id=tile_id, request_id=new_request_id()
            ),
        )
        return response.table

    async def win(
        self,
        table_id: str,
        discard_tile_id: int,
        arrangement: Iterable[Sequence[int]] = (),
    ) -> table_pb2.WinResponse:
        """Discard the final tile and claim the win (the server checks, or arranges itself)."""
        groups = [table_pb2.ProposedGroup(tile_ids=list(g)) for g in arrangement]
        response: table_pb2.WinResponse = await self._call(
            self._tables.Win,
            table_pb2.WinRequest(
                table_id=table_id,
                discard_tile_id=discard_tile_id,
                arrangement=groups,
                request_id=new_request_id(),
            ),
        )
        return response

    async def reveal_kishpa(self, table_id: str) -> table_pb2.TableView:
        """Reveal the kishpa the player holds, while a reveal window is open."""
        response: table_pb2.RevealKishpaResponse = await self._call(
            self._tables.RevealKishpa,
            table_pb2.RevealKishpaRequest(table_id=table_id, request_id=new_request_id()),
        )
        return response.table

    async def decline_reveal(self, table_id: str) -> table_pb2.TableView:
        """Pass in the open reveal window (it closes early when everyone acted)."""
        response: table_pb2.DeclineRevealResponse = await self._call(
            self._tables.DeclineReveal,
            table_pb2.DeclineRevealRequest(table_id=table_id, request_id=new_request_id()),
        )
        return response.table

    async def press_last_round(self, table_id: str) -> table_pb2.TableView:
        """Make the next round the table's last (creator only)."""
        response: table_pb2.PressLastRoundResponse = await self._call(
            self._tables.PressLastRound,
            table_pb2.PressLastRoundRequest(table_id=table_id, request_id=new_request_id()),
        )
        return response.table

    async def set_rack_order(self, table_id: str, tile_ids: Sequence[int]) -> table_pb2.Rack:
        """Store the order the player arranged his rack in (every tile id once)."""
        response: table_pb2.SetRackOrderResponse = await self._call(
            self._tables.SetRackOrder,
            table_pb2.SetRackOrderRequest(
                table_id=table_id, tile_ids=list(tile_ids), request_id=new_request_id()
            ),
        )
        return response.rack

    async def hint(self, table_id: str) -> table_pb2.GetHintResponse:
        """The server's best arrangement of the rack and any winning discard."""
        response: table_pb2.GetHintResponse = await self._call(
            self._tables.GetHint, table_pb2.GetHintRequest(table_id=table_id)
        )
        return response

    # ---- Hand (Rummy 51) moves ----------------------------------------------------------

    async def lay_melds(
        self,
        table_id: str,
        melds: Iterable[Sequence[int]],
        kinds: Sequence[str | None] = (),
    ) -> table_pb2.TableView:
        """Hand: lay new melds (card ids, a run low to high); the first ones must make 51.

        ``kinds`` ("run"/"set", one per meld, None or missing: let the server tell) matter
        only when jokers make a meld read both ways (``J1 KH J2``: the run Q K A or a set).
        """
        named = {"run": common_pb2.GROUP_KIND_RUN, "set": common_pb2.GROUP_KIND_SET}
        proposed = []
        for n, meld in enumerate(melds):
            kind = named.get(kinds[n] or "") if n < len(kinds) else None
            proposed.append(
                table_pb2.ProposedMeld(
                    tile_ids=list(meld), kind=kind or common_pb2.GROUP_KIND_UNSPECIFIED
                )
            )
        response: table_pb2.LayMeldsResponse = await self._call(
            self._tables.LayMelds,
            table_pb2.LayMeldsRequest(
                table_id=table_id, melds=proposed, request_id=new_request_id()
            ),
        )
        return response.table

    async def lay_off(
        self, table_id: str, meld_id: int, tile_id: int, *, end: str = ""
    ) -> table_pb2.TableView:
        """Hand: add a card to a meld on the table (``end`` "low"/"high" for a run)."""
        ends = {"low": table_pb2.RUN_END_LOW, "high": table_pb2.RUN_END_HIGH}
        response: table_pb2.LayOffResponse = await self._call(
            self._tables.LayOff,
            table_pb2.LayOffRequest(
                table_id=table_id,
                meld_id=meld_id,
                tile_id=tile_id,
                end=ends.get(end, table_pb2.RUN_END_UNSPECIFIED),
                request_id=new_request_id(),
            ),
        )
        return response.table

    async def release_joker(
        self, table_id: str, meld_id: int, tile_ids: Sequence[int]
    ) -> table_pb2.TableView:
        """Hand: put real card(s) in place of a meld's joker and take the joker."""
        response: table_pb2.ReleaseJokerResponse = await self._call(
            self._tables.ReleaseJoker,
            table_pb2.ReleaseJokerRequest(
                table_id=table_id,
                meld_id=meld_id,
                tile_ids=list(tile_ids),
                request_id=new_request_id(),
            ),
        )
        return response.table

    async def undo_turn(self, table_id: str) -> table_pb2.TableView:
        """Hand: take back a turn begun from the discard pile."""
        response: table_pb2.UndoTurnResponse = await self._call(
            self._tables.UndoTurn,
            table_pb2.UndoTurnRequest(table_id=table_id, request_id=new_request_id()),
        )
        return response.table

    async def contribute(
        self, table_id: str, deal: int, contribution: str | None = None
    ) -> tuple[str, table_pb2.TableView]:
        """Contribute to the shuffle of the table's coming ``deal`` (``TableView.next_deal``,
        whose commitment is already published): by default 16 fresh random bytes in hex.
        Returns what was sent and the table after it (docs/fairness.md)."""
        text = contribution if contribution is not None else new_contribution()
        response: table_pb2.ContributeResponse = await self._call(
            self._tables.Contribute,
            table_pb2.ContributeRequest(
                table_id=table_id, deal=deal, contribution=text, request_id=new_request_id()
            ),
        )
        self.contributions.accepted[(table_id, deal)] = text
        return text, response.table

    def my_contribution(self, table_id: str, deal: int) -> str | None:
        """This client's contribution accepted for ``deal`` at the table (None: none known):
        ``sdk.fairness.evidence_from_record(record, my_contribution=...)`` names it."""
        return self.contributions.of(table_id, deal)

    def _declares(self, will_contribute: bool | None) -> bool:
        return self.contributes if will_contribute is None else will_contribute

    async def contribute_to_open_deal(self, table_id: str) -> str | None:
        """When this client contributes: send a contribution to the table's open deal unless
        it already did (the contribution, or None: nothing open, refused, or opted out)."""
        if not self.contributes or not table_id:
            return None
        try:
            view = await self.get_table(table_id)
        except KishpaError:
            return None
        if not view.next_deal or view.contributed or not view.HasField("my_seat"):
            return None
        return await self._send_contribution(table_id, view.next_deal)

    async def contribute_once(self, table_id: str, deal: int) -> str | None:
        """Contribute to ``deal`` unless this client already did or tried (the text when
        accepted; None when already sent, or refused because it is too late)."""
        return await self._send_contribution(table_id, deal)

    async def _send_contribution(self, table_id: str, deal: int) -> str | None:
        if not self.contributions.should_send(table_id, deal):
            return None
        return await self.contributions.send(table_id, deal, self._contribute_text)

    async def _contribute_text(self, table_id: str, deal: int, text: str) -> None:
        await self.contribute(table_id, deal, text)

    def _contribute_at_once(self, table_id: str, deal: int) -> None:
        self.contributions.in_background(lambda: self._send_contribution(table_id, deal))

    def _contribute_on_commitment(
        self, table_id: str, batch: Sequence[table_pb2.TableEvent]
    ) -> None:
        """A deal's commitment is out: contribute at once, before the batch is handed on
        (the deal may be waiting for this seat). Only the batch's newest commitment: older
        ones (a stream replayed from the start) are for deals already dealt."""
        if not self.contributes:
            return
        committed = [e for e in batch if e.WhichOneof("event") == SEED_COMMITTED]
        if committed:
            self._contribute_at_once(table_id, committed[-1].seed_committed.deal)

    async def ready(self, table_id: str, round_no: int) -> table_pb2.TableView:
        """Between deals: ready for the deal after ``round_no`` (the one that ended); the
        next deal comes once every human seat said it, or when the table's pause passed."""
        response: table_pb2.ReadyResponse = await self._call(
            self._tables.Ready,
            table_pb2.ReadyRequest(table_id=table_id, round=round_no, request_id=new_request_id()),
        )
        return response.table

    async def play_again(self, table_id: str) -> table_pb2.TableView:
        """At a closed table: accept a new game with the same players, bots and stake; the
        new table's view (its id is the same for every player of this table)."""
        response: table_pb2.PlayAgainResponse = await self._call(
            self._tables.PlayAgain,
            table_pb2.PlayAgainRequest(table_id=table_id, request_id=new_request_id()),
        )
        return response.table

    async def round_record(self, table_id: str, round_no: int) -> table_pb2.RoundRecord:
        """An ended round's record with the caller's own tiles (``sdk.fairness`` checks it)."""
        response: table_pb2.GetRoundRecordResponse = await self._call(
            self._tables.GetRoundRecord,
            table_pb2.GetRoundRecordRequest(table_id=table_id, round=round_no),
        )
        return response.record

    async def list_games(
        self, *, page_size: int = 0, page_token: str = ""
    ) -> history_pb2.ListPlayerGamesResponse:
        """One page of the caller's archived games, newest first (``next_page_token``)."""
        response: history_pb2.ListPlayerGamesResponse = await self._call(
            self._history.ListPlayerGames,
            history_pb2.ListPlayerGamesRequest(page_size=page_size, page_token=page_token),
        )
        return response

    async def list_table_rounds(
        self, table_id: str, *, page_size: int = 0, page_token: str = ""
    ) -> history_pb2.ListTableRoundsResponse:
        """One page of a table's archived rounds the caller sat in, in round order."""
        response: history_pb2.ListTableRoundsResponse = await self._call(
            self._history.ListTableRounds,
            history_pb2.ListTableRoundsRequest(
                table_id=table_id, page_size=page_size, page_token=page_token
            ),
        )
        return response

    async def watch_table(
        self,
        table_id: str,
        after_event_id: str = "",
        *,
        on_trimmed: Callable[[], Awaitable[str]] | None = None,
    ) -> AsyncIterator[table_pb2.TableEvent]:
        """Every event after ``after_event_id`` (e.g. ``TableView.last_event_id``), then
        live ones, until the table closed and its last settlement arrived (the server ends
        the stream then). Read an event with :mod:`sdk.events` (``kind``, ``seat``).

        A dropped stream (server restart, network change) is reopened from the last event
        delivered, so nothing is missed or repeated; an expiring token is refreshed.

        A table keeps only the events of its current round (between deals, the one that just
        ended): resuming from an older one (a watcher away across a deal) is refused
        ``EVENTS_TRIMMED``.
        Then ``on_trimmed`` is awaited: it reloads the caller's view (``get_table``) and
        returns the event id to go on from (the view's ``last_event_id``); without it the
        refusal is raised (:class:`KishpaError`, ``reason == "EVENTS_TRIMMED"``).
        """
        cursor = after_event_id
        attempts = self._reopening()
        closed = False
        if self.contributes:
            # The open deal's commitment may be older than the cursor: contribute now.
            self.contributions.in_background(lambda: self.contribute_to_open_deal(table_id))
        while True:
            call = self._tables.WatchTable(
                table_pb2.WatchTableRequest(table_id=table_id, after_event_id=cursor, batched=True),
                metadata=await self._metadata(),
            )
            opened = time.monotonic()
            trimmed = False
            try:
                async for message in call:
                    # Something arrived: a later failure gets the whole budget again.
                    attempts.reset()
                    self._set_reconnecting(False)
                    self._contribute_on_commitment(table_id, message.events)
                    for event in message.events:
                        cursor = event.event_id
                        yield event
                        closed = closed or event.WhichOneof("event") == TABLE_CLOSED
                if closed:
                    return
                # Ended before the table closed (a server going away): reopen, bounded.
                ended = attempts.pause()
                if ended is None:
                    return
                pause = ended
            except grpc.RpcError as exc:
                if on_trimmed is not None and error_reason(exc) == EVENTS_TRIMMED:
                    trimmed = True  # handled below, once this call is cancelled
                else:
                    self._outage_of(attempts, opened)
                    failed = attempts.pause_after(exc)
                    if failed is None:
                        raise KishpaError.from_rpc(exc) from None
                    pause = failed
            finally:
                call.cancel()
            if trimmed and on_trimmed is not None:
                # Away for more than a round: the caller reloads its view and says from
                # which event to go on (its last_event_id).
                cursor = await on_trimmed()
                attempts.reset()
                continue
            self._set_reconnecting(True)
            await asyncio.sleep(pause)
            attempts.next()
