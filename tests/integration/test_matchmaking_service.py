"""Login and matchmaking through real grpc.aio servers (matchmaking, table, wallet) on
loopback, the machine's Redis, and a wallet on SQLite in a temporary directory.

Each test uses its own matchmaking key prefix and fresh player ids; the tables it creates
are deleted afterwards. Nothing else in Redis is touched.
"""

from __future__ import annotations

import asyncio
import os
import random
import secrets
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import pytest
from redis.asyncio import Redis

from kishpa.auth.v1 import auth_pb2, auth_pb2_grpc
from kishpa.common.v1 import common_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2_grpc as mm_grpc
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from sdk import table_settings
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.errors import error_reason
from services.common.redis_client import async_client
from services.common.settings import Settings, load_settings
from services.matchmaking.server import MatchmakingServer, create_matchmaking_server
from services.matchmaking.service import MatchmakingConfig
from services.table.server import TableServer, create_table_server
from services.wallet.server import WalletServer, create_wallet_server
from shared import keys as table_keys
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis database of the matchmaking tests' own (db 14 of the test server unless
    ``TEST_MATCHMAKING_REDIS_URL`` says otherwise): the table services started here run the
    deadline timers of their database, and must neither serve nor be served by the tables
    of other tests on the shared machine."""
    own = os.environ.get("TEST_MATCHMAKING_REDIS_URL")
    return own or urlunsplit(urlsplit(TEST_REDIS_URL)._replace(path="/14"))


KISHPA = common_pb2.GAME_KISHPA
# Long timers: the tables made here must not play by themselves while the test inspects them.
CONFIG = MatchmakingConfig(turn_seconds=600, reveal_window_seconds=600, invite_ttl_s=60)


@pytest.fixture
def secrets_env() -> dict[str, str]:
    return {"token_secret": secrets.token_urlsafe(48), "service_secret": secrets.token_urlsafe(48)}


@pytest.fixture
async def table_server(redis_url: str, secrets_env: dict[str, str]) -> AsyncIterator[TableServer]:
    settings = load_settings(
        "table", redis_url=redis_url, grpc_port=0, metrics_port=0, **secrets_env
    )
    srv = create_table_server(settings, address="127.0.0.1:0", timers=False)
    await srv.start()
    yield srv
    await srv.stop(0)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = async_client(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def prefix() -> str:
    return f"kishpa:mm-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def cleanup(redis: Redis, prefix: str) -> AsyncIterator[set[str]]:
    """Table ids to delete after the test; the test's own matchmaking keys go too."""
    tables: set[str] = set()
    yield tables
    for table_id in tables:
        await redis.delete(
            table_keys.state(table_id),
            table_keys.events(table_id),
            table_keys.requests(table_id),
            table_keys.outbox(table_id),
            table_keys.balances(table_id),
        )
        await redis.zrem(table_keys.deadlines(table_id), table_id)
    async for key in redis.scan_iter(match=prefix.replace("{", "[{]").replace("}", "[}]") + ":*"):
        await redis.delete(key)


def mm_settings(
    redis_url: str, secrets_env: dict[str, str], table_port: int, wallet_port: int = 1
) -> Settings:
    return load_settings(
        "matchmaking",
        redis_url=redis_url,
        grpc_port=0,
        metrics_port=0,
        table_addr=f"127.0.0.1:{table_port}",
        wallet_addr=f"127.0.0.1:{wallet_port}",
        **secrets_env,
    )


@pytest.fixture
async def mm_server(
    redis_url: str,
    secrets_env: dict[str, str],
    table_server: TableServer,
    prefix: str,
    request: pytest.FixtureRequest,
) -> AsyncIterator[MatchmakingServer]:
    config = getattr(request, "param", CONFIG)
    srv = create_matchmaking_server(
        mm_settings(redis_url, secrets_env, table_server.port),
        address="127.0.0.1:0",
        config=config,
        key_prefix=prefix,
        open_wallets=False,
    )
    await srv.start()
    yield srv
    await srv.stop(0)


@pytest.fixture
async def channel(mm_server: MatchmakingServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mm_server.port}") as ch:
        yield ch


