"""The fairness document's test vectors (docs/fairness.md), and a table vector as evidence."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sdk import fairness

DOC = Path(__file__).resolve().parents[2] / "docs" / "fairness.md"


_VECTOR = re.compile(r"<!-- vector: (\w+) -->\s*```json\n(.*?)\n```", re.DOTALL)


def vectors(kind: str) -> list[dict[str, Any]]:
    found = [json.loads(body) for k, body in _VECTOR.findall(DOC.read_text()) if k == kind]
    assert found, f"docs/fairness.md has no {kind} vector"
    return found


def table_evidence(v: dict[str, Any]) -> fairness.RoundEvidence:
    """A `table` vector as the SDK's evidence (read independently of evidence_from_record)."""
    events = v["events"]
    committed = [e for e in events if e["type"] == "seed_committed"]
    dealt = [e for e in events if e["type"] == "deal"]
    return fairness.RoundEvidence(
        commitment=dealt[0]["commitment"],
        server_seed_hex=v["server_seed"],
        client_seeds=list(v["client_seeds"]),
        seats=v["seats"],
        starter=v["starter"],
        my_seat=0,
        dealt=list(v["hands"][0]),
        game=v["game"],
        kishpa=fairness.face(v["kishpa"]) if v["game"] == "kishpa" else None,
        replaced_kishpa=fairness.face(v["replacement"])
        if v.get("replacement") is not None
        else None,
        top_discard=v.get("top_discard"),
        hands=dict(enumerate(v["hands"])),
        draws=[fairness.TableDraw(*d) for d in v["draws"]],
        kishpa_id=v.get("kishpa"),
        replacement_id=v.get("replacement"),
        dolls_returned=v.get("dolls_returned"),
        precommitment=committed[0]["commitment"] if committed else "",
        precommitment_event_id=committed[0]["id"] if committed else "",
        contributions=[
            fairness.Contribution(e["seat"], e["contribution"], e["id"])
            for e in events
            if e["type"] == "contribution_accepted"
        ],
        deal_event_id=dealt[0]["id"],
        seat_client_seeds=list(v["seat_client_seeds"]),
        moves=[fairness.SeatMove(m["seat"], m["kind"], tuple(m["tile_ids"])) for m in v["moves"]],
        cards_left=dict(enumerate(v["cards_left"])) if "cards_left" in v else None,
        round_no=v["deal"],
        record_version=v.get("record_version", 0),
        bot_seats=list(v.get("bot_seats", [])),
        declared_seats=list(v.get("declared_seats", [])),
        awaited_seats=list(v.get("awaited_seats", [])),
        autoplay_seats=list(v.get("autoplay_seats", [])),
        awaited_until_ms=v.get("awaited_until_ms", 0),
        my_contribution=v.get("my_contribution"),
    )
