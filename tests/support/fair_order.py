"""A table's provably fair order, checked from outside: seat contributions, the round record,
the Python and the browser verifiers."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict

from kishpa.table.v1 import table_pb2, table_pb2_grpc
from services.common.auth import TokenAuthority
from services.table.server import TableServer

WEB = Path(__file__).resolve().parents[2] / "web"


async def contribute(
    stub: table_pb2_grpc.TableServiceStub, md: Any, table_id: str, deal: int, text: str
) -> table_pb2.TableView:
    answer = await stub.Contribute(
        table_pb2.ContributeRequest(
            table_id=table_id, deal=deal, contribution=text, request_id=uuid.uuid4().hex
        ),
        metadata=md,
    )
    return answer.table


async def round_record(
    stub: table_pb2_grpc.TableServiceStub, md: Any, table_id: str, round_no: int
) -> table_pb2.RoundRecord:
    response = await stub.GetRoundRecord(
        table_pb2.GetRoundRecordRequest(table_id=table_id, round=round_no), metadata=md
    )
    return response.record


def round_ended(view: table_pb2.TableView) -> bool:
    return view.round.round >= 2 or view.round.phase == table_pb2.ROUND_PHASE_ENDED


def web_verdict(record: table_pb2.RoundRecord) -> dict[str, Any] | None:
    """The browser module's verdict on the record (None when the web is not built)."""
    if shutil.which("node") is None or not (WEB / "test" / "dist" / "fair.mjs").exists():
        return None
    run = subprocess.run(
        ["node", "test/verify-record.mjs"],
        cwd=WEB,
        input=json.dumps(MessageToDict(record)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    verdict: dict[str, Any] = json.loads(run.stdout)
    return verdict


async def kishpa_verify(
    server: TableServer, authority: TokenAuthority, player: str, table_id: str
) -> tuple[int, dict[str, Any]]:
    env = {
        **os.environ,
        "KISHPA_TABLE_ADDR": f"127.0.0.1:{server.port}",
        "KISHPA_TOKEN": authority.issue_player_token(player, "P").token,
    }
    argv = [sys.executable, "-m", "cli.main", "verify", "--table", table_id, "--round", "1"]
    proc = await asyncio.create_subprocess_exec(
        *argv, "--json", env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    return int(proc.returncode or 0), json.loads(out.decode())
