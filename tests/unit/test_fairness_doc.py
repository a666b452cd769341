"""The test vectors of docs/fairness.md, through both implementations of the algorithm.

The vectors are read from the document itself, so the page an outsider reimplements from
cannot drift from the code: the server's ``games/fair.py`` + ``games/kishpa/deal.py`` and
the client's independent ``sdk/fairness.py`` must each reproduce every vector.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from games.fair import FairStream, client_seeds_digest, commitment, shuffled_deck
from games.kishpa.deal import deal_round
from sdk import fairness

pytestmark = pytest.mark.unit

DOC = Path(__file__).resolve().parents[2] / "docs" / "fairness.md"
_VECTOR = re.compile(r"<!-- vector: (\w+) -->\s*```json\n(.*?)\n```", re.DOTALL)


def vectors(kind: str) -> list[dict[str, Any]]:
    found = [json.loads(body) for k, body in _VECTOR.findall(DOC.read_text()) if k == kind]
    assert found, f"docs/fairness.md has no {kind} vector"
    return found


@pytest.mark.parametrize("vector", vectors("deck"))
def test_deck_vectors_hold_for_the_server_and_the_sdk(vector: dict[str, Any]) -> None:
    seed = bytes.fromhex(vector["server_seed"])
    seeds = vector["client_seeds"]
    assert commitment(seed) == vector["commitment"]
    assert client_seeds_digest(seeds).hex() == vector["client_digest"]
    assert FairStream(seed, seeds).read(32).hex() == vector["first_block"]
    assert shuffled_deck(seed, seeds, 106) == vector["deck"]
    assert fairness.deck(seed, seeds) == vector["deck"]
    assert sorted(vector["deck"]) == list(range(106))


@pytest.mark.parametrize("vector", vectors("deal"))
def test_deal_vectors_hold_for_the_server_and_the_sdk(vector: dict[str, Any]) -> None:
    seed = bytes.fromhex(vector["server_seed"])
    seeds = vector["client_seeds"]
    server = deal_round(seed, seeds, vector["seats"], vector["starter"])
    client = fairness.deal(seed, seeds, vector["seats"], vector["starter"])
    for dealt in (server.hands, client.hands):
        assert [list(h) for h in dealt] == vector["hands"]
    assert server.kishpa.tile == client.kishpa == vector["kishpa"]
    returned = list(server.kishpa.dolls_returned)
    assert server.replacement is not None
    returned += server.replacement.dolls_returned
    assert returned == list(client.dolls_returned) == vector["dolls_returned"]
    assert server.replacement.tile == client.replacement == vector["replacement"]
    top_first = list(reversed(server.pile))
    assert top_first[:5] == list(reversed(client.pile))[:5] == vector["next_draws"]


def test_the_sdk_and_the_server_deal_alike_over_many_seeds() -> None:
    # Dolls turned as kishpa, replacements and every starter occur in this range.
    for n in range(300):
        seed = bytes([n % 256, n // 256]) * 40
        seeds: list[str | None] = [None, f"c{n}", None][: 2 + n % 2]
        seats = len(seeds)
        server = deal_round(seed, seeds, seats, n % seats)
        client = fairness.deal(seed, seeds, seats, n % seats)
        assert server.hands == client.hands
        assert server.pile == client.pile
        assert server.kishpa.tile == client.kishpa
        assert (server.replacement and server.replacement.tile) == client.replacement


@pytest.mark.parametrize("vector", vectors("hand_deal"))
def test_hand_deal_vectors_hold_for_the_server_and_the_sdk(vector: dict[str, Any]) -> None:
    from games.hand.cards import cards_text
    from games.hand.deal import new_deal

    seed = bytes.fromhex(vector["server_seed"])
    seeds = vector["client_seeds"]
    assert commitment(seed) == vector["commitment"]
    server, _ = new_deal(seed, seeds, vector["seats"], vector["starter"])
    client = fairness.hand_deal(seed, seeds, vector["seats"], vector["starter"])
    assert [list(h) for h in server.hands] == [list(h) for h in client.hands] == vector["hands"]
    for hand, text in zip(vector["hands"], vector["hands_text"], strict=True):
        assert " ".join(cards_text(hand)) == " ".join(map(fairness.card_text, hand)) == text
    assert server.discard_pile == [client.top_discard] == [vector["top_discard"]]
    assert fairness.card_text(client.top_discard) == vector["top_discard_text"]
    assert server.stock[:5] == list(client.stock[:5]) == vector["next_draws"]
    # A draw leaving k cards took deck[105 - k]: the stock's first card leaves len - 1.
    assert client.stock_card(len(client.stock) - 1) == vector["next_draws"][0]


def test_the_sdk_and_the_server_deal_hand_alike_over_many_seeds() -> None:
    from games.hand.deal import new_deal

    for n in range(100):
        seed = bytes([n % 256, 7]) * 40
        seeds: list[str | None] = [f"s{n}", None, "x", None][: 2 + n % 3]
        seats = len(seeds)
        server, _ = new_deal(seed, seeds, seats, n % seats)
        client = fairness.hand_deal(seed, seeds, seats, n % seats)
        assert [tuple(h) for h in server.hands] == list(client.hands)
        assert tuple(server.stock) == client.stock
        assert server.discard_pile == [client.top_discard]


# --- protocol version 2: exact encodings, whole-table transcripts, the commitment order ---


def test_the_canonical_json_is_written_out_exactly() -> None:
    """The seeds vector's canonical JSON (quotes, backslash, control characters, U+007F,
    emoji) is exactly the documented bytes, and the digest is sha256 of those bytes."""
    import hashlib

    (vector,) = [v for v in vectors("deck") if "canonical_json" in v]
    text = vector["canonical_json"]
    assert text.encode("utf-8").hex() == vector["canonical_json_hex"]
    assert (
        hashlib.sha256(bytes.fromhex(vector["canonical_json_hex"])).hexdigest()
        == (vector["client_digest"])
    )
    # The doc's rules, applied by hand to the awkward characters.
    assert '\\"hi\\"' in text
    assert "back\\\\slash" in text
    assert "\\t" in text
    assert "\\n" in text
    assert "\\r" in text
    assert "\\u0007" in text
    assert "\x7f" in text
    assert "🎲" in text
    assert "\\u" not in text.replace("\\u0007", "")


def test_a_replacement_turning_back_a_doll_is_in_the_vectors() -> None:
    deals = [v for v in vectors("deal") if v.get("replacement_dolls_returned")]
    assert deals
    for vector in deals:
        seed = bytes.fromhex(vector["server_seed"])
        server = deal_round(seed, vector["client_seeds"], vector["seats"], vector["starter"])
        assert server.replacement is not None
        assert list(server.replacement.dolls_returned) == vector["replacement_dolls_returned"]


def _set(obj: Any, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    if isinstance(obj, list):
        obj[int(last)] = value
    else:
        obj[last] = value


def _table_evidence(v: dict[str, Any]) -> fairness.RoundEvidence:
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


@pytest.mark.parametrize("vector", vectors("table"), ids=lambda v: str(v["game"]))
def test_whole_table_transcripts_verify_and_every_tamper_is_named(vector: dict[str, Any]) -> None:
    import copy

    assert commitment(bytes.fromhex(vector["server_seed"])) == vector["commitment"]
    result = fairness.verify_round(_table_evidence(vector))
    assert result.ok, result.summary()
    assert result.whole_table
    assert result.contributed
    assert result.summary().startswith("table verified (")
    if "my_contribution" in vector:  # the verdict names the client's own contribution
        assert result.my_contribution == vector["my_contribution"]
        assert f"your contribution {vector['my_contribution']!r}" in result.summary()
        assert "your contribution is in this deal" in result.summary()
    if vector.get("record_version", 0) >= 3:
        assert "the seats' marks: 1 house bot (seat 2), 2 awaited" in result.summary()
    for tamper in vector["tampers"]:
        changed = copy.deepcopy(vector)
        for path, value in tamper["set"].items():
            _set(changed, path, value)
        failures = {f.check for f in fairness.verify_round(_table_evidence(changed)).failures}
        assert tamper["fails"] in failures, (tamper["name"], failures)


def test_the_kishpa_transcript_is_the_server_s_own_deal() -> None:
    (vector,) = [v for v in vectors("table") if v["game"] == "kishpa"]
    seed = bytes.fromhex(vector["server_seed"])
    server = deal_round(seed, vector["client_seeds"], vector["seats"], vector["starter"])
    assert [list(h) for h in server.hands] == vector["hands"]
    assert server.replacement is not None
    assert server.replacement.tile == vector["replacement"]
    returned = [*server.kishpa.dolls_returned, *server.replacement.dolls_returned]
    assert returned == vector["dolls_returned"]
    assert [server.pile[left] for _, _, left in vector["draws"]] == [
        tile for _, tile, _ in vector["draws"]
    ]
