"""The edge's allowlist and wire codec."""

from __future__ import annotations

import base64

import grpc
import pytest

from services.edge import grpcweb
from services.edge.routes import PUBLIC, SERVICE_ONLY, public_routes

pytestmark = pytest.mark.unit


def test_every_rpc_of_a_public_service_is_exposed_or_declared_service_only() -> None:
    routes = public_routes()
    for (file, name), _ in PUBLIC.items():
        service = file.services_by_name[name]
        hidden = SERVICE_ONLY.get(service.full_name, frozenset())
        for method in service.methods:
            path = f"/{service.full_name}/{method.name}"
            assert (path in routes) != (method.name in hidden), (
                f"{path}: expose it in services/edge/routes.py PUBLIC or list it in SERVICE_ONLY"
            )


def test_streaming_rpcs_are_known_as_streaming() -> None:
    routes = public_routes()
    assert routes["/kishpa.table.v1.TableService/WatchTable"].server_streaming
    assert routes["/kishpa.matchmaking.v1.MatchmakingService/WatchQueue"].server_streaming
    assert not routes["/kishpa.table.v1.TableService/Draw"].server_streaming
    assert "/kishpa.wallet.v1.WalletService/ApplyBatch" not in routes


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
