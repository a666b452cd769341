"""A client in another language decodes every table event with its own generated types
(issue 13): TypeScript generated from protos/ by protobuf-es (web/'s ``buf generate``
setup, the one the browser client uses) reads what this server sends.

The events are real: a table on a real table service watched over gRPC, plus every other
case of the oneof as the same converter (``services/table/wire_events.py``) builds it from
whole games of both games played through the engines. The Node script type-checks an
exhaustive switch over ``TableEvent.event`` (a new case fails until it is read), decodes
every message, says which cases it never saw, and unpacks the ``google.rpc.ErrorInfo`` of a
real refusal from its ``grpc-status-details-bin`` trailer (the vendored google/rpc protos).
Its proto3 JSON of each message must equal Python's: both read the same bytes the same way.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from redis.asyncio import Redis

from games.hand.cards import card_text
from games.kishpa.tiles import face_of
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.table.wire_events import event_message
from shared.stream import StoredEvent
from tests.integration.tables.conftest import cleanup
from tests.support.wire_event_samples import SERVICE_EVENTS, hand_game, kishpa_games

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).parents[3]
WEB = ROOT / "web"
BIN = WEB / "node_modules" / ".bin"
STATUS_DETAILS = "grpc-status-details-bin"


def _kishpa(tile_id: int) -> str:
    return str(face_of(tile_id))


def _converted() -> list[tuple[str, table_pb2.WatchTableResponse]]:
    """Every event of the engine-played games (and the service's own), as each viewer
    receives it: (game, message)."""
    out: list[tuple[str, table_pb2.WatchTableResponse]] = []
    sources: list[tuple[str, Any, tuple[Any, ...]]] = [
        *(("kishpa", _kishpa, game) for game in kishpa_games()),
        ("hand", card_text, hand_game()),
        ("kishpa", _kishpa, SERVICE_EVENTS),
    ]
    for game, face, events in sources:
        for n, event in enumerate(events):
            for viewer in (None, 0, 1):
                visible = event.for_viewer(viewer)
                if visible is None:
                    continue
                msg = event_message(StoredEvent(f"{1_700_000_000_000 + n}-0", visible), face, game)
                assert msg is not None
                out.append((game, table_pb2.WatchTableResponse(event=msg)))
    return out


async def _watched(
    stub: table_pb2_grpc.TableServiceStub, md: dict[str, Any], players: list[str]
) -> tuple[str, list[table_pb2.WatchTableResponse]]:
    """A real table dealt and watched by its second player until the first turn."""
    created = await stub.CreateTable(
        table_pb2.CreateTableRequest(
            settings=table_pb2.TableSettings(game=common_pb2.GAME_KISHPA, seats=2),
            request_id=uuid.uuid4().hex,
        ),
        metadata=md[players[0]],
    )
    table_id = created.table.table_id
    await stub.JoinTable(
        table_pb2.JoinTableRequest(table_id=table_id, request_id=uuid.uuid4().hex),
        metadata=md[players[1]],
    )
    await stub.StartGame(
        table_pb2.StartGameRequest(table_id=table_id, request_id=uuid.uuid4().hex),
        metadata=md[players[0]],
    )
    got: list[table_pb2.WatchTableResponse] = []
    call = stub.WatchTable(table_pb2.WatchTableRequest(table_id=table_id), metadata=md[players[1]])
    async with asyncio.timeout(30):
        async for response in call:
            got.append(response)
            if response.event.WhichOneof("event") in ("turn_started", "reveal_window_opened"):
                break
    call.cancel()
    return table_id, got


def _node(script: Path, payload: Path) -> dict[str, Any]:
    """Type-check, bundle and run the TypeScript contract test; its JSON report."""
    for tool in ("tsc", "esbuild"):
        if not (BIN / tool).exists():
            pytest.fail(f"web/node_modules is not installed (no {tool}): run `make install`")
    if not (WEB / "src" / "gen" / "kishpa").is_dir():
        pytest.fail("no TypeScript generated from protos/ in web/src/gen: run `make web`")
    node = shutil.which("node")
    assert node is not None, "Node.js is needed for the contract test"
    checked = subprocess.run(
        [str(BIN / "tsc"), "--noEmit", "-p", "test/tsconfig.contract.json"],
        cwd=WEB,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert checked.returncode == 0, "the contract test does not type-check:\n" + checked.stdout
    bundle = payload.with_name("contract.mjs")
    built = subprocess.run(
        [
            str(BIN / "esbuild"),
            str(script),
            "--bundle",
            "--platform=node",
            "--format=esm",
            f"--outfile={bundle}",
            "--log-level=error",
        ],
        cwd=WEB,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    ran = subprocess.run(
        [node, str(bundle), str(payload)], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    report: dict[str, Any] = json.loads(ran.stdout)
    return report


async def test_a_typescript_client_decodes_every_event_with_its_own_types(
    stub: table_pb2_grpc.TableServiceStub,
    md: dict[str, Any],
    players: list[str],
    redis: Redis,
    tmp_path: Path,
) -> None:
    table_id, real = await _watched(stub, md, players)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.GetTable(
                table_pb2.GetTableRequest(table_id=f"t-none-{uuid.uuid4().hex[:8]}"),
                metadata=md[players[0]],
            )
    finally:
        await cleanup(redis, table_id)
    details = dict(refused.value.trailing_metadata() or ())[STATUS_DETAILS]
    assert isinstance(details, bytes)
    items = [("kishpa", r) for r in real] + _converted()
    payload = tmp_path / "events.json"
    payload.write_text(
        json.dumps(
            {
                "events": [base64.b64encode(m.SerializeToString()).decode() for _, m in items],
                "status": base64.b64encode(details).decode(),
            }
        )
    )
    report = _node(WEB / "test" / "contract.ts", payload)
    assert report["missing"] == [], "oneof cases the TypeScript client never decoded"
    assert report["error"]["reason"] == "TABLE_NOT_FOUND"
    assert report["error"]["code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert report["error"]["domain"] == "kishpa.dev"
    assert len(report["events"]) == len(items)
    for (game, message), decoded in zip(items, report["events"], strict=True):
        assert decoded["json"] == MessageToDict(message)
        face = _kishpa if game == "kishpa" else card_text
        for tile_id, shown in decoded["faces"]:
            assert shown == face(tile_id)
