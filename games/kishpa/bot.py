"""Pure bot strategies for one seat, working from that seat's view (``round.view_for``).

Two levels (a table's ``bot_level``):

* ``normal`` (:func:`choose_action`, the solver): win when possible (the best-paying winning
  discard); take the top discard only when it adds to the tiles in groups; discard the tile
  that least belongs to groups;
* ``easy`` (:func:`draw_and_discard`): draw from the pile and throw the drawn tile away,
  winning only when the drawn tile completes the hand (what a timed-out turn does, plus the
  win it would otherwise miss).

Both always reveal the kishpa when allowed. Deterministic: ties are broken by a handed-in
:class:`FairStream`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from games.fair import FairStream
from games.kishpa.round import (
    DISCARD,
    END_REVEAL,
    FIRST_DISCARD,
    PILE,
    START_REVEAL,
    TURNS,
    Action,
    Discard,
    Draw,
    Pass,
    Reveal,
    Win,
)
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.solver import best_arrangement, winning_discards
from games.kishpa.tiles import Face, parse_face

BOT_TAG = "kishpa/fair/v1/bot"
"""Stream tag for bots' tie-breaks (bots seeded from a round seed never touch its deck)."""
EASY = "easy"
NORMAL = "normal"
"""The bot levels (``games.table.BOT_LEVELS``)."""


def action_at(
    level: str, view: Mapping[str, Any], stream: FairStream, rules: RuleSet = DEFAULT_RULES
) -> Action | None:
    """The next action of a bot of this level (``easy`` or anything else: ``normal``)."""
    if level == EASY:
        return draw_and_discard(view, stream, rules)
    return choose_action(view, stream, rules)


def draw_and_discard(
    view: Mapping[str, Any], stream: FairStream, rules: RuleSet = DEFAULT_RULES
) -> Action | None:
    """The easy bot: draw from the pile, win if the hand now wins, else discard the tile
    drawn (on the starter's first discard, the last tile dealt). ``stream`` is unused."""
    del stream
    seat = int(view["seat"])
    phase = view["phase"]
    if phase in (START_REVEAL, END_REVEAL):
        if view.get("may_reveal"):
            return Reveal(seat)
        return Pass(seat) if view.get("window_waits_for_me") else None
    if phase not in (FIRST_DISCARD, TURNS) or view.get("turn") != seat:
        return None
    if phase == TURNS and not view.get("drew"):
        return Draw(seat, PILE)
    ids = [int(t["id"]) for t in view["hand"]]
    faces = [parse_face(t["tile"]) for t in view["hand"]]
    win = _best_win(seat, ids, faces, parse_face(view["kishpa"]), rules)
    # The drawn tile is always the last in hand (the deal appends it).
    return win if win is not None else Discard(seat, ids[-1])


def choose_action(
    view: Mapping[str, Any], stream: FairStream, rules: RuleSet = DEFAULT_RULES
) -> Action | None:
    """The bot's next action for the seat whose view this is, or ``None`` to wait."""
    seat = int(view["seat"])
    phase = view["phase"]
    if phase in (START_REVEAL, END_REVEAL):
        if view.get("may_reveal"):
            return Reveal(seat)
        return Pass(seat) if view.get("window_waits_for_me") else None
    if phase not in (FIRST_DISCARD, TURNS) or view.get("turn") != seat:
        return None
    ids = [int(t["id"]) for t in view["hand"]]
    faces = [parse_face(t["tile"]) for t in view["hand"]]
    kishpa = parse_face(view["kishpa"])
    joker = parse_face(view["joker"])
    if phase == TURNS and not view.get("drew"):
        return Draw(seat, _draw_source(faces, view["discards"], kishpa, joker, rules))
    win = _best_win(seat, ids, faces, kishpa, rules)
    if win is not None:
        return win
    return Discard(seat, ids[_worst_tile(faces, joker, stream, rules)])


def _covered(faces: Sequence[Face], joker: Face, rules: RuleSet) -> int:
    return sum(len(g.positions) for g in best_arrangement(faces, joker, rules))


def _draw_source(
    faces: list[Face],
    discards: Sequence[Mapping[str, Any]],
    kishpa: Face,
    joker: Face,
    rules: RuleSet,
) -> str:
    if not discards:
        return PILE
    top = parse_face(discards[-1]["tile"])
    with_top = [*faces, top]
    if top == joker or winning_discards(with_top, kishpa, rules):
        return DISCARD
    return DISCARD if _covered(with_top, joker, rules) > _covered(faces, joker, rules) else PILE


def _best_win(
    seat: int, ids: list[int], faces: list[Face], kishpa: Face, rules: RuleSet
) -> Win | None:
    if len(faces) != rules.hand_size + 1:
        return None
    wins = winning_discards(faces, kishpa, rules)
    if not wins:
        return None
    best = max(wins, key=lambda w: w.payout_per_loser)
    groups = tuple(tuple(ids[p] for p in g.positions) for g in best.arrangement)
    return Win(seat, ids[best.position], groups)


def _worst_tile(faces: list[Face], joker: Face, stream: FairStream, rules: RuleSet) -> int:
    """Position of the tile that least belongs: outside every group, fewest neighbours."""
    grouped = {p for g in best_arrangement(faces, joker, rules) for p in g.positions}
    candidates = [p for p in range(len(faces)) if p not in grouped and faces[p] != joker]
    if not candidates:
        candidates = [p for p in range(len(faces)) if faces[p] != joker] or list(range(len(faces)))
    scores = {p: _neighbours(faces, p, joker) for p in candidates}
    lowest = min(scores.values())
    ties = [p for p in candidates if scores[p] == lowest]
    return ties[stream.randbelow(len(ties))]


def _neighbours(faces: list[Face], position: int, joker: Face) -> int:
    """How many other tiles could join this one in a run or a set (dolls play as the joker's
    face)."""
    face = joker if faces[position].is_doll else faces[position]
    count = 0
    for k, other in enumerate(faces):
        if k == position or other == joker:
            continue
        other = joker if other.is_doll else other
        same_colour_near = other.colour == face.colour and 0 < abs(other.number - face.number) <= 2
        same_number = other.number == face.number and other.colour != face.colour
        count += same_colour_near or same_number
    return count