@pytest.fixture
def mm(channel: grpc.aio.Channel) -> mm_grpc.MatchmakingServiceStub:
    return mm_grpc.MatchmakingServiceStub(channel)


@pytest.fixture
def authority(secrets_env: dict[str, str]) -> TokenAuthority:
    return TokenAuthority(secrets_env["token_secret"], secrets_env["service_secret"])


def md_for(authority: TokenAuthority, player_id: str) -> tuple[tuple[str, str], ...]:
    return bearer_metadata(authority.issue_player_token(player_id, player_id.upper()).token)


def new_players(n: int) -> list[str]:
    run = uuid.uuid4().hex[:8]
    return [f"p{run}x{i}" for i in range(n)]


async def join(
    mm: Any, md: Any, seats: int = 4, request_id: str | None = None
) -> mm_pb2.QueueTicket:
    response = await mm.JoinQueue(
        mm_pb2.JoinQueueRequest(
            game=KISHPA, seats=seats, stake=1, request_id=request_id or uuid.uuid4().hex
        ),
        metadata=md,
    )
    return response.ticket


async def final_ticket(mm: Any, md: Any, ticket_id: str) -> mm_pb2.QueueTicket:
    """The ticket once it left the waiting state (WatchQueue ends there)."""
    last = None
    async for message in mm.WatchQueue(mm_pb2.WatchQueueRequest(ticket_id=ticket_id), metadata=md):
        last = message.ticket
    assert last is not None
    return last


async def table_players(redis: Redis, table_id: str) -> list[str]:
    import json

    raw = await redis.hget(table_keys.state(table_id), "state")
    assert raw is not None, f"table {table_id} does not exist"
    return list(json.loads(raw)["players"])


async def test_200_players_fill_exactly_50_tables(
    mm: Any, authority: TokenAuthority, redis: Redis, cleanup: set[str]
) -> None:
    players = new_players(200)
    mds = {p: md_for(authority, p) for p in players}
    tickets = await asyncio.gather(*(join(mm, mds[p]) for p in players))
    finals = await asyncio.gather(
        *(final_ticket(mm, mds[p], t.ticket_id) for p, t in zip(players, tickets, strict=True))
    )
    by_table: dict[str, dict[int, str]] = {}
    for player, ticket in zip(players, finals, strict=True):
        assert ticket.state == mm_pb2.TICKET_STATE_MATCHED, (player, ticket)
        seats = by_table.setdefault(ticket.table_id, {})
        assert ticket.seat not in seats, "two players given the same seat"
        seats[ticket.seat] = player
    cleanup.update(by_table)
    assert len(by_table) == 50
    seated = [p for seats in by_table.values() for p in seats.values()]
    assert sorted(seated) == sorted(players), "every player seated exactly once"
    for table_id, seats in by_table.items():
        # The table service agrees: these four, in these seats.
        assert await table_players(redis, table_id) == [seats[i] for i in range(4)]


