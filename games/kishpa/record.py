"""The round record: the durable phase record for settlement and ``kishpa rules settle``.

A record describes one whole round in tile notation (see :func:`settle_record` for the exact
format). The table service writes it into the outbox when a round starts (start fields only)
and when it ends (the whole round); the settlement workers call :func:`start_postings` and
:func:`end_postings` on it, and ``kishpa rules settle`` calls :func:`settle_record`. All three
validate the record and raise :class:`~games.kishpa.errors.InvalidRecordError` with a
one-line reason for anything impossible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from games.kishpa.bonuses import (
    KishpaFacts,
    count_jokers,
    end_bonus_postings,
    start_bonus_postings,
)
from games.kishpa.bowl import bowl_end_postings, contribution, contribution_postings
from games.kishpa.errors import InvalidRecordError, TileNotationError
from games.kishpa.ledger import BOWL, Posting, Reason, from_every_other, postings_to_dicts
from games.kishpa.payouts import win_payout
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.solver import find_winning_arrangement
from games.kishpa.tiles import Face, copies_of, parse_face

START_FIELDS = frozenset(
    {
        "players",
        "kishpa",
        "replacement",
        "start_hands",
        "start_reveal",
        "bowl",
        "previous_winner",
        "last_round",
        "stake",
    }
)
"""The fields known when a round starts (the start phase record holds only these)."""
END_FIELDS = frozenset({"end_hands", "winner", "final_discard", "end_reveal"})
ALL_FIELDS = START_FIELDS | END_FIELDS

Hands = dict[str, tuple[Face, ...]]


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """A validated round record. ``end_hands`` is ``None`` for a start-phase record."""

    players: tuple[str, ...]
    kishpa: Face
    replacement: Face | None
    start_hands: Hands
    start_reveal: str | None
    bowl: int
    previous_winner: str | None
    last_round: bool
    end_hands: Hands | None = None
    winner: str | None = None
    final_discard: Face | None = None
    end_reveal: str | None = None
    stake: int = 1
    """Tokens per unit of the rules' amounts (``"stake"``, default 1)."""

    @property
    def facts(self) -> KishpaFacts:
        return KishpaFacts(self.kishpa, self.replacement)

    @property
    def starter(self) -> str:
        """The player dealt one tile more than the others."""
        return max(self.players, key=lambda p: len(self.start_hands[p]))


def _fail(message: str) -> InvalidRecordError:
    return InvalidRecordError(message)


def _face(value: object, where: str) -> Face:
    if not isinstance(value, str):
        raise _fail(f"{where}: a tile must be written as text like 'R7', got {value!r}")
    try:
        return parse_face(value)
    except TileNotationError as exc:
        raise _fail(f"{where}: {exc}") from None


def _player(value: object, players: Sequence[str], where: str) -> str:
    if not isinstance(value, str) or value not in players:
        raise _fail(f"{where}: unknown player {value!r}")
    return value


def _optional_player(obj: Mapping[str, object], key: str, players: Sequence[str]) -> str | None:
    value = obj.get(key)
    return None if value is None else _player(value, players, key)


def _hands(value: object, players: Sequence[str], where: str) -> Hands:
    if not isinstance(value, Mapping):
        raise _fail(f"{where} must be an object mapping each player to a list of tiles")
    unknown = [k for k in value if k not in players]
    if unknown:
        raise _fail(f"{where}: unknown player {unknown[0]!r}")
    hands: Hands = {}
    for player in players:
        tiles = value.get(player)
        if not isinstance(tiles, list):
            raise _fail(f"{where}: missing the tiles of {player!r}")
        hands[player] = tuple(_face(t, f"{where}.{player}") for t in tiles)
    return hands


def _check_copies(faces: Sequence[Face], where: str) -> None:
    for face, count in Counter(faces).items():
        if count > copies_of(face):
            raise _fail(
                f"{where}: {face} appears {count} times but the set has only {copies_of(face)}"
                " (counting the turned kishpa)"
            )


def _players(value: object, rules: RuleSet) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise _fail("players must be a list of player ids in seat order")
    if not rules.min_seats <= len(value) <= rules.max_seats:
        raise _fail(
            f"a round seats {rules.min_seats} to {rules.max_seats} players, not {len(value)}"
        )
    if len(set(value)) != len(value):
        raise _fail("players: a player id appears twice")
    if BOWL in value:
        raise _fail(f"players: {BOWL!r} is the bowl's account, not a player id")
    return tuple(value)


