"""Kishpa settlement records built from a hand-written round, and their postings as rows."""

from __future__ import annotations

from collections import Counter
from typing import Any

from games.kishpa.tiles import ALL_FACES

PLAYERS = ["p1", "p2", "p3", "p4"]


def tiles(text: str) -> list[str]:
    """Tiles written with blanks between them."""
    return text.split()


WIN_HAND = tiles("B1 B2 B3 B4 B5 Y7 Y8 Y9 K7 K8 K9 B10 B11 B12")


def build_hands(
    specs: dict[str, list[str]],
    sizes: dict[str, int],
    reserved: set[str],
    used: list[str] | None = None,
) -> dict[str, list[str]]:
    """Hands holding the named tiles, filled up with neutral tiles, never over-using a copy."""
    counts: Counter[str] = Counter(used or [])
    for tiles in specs.values():
        counts.update(tiles)
    pool: list[str] = []
    for face in ALL_FACES:
        text = str(face)
        if face.is_doll or text in reserved:
            continue
        pool += [text] * (2 - counts[text])
    hands: dict[str, list[str]] = {}
    for player, size in sizes.items():
        hand = list(specs.get(player, []))
        while len(hand) < size:
            hand.append(pool.pop())
        hands[player] = hand
    return hands


def record(
    *,
    kishpa: str = "R5",
    replacement: str | None = None,
    start: dict[str, list[str]] | None = None,
    end: dict[str, list[str]] | None = None,
    players: list[str] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A valid record: p1 starts; by default p1 holds one joker (so no replacement)."""
    players = players or PLAYERS
    final = replacement or kishpa
    colour, number = final[0], int(final[1:])
    joker = f"{colour}{number % 13 + 1}"
    first_joker = f"{kishpa[0]}{int(kishpa[1:]) % 13 + 1}"
    reserved = {kishpa, final, joker, first_joker, f"{colour}1", f"{kishpa[0]}1"}
    turned = [kishpa] + ([replacement] if replacement else [])
    if start is None:
        start = {} if replacement else {players[0]: [first_joker]}
    sizes = {p: 15 if k == 0 else 14 for k, p in enumerate(players)}
    obj: dict[str, Any] = {
        "players": players,
        "kishpa": kishpa,
        "start_hands": build_hands(start, sizes, reserved, turned),
        "bowl": 0,
    }
    if replacement:
        obj["replacement"] = replacement
    if end is not None:
        used = turned + ([fields["final_discard"]] if "final_discard" in fields else [])
        obj["end_hands"] = build_hands(end, dict.fromkeys(players, 14), reserved, used)
    obj.update(fields)
    return obj


def rows(result: list[dict[str, Any]], reason: str) -> list[tuple[str, str, int]]:
    return [(p["from"], p["to"], p["amount"]) for p in result if p["reason"] == reason]