async def test_players_who_cancel_are_never_seated(
    mm: Any, authority: TokenAuthority, redis: Redis, cleanup: set[str]
) -> None:
    players = new_players(60)
    mds = {p: md_for(authority, p) for p in players}
    quitters = set(players[::2])
    refusals: list[tuple[grpc.StatusCode, str | None]] = []

    async def one(player: str, delay: float) -> tuple[str, mm_pb2.QueueTicket, bool]:
        await asyncio.sleep(delay)  # spread the joins so cancels race with group pops
        ticket = await join(mm, mds[player])
        cancelled = False
        if player in quitters:
            try:
                await mm.CancelQueue(
                    mm_pb2.CancelQueueRequest(ticket_id=ticket.ticket_id, request_id="c"),
                    metadata=mds[player],
                )
                cancelled = True
            except grpc.aio.AioRpcError as exc:
                # Too late is the only acceptable refusal: he was matched first.
                refusals.append((exc.code(), error_reason(exc)))
        return player, ticket, cancelled

    # The first three quitters cancel before anyone else arrives: those cancels must win.
    early = [await one(p, 0) for p in players[:5:2]]
    assert all(c for _, _, c in early)
    rest = players[6:]
    results = early + list(await asyncio.gather(*(one(p, random.uniform(0, 0.3)) for p in rest)))
    results += [await one(p, 0) for p in (players[1], players[3], players[5])]

    async def tickets_now() -> list[mm_pb2.QueueTicket]:
        return [
            (
                await mm.WatchQueue(
                    mm_pb2.WatchQueueRequest(ticket_id=ticket.ticket_id), metadata=mds[player]
                ).read()
            ).ticket
            for player, ticket, _ in results
        ]

    # Until the queue has settled: fewer than a group left waiting (deadline: a full group
    # still waiting after it is the failure asserted below).
    deadline = asyncio.get_running_loop().time() + 10
    tickets = await tickets_now()
    while asyncio.get_running_loop().time() < deadline and (
        sum(t.state == mm_pb2.TICKET_STATE_WAITING for t in tickets) >= 4
    ):
        await asyncio.sleep(0.05)
        tickets = await tickets_now()
    seated: dict[str, str] = {}
    waiting = 0
    for (player, _, cancelled), now in zip(results, tickets, strict=True):
        if cancelled:
            assert now.state == mm_pb2.TICKET_STATE_CANCELLED
            assert not now.table_id
        elif now.state == mm_pb2.TICKET_STATE_MATCHED:
            seated[player] = now.table_id
        else:
            assert now.state == mm_pb2.TICKET_STATE_WAITING
            waiting += 1
    cleanup.update(seated.values())
    assert set(refusals) <= {(grpc.StatusCode.FAILED_PRECONDITION, "TICKET_MATCHED")}
    assert waiting < 4, "a full group left waiting in the queue"
    assert len(seated) % 4 == 0
    everyone_at_tables = [p for t in set(seated.values()) for p in await table_players(redis, t)]
    assert sorted(everyone_at_tables) == sorted(seated)
    cancelled_players = {p for p, _, c in results if c}
    assert not cancelled_players & set(everyone_at_tables)