def parse_record(
    obj: Mapping[str, object], rules: RuleSet = DEFAULT_RULES, *, require_end: bool = True
) -> RoundRecord:
    """Validate a record (end fields required unless ``require_end`` is false)."""
    if not isinstance(obj, Mapping):
        raise _fail("a round record must be a JSON object")
    unknown = sorted(set(obj) - ALL_FIELDS)
    if unknown:
        raise _fail(f"unknown field {unknown[0]!r}")
    for key in ("players", "kishpa", "start_hands", "bowl"):
        if key not in obj:
            raise _fail(f"missing field {key!r}")
    players = _players(obj["players"], rules)
    kishpa = _face(obj["kishpa"], "kishpa")
    if kishpa.is_doll:
        raise _fail("kishpa: a doll is never the kishpa; it goes back into the pile")
    replacement = None
    if obj.get("replacement") is not None:
        replacement = _face(obj["replacement"], "replacement")
        if replacement.is_doll:
            raise _fail("replacement: a doll is never the kishpa; it goes back into the pile")
    turned = [kishpa] if replacement is None else [kishpa, replacement]
    bowl = obj["bowl"]
    if isinstance(bowl, bool) or not isinstance(bowl, int) or bowl < 0:
        raise _fail(f"bowl must be a whole number of tokens >= 0, got {bowl!r}")
    last_round = obj.get("last_round", False)
    if not isinstance(last_round, bool):
        raise _fail("last_round must be true or false")
    stake = obj.get("stake")
    if stake is None:
        stake = 1  # optional, like every other optional field: absent or null
    if isinstance(stake, bool) or not isinstance(stake, int) or stake < 1:
        raise _fail(f"stake must be a whole number of tokens >= 1, got {stake!r}")

    start_hands = _hands(obj["start_hands"], players, "start_hands")
    sizes = sorted(len(h) for h in start_hands.values())
    expected = sorted([rules.hand_size] * (len(players) - 1) + [rules.hand_size + 1])
    if sizes != expected:
        raise _fail(
            f"start_hands: the starter holds {rules.hand_size + 1} tiles and every other "
            f"player {rules.hand_size}, got sizes {[len(start_hands[p]) for p in players]}"
        )
    _check_copies([f for h in start_hands.values() for f in h] + turned, "start_hands")

    first = KishpaFacts(kishpa)
    anyone_held_joker = any(count_jokers(h, first) > 0 for h in start_hands.values())
    if replacement is not None and rules.max_kishpa_replacements == 0:
        raise _fail("replacement: this table never replaces the kishpa")
    if replacement is not None and anyone_held_joker:
        raise _fail("replacement: the kishpa is replaced only when nobody holds a joker")
    if replacement is None and not anyone_held_joker and rules.max_kishpa_replacements > 0:
        raise _fail("replacement missing: nobody held a joker, so a new kishpa is turned")

    start_reveal = _optional_player(obj, "start_reveal", players)
    if start_reveal is not None:
        if anyone_held_joker or replacement is None:
            raise _fail("start_reveal: the start reveal is open only when nobody holds a joker")
        if kishpa not in start_hands[start_reveal]:
            raise _fail(f"start_reveal: {start_reveal} does not hold the kishpa {kishpa}")
    previous_winner = _optional_player(obj, "previous_winner", players)

    record = RoundRecord(
        players,
        kishpa,
        replacement,
        start_hands,
        start_reveal,
        bowl,
        previous_winner,
        last_round,
        stake=stake,
    )
    if "end_hands" not in obj:
        if require_end:
            raise _fail("missing field 'end_hands'")
        for key in END_FIELDS:
            if obj.get(key) is not None:
                raise _fail(f"{key} given without end_hands")
        return record
    return _parse_end(obj, record, turned, rules)


def _parse_end(
    obj: Mapping[str, object], record: RoundRecord, turned: list[Face], rules: RuleSet
) -> RoundRecord:
    players = record.players
    end_hands = _hands(obj["end_hands"], players, "end_hands")
    for player in players:
        if len(end_hands[player]) != rules.hand_size:
            raise _fail(
                f"end_hands: {player} holds {len(end_hands[player])} tiles; "
                f"every hand ends with {rules.hand_size}"
            )
    winner = _optional_player(obj, "winner", players)
    final_discard = None
    if obj.get("final_discard") is not None:
        if winner is None:
            raise _fail("final_discard given without a winner")
        final_discard = _face(obj["final_discard"], "final_discard")
    elif winner is not None:
        raise _fail("winner given without the final_discard")
    extra = [] if final_discard is None else [final_discard]
    _check_copies([f for h in end_hands.values() for f in h] + turned + extra, "end_hands")
    facts = record.facts
    if winner is not None and (
        find_winning_arrangement(list(end_hands[winner]), facts.joker, rules) is None
    ):
        raise _fail(f"winner: the 14 tiles of {winner} do not form a winning hand")
    end_reveal = _optional_player(obj, "end_reveal", players)
    if end_reveal is not None:
        if record.start_reveal is not None:
            raise _fail("end_reveal: the kishpa pays once per round and was revealed at the start")
        if end_reveal == winner:
            raise _fail("end_reveal: the winner's kishpa is paid through the win table")
        if facts.final not in end_hands[end_reveal]:
            raise _fail(f"end_reveal: {end_reveal} does not hold the kishpa {facts.final}")
    return RoundRecord(
        record.players,
        record.kishpa,
        record.replacement,
        record.start_hands,
        record.start_reveal,
        record.bowl,
        record.previous_winner,
        record.last_round,
        end_hands,
        winner,
        final_discard,
        end_reveal,
        record.stake,
    )


