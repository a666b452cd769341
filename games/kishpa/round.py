"""One round of Kishpa as an explicit state machine (docs/rules/kishpa.md sections 2-4, 6, 7).

``new_round(...)`` deals and returns the first state; ``apply(state, action)`` returns the
next state and the events it produced, or raises :class:`IllegalMoveError` with a specific
``reason`` and leaves the given state untouched. The state is plain data (``to_dict`` /
``from_dict`` with str/int/bool/list/dict values) so the table service can keep it in Redis.

Phases::

    start_reveal   only when nobody holds a joker: the holder of the kishpa may reveal it;
                   when the window closes a new kishpa is turned (the joker changes)
    first_discard  the starter discards one of his 15 tiles without drawing (or wins at once)
    turns          draw (pile or the top discard), then discard or win
    end_reveal     the round is over (win or pile exhausted); the holder of the kishpa may
                   reveal it, unless it was revealed at the start or he won
    ended          nothing more happens; the records are final

Tile ids (0-105) are tracked everywhere: every tile is always in exactly one place (the pile,
a hand, the discards, the turned kishpas, or the hidden replacement kishpa).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from games.fair import commitment
from games.kishpa.deal import deal_round
from games.kishpa.errors import IllegalMoveError
from games.kishpa.group_check import group_kind, is_winning_arrangement
from games.kishpa.payouts import win_payout
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet, rules_dict, ruleset_from
from games.kishpa.solver import find_winning_arrangement
from games.kishpa.tiles import TILE_COUNT, Face, face_of, joker_of

START_REVEAL = "start_reveal"
FIRST_DISCARD = "first_discard"
TURNS = "turns"
END_REVEAL = "end_reveal"
ENDED = "ended"
PHASES = (START_REVEAL, FIRST_DISCARD, TURNS, END_REVEAL, ENDED)

PILE = "pile"
DISCARD = "discard"


# --- actions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Draw:
    """Draw one tile from the pile or take the top discard."""

    seat: int
    source: str = PILE


@dataclass(frozen=True, slots=True)
class Discard:
    """Discard a tile from hand (ends the turn)."""

    seat: int
    tile: int


@dataclass(frozen=True, slots=True)
class Win:
    """Discard ``tile`` so the 14 left win; ``arrangement`` (groups of tile ids in play
    order) is optional: it is checked, and when missing or wrong the server searches."""

    seat: int
    tile: int
    arrangement: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True, slots=True)
class Reveal:
    """Reveal the kishpa in an open reveal window."""

    seat: int


@dataclass(frozen=True, slots=True)
class Pass:
    """Decline to reveal in an open reveal window."""

    seat: int


@dataclass(frozen=True, slots=True)
class CloseWindow:
    """The service closes a reveal window at its deadline."""


@dataclass(frozen=True, slots=True)
class TurnTimeout:
    """The service plays a turn not finished in time: draw from the pile and discard the
    drawn tile (the starter's first turn discards his last dealt tile)."""

    seat: int


Action = Draw | Discard | Win | Reveal | Pass | CloseWindow | TurnTimeout


# --- events ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened, for the table's event stream.

    ``data`` is public unless ``public`` is false, in which case the whole event is for
    ``private_seat`` only. ``private_data`` (with ``private_seat``) is a fact only that seat
    may see, attached to a public event (e.g. "you drew R7" on the public "p2 drew").
    Public data never holds another seat's tiles or the pile order.
    """

    type: str
    seat: int = -1
    data: dict[str, Any] = field(default_factory=dict)
    private_seat: int | None = None
    private_data: dict[str, Any] | None = None
    public: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- state -----------------------------------------------------------------------------


@dataclass(slots=True)
class RoundState:
    """The whole round, hidden parts included (the pile order, every hand, the seed)."""

    round_no: int
    players: list[str]
    starter: int
    rules: dict[str, Any]
    server_seed: str
    client_seeds: list[str | None]
    commitment: str
    pile: list[int]
    """Top at the end."""
    hands: list[list[int]]
    start_hands: list[list[int]]
    discards: list[int]
    """Top at the end."""
    kishpa_tiles: list[int]
    """Turned face up: the first kishpa, then its replacement once turned."""
    pending_replacement: int | None
    dolls_returned: list[int]
    phase: str
    turn: int
    drew: bool = False
    drawn_tile: int | None = None
    window_acted: list[int] = field(default_factory=list)
    start_reveal: int | None = None
    end_reveal: int | None = None
    winner: int | None = None
    final_discard: int | None = None
    winning_groups: list[list[int]] = field(default_factory=list)
    bowl: int = 0
    previous_winner: str | None = None
    last_round: bool = False
    timeouts: list[int] = field(default_factory=list)
    turns_played: int = 0
    replacement_dolls: list[int] = field(default_factory=list)
    """Dolls turned back while the (still hidden) replacement was turned; published with it."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (a deep copy)."""
        # Hand-written rather than dataclasses.asdict, which is 5x slower on this shape and
        # runs on every action the table service applies.
        data = {name: getattr(self, name) for name in _FIELDS}
        for key in _LISTS:
            data[key] = list(data[key])
        for key in _NESTED_LISTS:
            data[key] = [list(x) for x in data[key]]
        data["rules"] = dict(self.rules)
        return data

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> RoundState:
        """Rebuild a state from :meth:`to_dict` output (after a JSON round trip too)."""
        data = dict(obj)
        for key in _LISTS:
            data[key] = list(data.get(key, []))
        for key in _NESTED_LISTS:
            data[key] = [list(x) for x in data.get(key, [])]
        data["rules"] = dict(data["rules"])
        return cls(**data)

    @property
    def ruleset(self) -> RuleSet:
        return ruleset_from(self.rules)

    @property
    def kishpa(self) -> Face:
        """The current kishpa (the replacement once it is turned)."""
        return face_of(self.kishpa_tiles[-1])

    @property
    def joker(self) -> Face:
        return joker_of(self.kishpa)

    @property
    def seats(self) -> int:
        return len(self.players)


_FIELDS = tuple(f.name for f in fields(RoundState))
_LISTS: tuple[str, ...] = (
    "players",
    "client_seeds",
    "pile",
    "discards",
    "kishpa_tiles",
    "dolls_returned",
    "window_acted",
    "timeouts",
    "replacement_dolls",
)
_NESTED_LISTS = ("hands", "start_hands", "winning_groups")


def new_round(
    players: list[str],
    starter: int,
    server_seed: bytes,
    client_seeds: list[str | None] | None = None,
    *,
    round_no: int = 1,
    bowl: int = 0,
    previous_winner: str | None = None,
    last_round: bool = False,
    rules: RuleSet = DEFAULT_RULES,
) -> tuple[RoundState, list[Event]]:
    """Deal a round and open it: the start reveal window when nobody holds a joker, else
    the starter's first discard."""
    seeds = list(client_seeds or [])
    deal = deal_round(server_seed, seeds, len(players), starter, rules)
    state = RoundState(
        round_no=round_no,
        players=list(players),
        starter=starter,
        rules=rules_dict(rules),
        server_seed=server_seed.hex(),
        client_seeds=seeds,
        commitment=commitment(server_seed),
        pile=list(deal.pile),
        hands=[list(h) for h in deal.hands],
        start_hands=[list(h) for h in deal.hands],
        discards=[],
        kishpa_tiles=[deal.kishpa.tile],
        pending_replacement=None if deal.replacement is None else deal.replacement.tile,
        dolls_returned=list(deal.kishpa.dolls_returned),
        phase=START_REVEAL if deal.replacement is not None else FIRST_DISCARD,
        turn=starter,
        bowl=bowl,
        previous_winner=previous_winner,
        last_round=last_round,
        timeouts=[0] * len(players),
        replacement_dolls=[] if deal.replacement is None else list(deal.replacement.dolls_returned),
    )
    events = [
        Event(
            "round_started",
            data={
                "round": round_no,
                "players": list(players),
                "starter": starter,
                "commitment": state.commitment,
                "kishpa": str(face_of(deal.kishpa.tile)),
                "kishpa_id": deal.kishpa.tile,
                "joker": str(state.joker),
                "dolls_returned": [str(face_of(t)) for t in deal.kishpa.dolls_returned],
                "dolls_returned_ids": list(deal.kishpa.dolls_returned),
                "hand_sizes": [len(h) for h in state.hands],
                "pile": len(state.pile),
            },
        )
    ]
    for seat, hand in enumerate(state.hands):
        events.append(
            Event(
                "dealt",
                seat=seat,
                data={"tiles": len(hand)},
                private_seat=seat,
                private_data={"hand": _tiles(hand)},
            )
        )
    if state.phase == START_REVEAL:
        events += _open_window(state, "start")
    else:
        events += _start_play(state)
    return state, events


# --- queries for the service -------------------------------------------------------------


def eligible_to_reveal(state: RoundState) -> list[int]:
    """Seats that may still reveal in the open window (never published: it shows a hand)."""
    if state.phase == START_REVEAL:
        face = face_of(state.kishpa_tiles[0])
        holders = [s for s in range(state.seats) if _holds(state, s, face)]
    elif state.phase == END_REVEAL and state.start_reveal is None:
        face = state.kishpa
        holders = [s for s in range(state.seats) if s != state.winner and _holds(state, s, face)]
    else:
        return []
    return [s for s in holders if s not in state.window_acted]


def window_waits_for(state: RoundState) -> list[int]:
    """Seats whose reveal-or-pass the open window still waits for.

    With ``reveal_window_waits_for_all`` this is every seat that could be a holder as far as
    the table knows, so the window's timing reveals nothing about anybody's hand.
    """
    if state.phase == END_REVEAL and state.start_reveal is not None:
        return []  # the kishpa was revealed publicly at the start: nothing is left to hide
    if not state.ruleset.reveal_window_waits_for_all:
        return eligible_to_reveal(state)
    if state.phase == START_REVEAL:
        candidates = list(range(state.seats))
    elif state.phase == END_REVEAL:
        candidates = [s for s in range(state.seats) if s != state.winner]
    else:
        return []
    return [s for s in candidates if s not in state.window_acted]


def seats_to_act(state: RoundState) -> list[int]:
    """Who the round waits for (the service sets deadlines on these seats)."""
    if state.phase in (START_REVEAL, END_REVEAL):
        return window_waits_for(state)
    if state.phase in (FIRST_DISCARD, TURNS):
        return [state.turn]
    return []


def waiting_for(state: RoundState) -> str | None:
    """``"turn"``, ``"window"`` or ``None`` once ended: which deadline applies."""
    if state.phase in (START_REVEAL, END_REVEAL):
        return "window"
    if state.phase in (FIRST_DISCARD, TURNS):
        return "turn"
    return None


def view_for(state: RoundState, seat: int | None) -> dict[str, Any]:
    """What one seat (or a spectator, ``None``) may see: public facts plus its own tiles."""
    view: dict[str, Any] = {
        "round": state.round_no,
        "phase": state.phase,
        "players": list(state.players),
        "starter": state.starter,
        "turn": state.turn if state.phase in (FIRST_DISCARD, TURNS) else None,
        "drew": state.drew,
        "commitment": state.commitment,
        "kishpas": [str(face_of(t)) for t in state.kishpa_tiles],
        "kishpa": str(state.kishpa),
        "joker": str(state.joker),
        "hand_sizes": [len(h) for h in state.hands],
        "pile": len(state.pile),
        "discards": _tiles(state.discards),
        "start_reveal": state.start_reveal,
        "end_reveal": state.end_reveal,
        "winner": state.winner,
        "final_discard": None if state.final_discard is None else str(face_of(state.final_discard)),
        "winning_groups": [[str(face_of(t)) for t in g] for g in state.winning_groups],
        "server_seed": state.server_seed if state.phase == ENDED else None,
        "client_seeds": list(state.client_seeds),
    }
    if seat is not None:
        view["seat"] = seat
        view["hand"] = _tiles(state.hands[seat])
        view["may_reveal"] = seat in eligible_to_reveal(state)
        view["window_waits_for_me"] = seat in window_waits_for(state)
    return view


def tile_places(state: RoundState) -> dict[int, str]:
    """Where every tile is (for invariants and audits)."""
    places: dict[int, str] = {}

    def put(tiles: list[int], place: str) -> None:
        for tile in tiles:
            if tile in places:
                raise AssertionError(f"tile {tile} is both in {places[tile]} and {place}")
            places[tile] = place

    put(state.pile, PILE)
    for seat, hand in enumerate(state.hands):
        put(hand, f"hand:{seat}")
    put(state.discards, "discards")
    put(state.kishpa_tiles, "kishpa")
    if state.pending_replacement is not None:
        put([state.pending_replacement], "replacement")
    if sorted(places) != list(range(TILE_COUNT)):
        raise AssertionError("some tile is nowhere")
    return places


def start_record(state: RoundState) -> dict[str, Any]:
    """The start phase record (``kishpa rules settle`` format, start fields only)."""
    if state.phase == START_REVEAL:
        raise ValueError("the start phase is not over: the start reveal window is open")
    rec: dict[str, Any] = {
        "players": list(state.players),
        "kishpa": str(face_of(state.kishpa_tiles[0])),
        "start_hands": {
            p: [str(face_of(t)) for t in state.start_hands[s]] for s, p in enumerate(state.players)
        },
        "bowl": state.bowl,
        "last_round": state.last_round,
        "stake": state.ruleset.stake,
    }
    if len(state.kishpa_tiles) > 1:
        rec["replacement"] = str(face_of(state.kishpa_tiles[1]))
    if state.start_reveal is not None:
        rec["start_reveal"] = state.players[state.start_reveal]
    if state.previous_winner is not None:
        rec["previous_winner"] = state.previous_winner
    return rec


def end_record(state: RoundState) -> dict[str, Any]:
    """The whole-round record for the end phase (``kishpa rules settle`` format)."""
    if state.phase != ENDED:
        raise ValueError("the round has not ended")
    rec = start_record(state)
    rec["end_hands"] = {
        p: [str(face_of(t)) for t in state.hands[s]] for s, p in enumerate(state.players)
    }
    if state.winner is not None:
        assert state.final_discard is not None
        rec["winner"] = state.players[state.winner]
        rec["final_discard"] = str(face_of(state.final_discard))
    if state.end_reveal is not None:
        rec["end_reveal"] = state.players[state.end_reveal]
    return rec


# --- transitions -----------------------------------------------------------------------


def apply(state: RoundState, action: Action) -> tuple[RoundState, list[Event]]:
    """The next state and its events; raises :class:`IllegalMoveError` (state untouched)."""
    new = RoundState.from_dict(state.to_dict())
    if isinstance(action, Draw):
        events = _draw(new, action.seat, action.source)
    elif isinstance(action, Discard):
        events = _discard(new, action.seat, action.tile)
    elif isinstance(action, Win):
        events = _win(new, action.seat, action.tile, action.arrangement)
    elif isinstance(action, Reveal | Pass):
        events = _window_action(new, action.seat, reveal=isinstance(action, Reveal))
    elif isinstance(action, CloseWindow):
        if new.phase not in (START_REVEAL, END_REVEAL):
            raise IllegalMoveError("no reveal window is open", "WINDOW_CLOSED")
        events = _close_window(new)
    elif isinstance(action, TurnTimeout):
        events = _timeout(new, action.seat)
    else:  # pragma: no cover - the Action union is closed
        raise IllegalMoveError(f"unknown action {action!r}", "UNKNOWN_ACTION")
    if not isinstance(action, CloseWindow | TurnTimeout):
        new.timeouts[action.seat] = 0
    return new, events


def _check_seat(state: RoundState, seat: int) -> None:
    if not isinstance(seat, int) or not 0 <= seat < state.seats:
        raise IllegalMoveError(f"there is no seat {seat!r} at this table", "UNKNOWN_SEAT")


def _check_turn(state: RoundState, seat: int) -> None:
    _check_seat(state, seat)
    if state.phase in (START_REVEAL, END_REVEAL):
        raise IllegalMoveError("a reveal window is open; play waits for it", "WINDOW_OPEN")
    if state.phase == ENDED:
        raise IllegalMoveError("the round has ended", "ROUND_ENDED")
    if seat != state.turn:
        raise IllegalMoveError(
            f"it is {state.players[state.turn]}'s turn, not {state.players[seat]}'s",
            "NOT_YOUR_TURN",
        )


def _check_in_hand(state: RoundState, seat: int, tile: int) -> None:
    if not isinstance(tile, int) or tile not in state.hands[seat]:
        raise IllegalMoveError(f"tile {tile!r} is not in your hand", "TILE_NOT_IN_HAND")


def _draw(state: RoundState, seat: int, source: str) -> list[Event]:
    _check_turn(state, seat)
    if state.phase == FIRST_DISCARD:
        raise IllegalMoveError("the starter begins by discarding, without drawing", "NO_DRAW")
    if state.drew:
        raise IllegalMoveError("you already drew this turn; discard or win", "ALREADY_DREW")
    if source == PILE:
        if not state.pile:
            raise IllegalMoveError("the pile is empty", "PILE_EMPTY")
        tile = state.pile.pop()
    elif source == DISCARD:
        if not state.discards:
            raise IllegalMoveError("there is no discard to take", "NO_DISCARD")
        tile = state.discards.pop()
    else:
        raise IllegalMoveError(f"draw from 'pile' or 'discard', not {source!r}", "BAD_SOURCE")
    state.hands[seat].append(tile)
    state.drew = True
    state.drawn_tile = tile
    public: dict[str, Any] = {"source": source, "pile": len(state.pile)}
    if source == DISCARD:
        public["tile"] = str(face_of(tile))
        public["tile_id"] = tile
    return [
        Event(
            "drew",
            seat=seat,
            data=public,
            private_seat=seat,
            private_data={"tile": str(face_of(tile)), "tile_id": tile},
        )
    ]


def _may_finish_turn(state: RoundState, seat: int, verb: str) -> None:
    _check_turn(state, seat)
    if state.phase == TURNS and not state.drew:
        raise IllegalMoveError(f"draw a tile before you {verb}", "MUST_DRAW_FIRST")


def _discard(state: RoundState, seat: int, tile: int) -> list[Event]:
    _may_finish_turn(state, seat, "discard")
    _check_in_hand(state, seat, tile)
    state.hands[seat].remove(tile)
    state.discards.append(tile)
    events = [Event("discarded", seat=seat, data={"tile": str(face_of(tile)), "tile_id": tile})]
    state.turns_played += 1
    if not state.pile:
        state.phase = END_REVEAL
        events.append(Event("pile_exhausted", data={"turns": state.turns_played}))
        return events + _open_window(state, "end")
    return events + _next_turn(state)


def _win(
    state: RoundState, seat: int, tile: int, arrangement: tuple[tuple[int, ...], ...] | None
) -> list[Event]:
    _may_finish_turn(state, seat, "win")
    if state.phase == FIRST_DISCARD and not state.ruleset.starter_may_win_at_once:
        raise IllegalMoveError("the starter may not win on his first discard", "NOT_ALLOWED")
    _check_in_hand(state, seat, tile)
    remaining = [t for t in state.hands[seat] if t != tile]
    groups = _checked_arrangement(state, remaining, arrangement)
    if groups is None:
        faces = [face_of(t) for t in remaining]
        found = find_winning_arrangement(faces, state.joker, state.ruleset)
        if found is None:
            raise IllegalMoveError(
                "the 14 tiles left would not form a winning hand", "NOT_A_WINNING_HAND"
            )
        groups = [[remaining[p] for p in g.positions] for g in found]
    state.hands[seat] = remaining
    state.discards.append(tile)
    state.winner = seat
    state.final_discard = tile
    state.winning_groups = groups
    state.turns_played += 1
    per_loser = win_payout(
        [face_of(t) for t in remaining], face_of(tile), state.kishpa, state.ruleset
    )
    state.phase = END_REVEAL
    won = Event(
        "won",
        seat=seat,
        data={
            "player": state.players[seat],
            "discard": str(face_of(tile)),
            "discard_id": tile,
            "groups": [[str(face_of(t)) for t in g] for g in groups],
            "group_ids": [list(g) for g in groups],
            "group_kinds": winning_group_kinds(state),
            "payout_per_loser": per_loser,
        },
    )
    return [won, *_open_window(state, "end")]


def winning_group_kinds(state: RoundState) -> list[str]:
    """``run`` or ``set`` for each of the winning groups (in the order of
    ``state.winning_groups``; empty while nobody has won)."""
    joker, rules = state.joker, state.ruleset
    return [group_kind([face_of(t) for t in g], joker, rules) for g in state.winning_groups]


def _checked_arrangement(
    state: RoundState, remaining: list[int], arrangement: tuple[tuple[int, ...], ...] | None
) -> list[list[int]] | None:
    """The proposed arrangement if it is a valid winning one, else ``None``."""
    if not arrangement:
        return None
    groups = [list(g) for g in arrangement]
    flat = [t for g in groups for t in g]
    # A malformed proposal is ignored (the server searches), never an internal error.
    if not all(type(t) is int for t in flat) or sorted(flat) != sorted(remaining):
        return None
    faces = [[face_of(t) for t in group] for group in groups]
    return groups if is_winning_arrangement(faces, state.joker, state.ruleset) else None


def _window_action(state: RoundState, seat: int, *, reveal: bool) -> list[Event]:
    _check_seat(state, seat)
    if state.phase not in (START_REVEAL, END_REVEAL):
        raise IllegalMoveError("no reveal window is open", "WINDOW_CLOSED")
    passing_without_kishpa = not reveal and seat in window_waits_for(state)
    if seat not in eligible_to_reveal(state) and not passing_without_kishpa:
        if seat in state.window_acted:
            raise IllegalMoveError("you already acted in this window", "ALREADY_ACTED")
        if state.phase == END_REVEAL and state.start_reveal is not None:
            raise IllegalMoveError("the kishpa was revealed at the start", "ALREADY_REVEALED")
        if state.phase == END_REVEAL and seat == state.winner:
            raise IllegalMoveError(
                "the winner's kishpa is paid through the win table", "WINNER_CANNOT_REVEAL"
            )
        raise IllegalMoveError("you do not hold the kishpa", "NOT_HOLDING_KISHPA")
    state.window_acted.append(seat)
    events: list[Event]
    if reveal:
        if state.phase == START_REVEAL:
            state.start_reveal = seat
            face = face_of(state.kishpa_tiles[0])
        else:
            state.end_reveal = seat
            face = state.kishpa
        events = [
            Event(
                "kishpa_revealed",
                seat=seat,
                data={"player": state.players[seat], "tile": str(face)},
            )
        ]
    else:
        events = [Event("reveal_declined", seat=seat, private_seat=seat, public=False)]
    if not window_waits_for(state) or (reveal and not eligible_to_reveal(state)):
        events += _close_window(state)
    return events


def _open_window(state: RoundState, moment: str) -> list[Event]:
    state.window_acted = []
    state.drew = False
    state.drawn_tile = None
    events = [Event("reveal_window_opened", data={"moment": moment})]
    if not window_waits_for(state):
        return events + _close_window(state)
    for seat in eligible_to_reveal(state):
        events.append(
            Event(
                "may_reveal",
                seat=seat,
                data={"moment": moment},
                private_seat=seat,
                public=False,
            )
        )
    return events


def _close_window(state: RoundState) -> list[Event]:
    moment = "start" if state.phase == START_REVEAL else "end"
    events = [Event("reveal_window_closed", data={"moment": moment})]
    state.window_acted = []
    if state.phase == START_REVEAL:
        assert state.pending_replacement is not None
        state.kishpa_tiles.append(state.pending_replacement)
        state.pending_replacement = None
        events.append(
            Event(
                "kishpa_replaced",
                data={
                    "kishpa": str(state.kishpa),
                    "kishpa_id": state.kishpa_tiles[-1],
                    "joker": str(state.joker),
                    "dolls_returned_ids": list(state.replacement_dolls),
                },
            )
        )
        return events + _start_play(state)
    state.phase = ENDED
    events.append(
        Event(
            "round_ended",
            data={
                "winner": state.winner,
                "final_discard": None
                if state.final_discard is None
                else str(face_of(state.final_discard)),
                "final_discard_id": state.final_discard,
                "start_reveal": state.start_reveal,
                "end_reveal": state.end_reveal,
                "server_seed": state.server_seed,
                "client_seeds": list(state.client_seeds),
                "commitment": state.commitment,
            },
        )
    )
    events.append(Event("phase_recorded", data={"phase": "end"}))
    return events


def _start_play(state: RoundState) -> list[Event]:
    state.phase = FIRST_DISCARD
    state.turn = state.starter
    state.drew = False
    state.drawn_tile = None
    return [
        Event("phase_recorded", data={"phase": "start"}),
        Event("turn_started", seat=state.starter, data={"first_discard": True}),
    ]


def _next_turn(state: RoundState) -> list[Event]:
    state.phase = TURNS
    state.turn = (state.turn + 1) % state.seats
    state.drew = False
    state.drawn_tile = None
    return [Event("turn_started", seat=state.turn, data={"first_discard": False})]


def _timeout(state: RoundState, seat: int) -> list[Event]:
    _check_turn(state, seat)
    state.timeouts[seat] += 1
    events = [Event("turn_timed_out", seat=seat, data={"in_a_row": state.timeouts[seat]})]
    if state.phase == FIRST_DISCARD:
        return events + _discard(state, seat, state.start_hands[seat][-1])
    if not state.drew:
        events += _draw(state, seat, PILE)
    assert state.drawn_tile is not None
    return events + _discard(state, seat, state.drawn_tile)


def _holds(state: RoundState, seat: int, face: Face) -> bool:
    return any(face_of(t) == face for t in state.hands[seat])


def _tiles(tiles: list[int]) -> list[dict[str, Any]]:
    return [{"id": t, "tile": str(face_of(t))} for t in tiles]