async def test_watch_queue_tells_where_to_sit_and_seated_players_are_sent_back(
    mm: Any, authority: TokenAuthority, cleanup: set[str]
) -> None:
    ann, bob = new_players(2)
    md_ann, md_bob = md_for(authority, ann), md_for(authority, bob)
    first = await join(mm, md_ann, seats=2)
    assert first.state == mm_pb2.TICKET_STATE_WAITING
    assert first.players_waiting == 1
    stream = mm.WatchQueue(mm_pb2.WatchQueueRequest(ticket_id=first.ticket_id), metadata=md_ann)
    assert (await stream.read()).ticket.state == mm_pb2.TICKET_STATE_WAITING
    # A retried JoinQueue (same request id) or a second one returns the same ticket.
    again = await join(mm, md_ann, seats=2)
    assert again.ticket_id == first.ticket_id
    second = await join(mm, md_bob, seats=2)
    assert second.state == mm_pb2.TICKET_STATE_MATCHED
    matched = (await stream.read()).ticket
    assert matched.state == mm_pb2.TICKET_STATE_MATCHED
    assert matched.table_id == second.table_id
    assert {matched.seat, second.seat} == {0, 1}
    cleanup.add(matched.table_id)
    mine = await mm.GetMyTable(mm_pb2.GetMyTableRequest(), metadata=md_ann)
    assert (mine.table_id, mine.seat, mine.game) == (matched.table_id, matched.seat, KISHPA)
    back = await join(mm, md_ann, seats=3)
    assert back.state == mm_pb2.TICKET_STATE_MATCHED
    assert back.table_id == matched.table_id
    # Someone else's ticket is not his to watch or cancel.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await mm.CancelQueue(mm_pb2.CancelQueueRequest(ticket_id=first.ticket_id), metadata=md_bob)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_queue_refuses_bad_requests_and_missing_token(
    mm: Any, authority: TokenAuthority
) -> None:
    md = md_for(authority, new_players(1)[0])
    for seats, stake, game, reason in [
        (5, 1, KISHPA, "BAD_SEATS"),
        (4, 7, KISHPA, "BAD_STAKE"),
        (4, 1, common_pb2.GAME_UNSPECIFIED, "UNKNOWN_GAME"),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await mm.JoinQueue(
                mm_pb2.JoinQueueRequest(game=game, seats=seats, stake=stake), metadata=md
            )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(err.value) == reason
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await mm.JoinQueue(mm_pb2.JoinQueueRequest(game=KISHPA, seats=4, stake=1))
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await mm.GetMyTable(mm_pb2.GetMyTableRequest(), metadata=md)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("mm_server", [MatchmakingConfig(ticket_ttl_s=1)], indirect=True)
async def test_waiting_ticket_expires(mm: Any, authority: TokenAuthority) -> None:
    md = md_for(authority, new_players(1)[0])
    ticket = await join(mm, md, seats=4)
    final = await asyncio.wait_for(final_ticket(mm, md, ticket.ticket_id), timeout=10)
    assert final.state == mm_pb2.TICKET_STATE_EXPIRED


async def test_invite_codes(
    mm: Any,
    channel: grpc.aio.Channel,
    table_server: TableServer,
    authority: TokenAuthority,
    cleanup: set[str],
) -> None:
    ann, bob, cat, dan = new_players(4)
    md = {p: md_for(authority, p) for p in (ann, bob, cat, dan)}
    settings = table_settings(KISHPA, 3, turn_seconds=600)
    created = await mm.CreatePrivateTable(
        mm_pb2.CreatePrivateTableRequest(settings=settings, request_id="r1"), metadata=md[ann]
    )
    cleanup.add(created.table_id)
    assert len(created.invite_code) == 6
    replay = await mm.CreatePrivateTable(
        mm_pb2.CreatePrivateTableRequest(settings=settings, request_id="r1"), metadata=md[ann]
    )
    assert (replay.invite_code, replay.table_id) == (created.invite_code, created.table_id)

    # Typed in lower case with a dash: still the code.
    typed = created.invite_code[:3].lower() + "-" + created.invite_code[3:].lower()
    joined = await mm.JoinByCode(
        mm_pb2.JoinByCodeRequest(invite_code=typed, request_id="j"), metadata=md[bob]
    )
    assert (joined.table_id, joined.seat) == (created.table_id, 1)
    again = await mm.JoinByCode(
        mm_pb2.JoinByCodeRequest(invite_code=created.invite_code, request_id="j2"),
        metadata=md[bob],
    )
    assert again.seat == 1

    for wrong in ("ZZZZZZ", "nope", ""):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await mm.JoinByCode(mm_pb2.JoinByCodeRequest(invite_code=wrong), metadata=md[cat])
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert "invite code" in (err.value.details() or "")

    third = await mm.JoinByCode(
        mm_pb2.JoinByCodeRequest(invite_code=created.invite_code), metadata=md[cat]
    )
    assert third.seat == 2
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await mm.JoinByCode(
            mm_pb2.JoinByCodeRequest(invite_code=created.invite_code), metadata=md[dan]
        )
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(err.value) == "TABLE_FULL"

    # The creator is the table's creator (only he may press last round); it started when full.
    async with grpc.aio.insecure_channel(f"127.0.0.1:{table_server.port}") as tch:
        tables = table_pb2_grpc.TableServiceStub(tch)
        view = (
            await tables.GetTable(
                table_pb2.GetTableRequest(table_id=created.table_id), metadata=md[ann]
            )
        ).table
        assert view.creator_player_id == ann
        assert view.status == table_pb2.TABLE_STATUS_PLAYING
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await tables.PressLastRound(
                table_pb2.PressLastRoundRequest(table_id=created.table_id), metadata=md[bob]
            )
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        await tables.PressLastRound(
            table_pb2.PressLastRoundRequest(table_id=created.table_id), metadata=md[ann]
        )
    mine = await mm.GetMyTable(mm_pb2.GetMyTableRequest(), metadata=md[cat])
    assert (mine.table_id, mine.seat) == (created.table_id, 2)


@pytest.mark.parametrize(
    "mm_server", [MatchmakingConfig(turn_seconds=600, invite_ttl_s=1)], indirect=True
)
async def test_expired_invite_code_is_not_found(
    mm: Any, authority: TokenAuthority, cleanup: set[str]
) -> None:
    ann, bob = new_players(2)
    created = await mm.CreatePrivateTable(
        mm_pb2.CreatePrivateTableRequest(settings=table_pb2.TableSettings(game=KISHPA, seats=2)),
        metadata=md_for(authority, ann),
    )
    cleanup.add(created.table_id)
    await asyncio.sleep(1.6)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await mm.JoinByCode(
            mm_pb2.JoinByCodeRequest(invite_code=created.invite_code),
            metadata=md_for(authority, bob),
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_reason(err.value) == "INVITE_NOT_FOUND"


async def test_login_opens_the_wallet_and_refresh_gives_a_working_token(
    redis_url: str,
    secrets_env: dict[str, str],
    table_server: TableServer,
    prefix: str,
    tmp_path: Path,
) -> None:
    wallet_settings = load_settings(
        "wallet",
        database_url=f"sqlite:///{tmp_path / 'wallet.sqlite3'}",
        grpc_port=0,
        metrics_port=0,
        **secrets_env,
    )
    wallet: WalletServer = create_wallet_server(
        wallet_settings, address="127.0.0.1:0", migrate=True
    )
    await wallet.start()
    srv = create_matchmaking_server(
        mm_settings(redis_url, secrets_env, table_server.port, wallet.port),
        address="127.0.0.1:0",
        key_prefix=prefix,
    )
    await srv.start()
    try:
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
            grpc.aio.insecure_channel(f"127.0.0.1:{wallet.port}") as wch,
        ):
            auth = auth_pb2_grpc.AuthServiceStub(ch)
            login = await auth.Login(auth_pb2.LoginRequest(display_name="  Ann  "))
            assert login.display_name == "Ann"
            assert login.expire_time.seconds > 0
            wallets = wallet_pb2_grpc.WalletServiceStub(wch)
            balance = await wallets.GetBalance(
                wallet_pb2.GetBalanceRequest(), metadata=bearer_metadata(login.token)
            )
            assert balance.balance.tokens == 2000
            refreshed = await auth.RefreshToken(
                auth_pb2.RefreshTokenRequest(), metadata=bearer_metadata(login.token)
            )
            player = TokenAuthority(secrets_env["token_secret"]).verify_player_token(
                refreshed.token
            )
            assert (player.player_id, player.name) == (login.player_id, "Ann")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await auth.Login(auth_pb2.LoginRequest(display_name="   "))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await auth.RefreshToken(auth_pb2.RefreshTokenRequest())
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # With the wallet down, a login fails as retryable instead of making a penniless player.
        await wallet.stop(0)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await auth_pb2_grpc.AuthServiceStub(ch).Login(
                    auth_pb2.LoginRequest(display_name="Bob")
                )
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await srv.stop(0)
        await wallet.stop(0)


async def test_matchmade_seats_show_names_client_seeds_and_wallet_balances_from_the_first_view(
    redis_url: str,
    secrets_env: dict[str, str],
    prefix: str,
    cleanup: set[str],
    tmp_path: Path,
) -> None:
    """Issue 13: at private and quick-match tables every seat has its player's display name,
    the client seeds given to matchmaking reach the shuffle, and Seat.balance is the
    player's wallet balance before any settlement (no workers run here)."""
    wallet: WalletServer = create_wallet_server(
        load_settings(
            "wallet",
            database_url=f"sqlite:///{tmp_path / 'wallet.sqlite3'}",
            grpc_port=0,
            metrics_port=0,
            **secrets_env,
        ),
        address="127.0.0.1:0",
        migrate=True,
    )
    await wallet.start()
    table = create_table_server(
        load_settings(
            "table",
            redis_url=redis_url,
            grpc_port=0,
            metrics_port=0,
            wallet_addr=f"127.0.0.1:{wallet.port}",
            **secrets_env,
        ),
        address="127.0.0.1:0",
        timers=False,
        read_balances=True,
    )
    await table.start()
    srv = create_matchmaking_server(
        mm_settings(redis_url, secrets_env, table.port, wallet.port),
        address="127.0.0.1:0",
        config=CONFIG,
        key_prefix=prefix,
    )
    await srv.start()
    try:
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
            grpc.aio.insecure_channel(f"127.0.0.1:{table.port}") as tch,
        ):
            auth = auth_pb2_grpc.AuthServiceStub(ch)
            mm = mm_grpc.MatchmakingServiceStub(ch)
            tables = table_pb2_grpc.TableServiceStub(tch)
            md = {}
            for name in ("Ann", "Bob", "Cat", "Dan"):
                login = await auth.Login(auth_pb2.LoginRequest(display_name=name))
                md[name] = bearer_metadata(login.token)

            async def view(name: str, table_id: str) -> table_pb2.TableView:
                got = await tables.GetTable(
                    table_pb2.GetTableRequest(table_id=table_id), metadata=md[name]
                )
                return got.table

            # A private table: the creator's first view already shows his 2,000 tokens.
            private = await mm.CreatePrivateTable(
                mm_pb2.CreatePrivateTableRequest(
                    settings=table_settings(KISHPA, 2, turn_seconds=600),
                    client_seed="ann-seed",
                    request_id=uuid.uuid4().hex,
                ),
                metadata=md["Ann"],
            )
            cleanup.add(private.table_id)
            first = await view("Ann", private.table_id)
            assert [(s.display_name, s.balance) for s in first.seats] == [("Ann", 2000), ("", 0)]
            await mm.JoinByCode(
                mm_pb2.JoinByCodeRequest(
                    invite_code=private.invite_code,
                    client_seed="bob-seed",
                    request_id=uuid.uuid4().hex,
                ),
                metadata=md["Bob"],
            )
            dealt = await view("Bob", private.table_id)
            assert dealt.round.round == 1, "the table started when it filled"
            assert [(s.display_name, s.balance) for s in dealt.seats] == [
                ("Ann", 2000),
                ("Bob", 2000),
            ]
            assert list(dealt.round.client_seeds) == ["ann-seed", "bob-seed"]

            # Quick match: the same, for a table matchmaking formed from its queue.
            tickets = []
            for name, seed in (("Cat", "cat-seed"), ("Dan", "")):
                joined = await mm.JoinQueue(
                    mm_pb2.JoinQueueRequest(
                        game=KISHPA,
                        seats=2,
                        stake=1,
                        client_seed=seed,
                        request_id=uuid.uuid4().hex,
                    ),
                    metadata=md[name],
                )
                tickets.append(joined.ticket)
            assert not tickets[0].HasField("seat"), "a waiting ticket has no seat yet"
            matched = tickets[-1]
            assert matched.state == mm_pb2.TICKET_STATE_MATCHED
            cleanup.add(matched.table_id)
            quick = await view("Dan", matched.table_id)
            assert [(s.display_name, s.balance) for s in quick.seats] == [
                ("Cat", 2000),
                ("Dan", 2000),
            ]
            assert list(quick.round.client_seeds) == ["cat-seed", ""]
            # A seed too long is refused when queueing, not when the table is formed.
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await mm.JoinQueue(
                    mm_pb2.JoinQueueRequest(
                        game=KISHPA, seats=2, stake=1, client_seed="x" * 65, request_id="r"
                    ),
                    metadata=md["Ann"],
                )
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert error_reason(refused.value) == "BAD_CLIENT_SEED"
    finally:
        await srv.stop(0)
        await table.stop(0)
        await wallet.stop(0)


async def test_list_offers_names_every_game_with_its_stakes_and_sizes(
    mm: Any, authority: TokenAuthority
) -> None:
    md = md_for(authority, new_players(1)[0])
    answer = await mm.ListOffers(mm_pb2.ListOffersRequest(), metadata=md)
    offers = {o.game: (list(o.stakes), list(o.seats)) for o in answer.offers}
    # The settings' default stakes (no KISHPA_STAKES_* set here) and the 2-4 seat tables.
    assert offers == {
        KISHPA: ([1, 5, 10, 50, 100], [2, 3, 4]),
        common_pb2.GAME_HAND: ([1, 5, 10, 50, 100], [2, 3, 4]),
    }
    # The timers its tables get: this config's quick-match turn (600 s), and the pause
    # KISHPA_TABLE_NEXT_DEAL_PAUSE_MS gives (unset here: the rules pages' 30 s).
    timers = {(o.turn_time.ToSeconds(), o.next_round_pause.ToMilliseconds()) for o in answer.offers}
    assert timers == {(600, 30_000)}
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await mm.ListOffers(mm_pb2.ListOffersRequest())
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