def _as_record(
    record: RoundRecord | Mapping[str, object], rules: RuleSet, end: bool
) -> tuple[RoundRecord, RuleSet]:
    """The validated record and the rules at its stake (the record's stake decides)."""
    if isinstance(record, RoundRecord):
        if end and record.end_hands is None:
            raise _fail("missing field 'end_hands'")
        rec = record
    else:
        rec = parse_record(record, rules, require_end=end)
    return rec, rules if rules.stake == rec.stake else replace(rules, stake=rec.stake)


def start_postings(
    record: RoundRecord | Mapping[str, object], rules: RuleSet = DEFAULT_RULES
) -> list[Posting]:
    """The start phase: bowl contributions, then the start bonuses (one atomic batch)."""
    rec, rules = _as_record(record, rules, end=False)
    postings = contribution_postings(rec.players, rec.facts.final, rules)
    postings += start_bonus_postings(
        rec.players, rec.start_hands, rec.facts, rec.start_reveal, rules
    )
    return postings


def end_postings(
    record: RoundRecord | Mapping[str, object], rules: RuleSet = DEFAULT_RULES
) -> list[Posting]:
    """The end phase: the win, the end bonuses, then the bowl (taken or split)."""
    rec, rules = _as_record(record, rules, end=True)
    assert rec.end_hands is not None
    facts = rec.facts
    postings: list[Posting] = []
    if rec.winner is not None:
        assert rec.final_discard is not None
        per_loser = win_payout(
            list(rec.end_hands[rec.winner]), rec.final_discard, facts.final, rules
        )
        postings += from_every_other(rec.players, rec.winner, per_loser, Reason.WIN)
    postings += end_bonus_postings(
        rec.players,
        rec.start_hands,
        rec.end_hands,
        facts,
        rec.winner,
        rec.start_reveal,
        rec.end_reveal,
        rules,
    )
    bowl_now = rec.bowl + contribution(facts.final, rules) * len(rec.players)
    postings += bowl_end_postings(
        rec.players,
        bowl_now,
        rec.winner,
        rec.previous_winner,
        rec.last_round,
        rec.starter,
        rules,
    )
    return postings


def settle_record(obj: dict[str, object], rules: RuleSet = DEFAULT_RULES) -> dict[str, object]:
    """``kishpa rules settle``: one whole round in, ``{"start": [...], "end": [...]}`` out.

    Input (tiles in notation, players as given)::

        {"players": ["p1", "p2", "p3", "p4"],       seat order
         "kishpa": "R5",                             the tile turned first
         "replacement": "B9",                        optional: new kishpa when nobody held a joker
         "start_hands": {"p1": [15 tiles], ...},     right after the deal
         "start_reveal": "p3",                       optional: who revealed in the start window
         "end_hands": {"p1": [14 tiles], ...},       the winner's 14 after his last discard
         "winner": "p2", "final_discard": "R6",      optional (absent when the pile ran out)
         "end_reveal": "p4",                         optional: who revealed in the end window
         "bowl": 12,                                 tokens in the bowl before this round
         "previous_winner": "p2",                    optional: won the round before, kept the bowl
         "last_round": false,                        optional: this is the final round
         "stake": 5}                                 optional (default 1): tokens per unit

    Output: each posting is ``{"from", "to", "amount", "reason"}``; accounts are the player
    ids and ``"bowl"``. The stake multiplies every amount the rules move; the bowl (given in
    tokens) and its last-round split follow from the multiplied amounts.
    """
    record = parse_record(obj, rules, require_end=True)
    return {
        "start": postings_to_dicts(start_postings(record, rules)),
        "end": postings_to_dicts(end_postings(record, rules)),
    }
