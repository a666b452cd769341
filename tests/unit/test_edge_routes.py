"""The edge's allowlist and wire codec."""

from __future__ import annotations

import base64

import grpc
import pytest

from services.common.access import ACCESS, PLAYER, SERVED_BY, WORKER, browser_rpcs
from services.edge import grpcweb
from services.edge.routes import ROUTES

pytestmark = pytest.mark.unit


def test_browsers_reach_the_player_rpcs_but_the_wallet_mutations() -> None:
    # Expected from the rule, not the code: a browser reaches what a player may call,
    # never a service's or an operator's RPC, and of the wallet only the two reads.
    wallet = {p for p in ROUTES if p.startswith("/kishpa.wallet.")}
    assert wallet == {
        "/kishpa.wallet.v1.WalletService/GetBalance",
        "/kishpa.wallet.v1.WalletService/ListTransfers",
    }
    assert not [p for p in ROUTES if p.startswith("/kishpa.admin.")]
    assert "/kishpa.table.v1.TableService/CloseTable" not in ROUTES
    assert "/grpc.health.v1.Health/Check" not in ROUTES
    for path in ROUTES:
        assert ACCESS[path] & {"player", "anyone"}, path
    assert ROUTES["/kishpa.auth.v1.AuthService/Login"].upstream == "matchmaking"
    assert ROUTES["/kishpa.table.v1.HistoryService/ListPlayerGames"].upstream == "table"
    assert ROUTES["/kishpa.wallet.v1.WalletService/GetBalance"].upstream == "wallet"


def test_granting_an_rpc_to_players_exposes_it_and_nothing_else() -> None:
    apply = "/kishpa.wallet.v1.WalletService/ApplyBatch"
    draw = "/kishpa.table.v1.TableService/Draw"
    changed = browser_rpcs({**ACCESS, apply: frozenset({PLAYER}), draw: frozenset({WORKER})})
    assert set(changed) ^ set(ROUTES) == {apply, draw}
    assert changed[apply] == "wallet"


def test_every_contract_service_has_a_workload_serving_it() -> None:
    declared = {m.removeprefix("/").split("/")[0] for m in ACCESS if m.startswith("/kishpa.")}
    assert declared == set(SERVED_BY)


def test_streaming_rpcs_are_known_as_streaming() -> None:
    assert ROUTES["/kishpa.table.v1.TableService/WatchTable"].server_streaming
    assert ROUTES["/kishpa.matchmaking.v1.MatchmakingService/WatchQueue"].server_streaming
    assert not ROUTES["/kishpa.table.v1.TableService/Draw"].server_streaming
    assert "/kishpa.wallet.v1.WalletService/ApplyBatch" not in ROUTES


def test_text_bodies_may_be_several_padded_chunks() -> None:
    frame = grpcweb.frame(b"hello world")
    one = base64.b64encode(frame)
    split = base64.b64encode(frame[:4]) + base64.b64encode(frame[4:])
    assert grpcweb.decode_text(one) == frame
    assert grpcweb.decode_text(split) == frame
    assert grpcweb.single_message(grpcweb.decode_text(split)) == b"hello world"
    with pytest.raises(grpcweb.ProtocolError):
        grpcweb.decode_text(b"abc")
    with pytest.raises(grpcweb.ProtocolError):
        grpcweb.single_message(frame + b"x")


def test_trailer_frame_and_timeouts() -> None:
    trailer = grpcweb.trailer_frame(grpc.StatusCode.NOT_FOUND, "no table ✓ 100%", [("x-a", "1")])
    assert trailer[0] == 0x80
    text = trailer[5:].decode()
    assert "grpc-status: 5\r\n" in text
    assert "grpc-message: no table %E2%9C%93 100%25\r\n" in text
    assert "x-a: 1\r\n" in text
    assert grpcweb.parse_timeout("250m") == pytest.approx(0.25)
    assert grpcweb.parse_timeout("2S") == 2
    with pytest.raises(grpcweb.ProtocolError):
        grpcweb.parse_timeout("5 seconds")
