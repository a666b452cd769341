"""An ended round's record, folded from the table's event stream (pure; no I/O).

The table service (``GetRoundRecord`` while the table lives) and the settlement worker (the
round archive, written when the round settles) both build a round's record with
:func:`fold_round` from the same stream entries, so the archive holds exactly what the
table would serve. The fold is *public*: once the seed is revealed nothing of the deal is
secret, so the record carries every seat's dealt tiles and every draw; one player's own
view (his seat, his dealt tiles, his draws) is cut from it by :mod:`archive.round_proto`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from games.contributions import CONTRIBUTION_ACCEPTED, SEED_COMMITTED
from games.hand import GAME as HAND
from games.kishpa import GAME as KISHPA
from games.registry import GAMES
from games.spec import GameSpec
from shared.stream import StoredEvent, TableEvent

ENDING_EVENTS = frozenset(g.round_end_event for g in GAMES)
"""The event that ends a round (Kishpa) or a deal (Hand): its seed is revealed in it."""


@dataclass(slots=True)
class RoundRecord:
    """The public facts of one ended round (every seat's deal, every draw and move)."""

    table_id: str
    round_no: int
    players: list[str]
    starter: int
    commitment: str = ""
    server_seed: str = ""
    client_seeds: list[str | None] = field(default_factory=list)
    kishpa: str = ""
    kishpa_id: int | None = None
    replacement_kishpa: str = ""
    replacement_id: int | None = None
    dolls_returned: list[int] = field(default_factory=list)
    hand_size: int = 14
    game: str = KISHPA.name
    top_discard: int | None = None
    hands: dict[int, list[int]] = field(default_factory=dict)
    draws: list[tuple[int, int, int]] = field(default_factory=list)
    """(seat, tile id, tiles left) of every draw from the pile (stock), in order."""
    precommitment: str = ""
    precommitment_event_id: str = ""
    contributions: list[tuple[int, str, str]] = field(default_factory=list)
    """(seat, contribution, event id), in stream order."""
    deal_event_id: str = ""
    seat_client_seeds: list[str] = field(default_factory=list)
    cards_left: dict[int, list[int]] = field(default_factory=dict)
    """Hand: each seat's cards when the deal ended (``deal_ended``)."""
    moves: list[tuple[int, str, list[int], str]] = field(default_factory=list)
    """(seat, kind, tile ids, event id) of every public move, in stream order (the
    ``SeatMove`` kinds: draw, take, discard, meld, release, show, undo)."""
    record_version: int = 0
    """3 when the deal named its seats (the four lists below); 0 when it did not."""
    bot_seats: list[int] = field(default_factory=list)
    declared_seats: list[int] = field(default_factory=list)
    awaited_seats: list[int] = field(default_factory=list)
    autoplay_seats: list[int] = field(default_factory=list)
    awaited_until_ms: int = 0
    """The contribution deadline the deal waited until (0: it did not wait)."""
    ended: bool = False
    end_event_id: str = ""
    """The stream id of the event that ended it (its time is the round's end)."""

    def seat_of(self, player_id: str) -> int:
        """The player's seat in this round, -1 when he did not sit in it."""
        return self.players.index(player_id) if player_id in self.players else -1


RECORD_VERSION = 3
"""The record format whose deals name their seats (docs/fairness.md, "Record versions")."""
SEAT_MARKS = ("bot_seats", "declared_seats", "awaited_seats", "autoplay_seats")


@dataclass(slots=True)
class _Before:
    """What the stream said of a deal before it was dealt: its commitment, contributions."""

    precommitment: str = ""
    precommitment_event_id: str = ""
    contributions: list[tuple[str, int, str, str]] = field(default_factory=list)
    """(player, seat then, contribution, event id): a player may leave a waiting table after
    contributing, and the seats after his move up."""


def fold_round(
    table_id: str,
    round_no: int,
    events: Iterable[StoredEvent],
    *,
    table_players: list[str],
    sit_down_seeds: Mapping[str, Any],
) -> RoundRecord | None:
    """The record of ``round_no`` from the table's stream entries in stream order (None when
    the round never started in them). ``table_players`` are the table's players in seat
    order (for a game whose deal events do not name them: Hand); ``sit_down_seeds`` the
    table state's ``client_seeds`` (player -> seed)."""
    record: RoundRecord | None = None
    before = _Before()
    for stored in events:
        event = stored.event
        if event.type in (SEED_COMMITTED, CONTRIBUTION_ACCEPTED):
            # Sent between deals (their round is the one before): the deal is in the data.
            if int(event.data.get("deal") or 0) == round_no:
                _before_deal(before, stored)
            continue
        if event.round != round_no:
            continue
        starts = STARTS.get(event.type)
        if starts is not None:
            record = starts.start(table_id, round_no, table_players, event)
        elif record is not None:
            FOLDS[record.game].observe(record, event, stored.id)
        if starts is not None and record is not None:
            _seat_marks(record, event.data)
            record.deal_event_id = stored.id
            record.precommitment = before.precommitment
            record.precommitment_event_id = before.precommitment_event_id
            record.contributions = _seated(record.players, before.contributions)
        if record is not None and record.ended and not record.end_event_id:
            record.end_event_id = stored.id
    if record is not None:
        record.seat_client_seeds = [str(sit_down_seeds.get(p) or "") for p in record.players]
    return record


def _hand_size(data: Mapping[str, Any], starter: int) -> int:
    sizes = [int(s) for s in data.get("hand_sizes") or []]
    others = [s for seat, s in enumerate(sizes) if seat != starter]
    return others[0] if others else 14


def _before_deal(before: _Before, stored: StoredEvent) -> None:
    event = stored.event
    if event.type == SEED_COMMITTED:
        before.precommitment = str(event.data.get("commitment") or "")
        before.precommitment_event_id = stored.id
    elif event.type == CONTRIBUTION_ACCEPTED:
        player = str(event.data.get("player_id") or "")
        text = str(event.data.get("contribution") or "")
        before.contributions.append((player, event.seat, text, stored.id))


def _seat_marks(record: RoundRecord, data: Mapping[str, Any]) -> None:
    """What the deal's start event says of its seats (absent before record version 3)."""
    if not all(key in data for key in SEAT_MARKS):
        return
    record.record_version = RECORD_VERSION
    record.bot_seats = sorted(int(s) for s in data["bot_seats"])
    record.declared_seats = sorted(int(s) for s in data["declared_seats"])
    record.awaited_seats = sorted(int(s) for s in data["awaited_seats"])
    record.autoplay_seats = sorted(int(s) for s in data["autoplay_seats"])
    record.awaited_until_ms = int(data.get("awaited_until_ms") or 0)


def _seated(
    players: list[str], given: list[tuple[str, int, str, str]]
) -> list[tuple[int, str, str]]:
    """The contributions of the players who sat in the deal, at their seats in it."""
    out = []
    for player, seat, text, event_id in given:
        if not player:  # an event written before contributions named their player
            out.append((seat, text, event_id))
        elif player in players:
            out.append((players.index(player), text, event_id))
    return out


def _started(table_id: str, round_no: int, _players: list[str], event: TableEvent) -> RoundRecord:
    """A Kishpa round's record; its players are in its start event."""
    data = event.data
    players = [str(p) for p in data.get("players") or []]
    starter = int(data.get("starter") or 0)
    kishpa_id = data.get("kishpa_id")
    return RoundRecord(
        table_id=table_id,
        round_no=round_no,
        players=players,
        starter=starter,
        commitment=str(data.get("commitment") or ""),
        kishpa=str(data.get("kishpa") or ""),
        kishpa_id=None if kishpa_id is None else int(kishpa_id),
        dolls_returned=[int(t) for t in data.get("dolls_returned_ids") or []],
        hand_size=_hand_size(data, starter),
        game=KISHPA.name,
    )


def _observe(record: RoundRecord, event: TableEvent, event_id: str = "") -> None:
    """Fold one Kishpa event of the round into the record (``round_ended`` ends it)."""
    private = event.private_data or {}
    owner = event.private_seat
    if event.type == "dealt" and owner is not None and owner >= 0:
        record.hands[owner] = [int(t["id"]) for t in private.get("hand", [])]
    elif event.type == "drew" and event.data.get("source") == "pile":
        left = int(event.data["pile"])
        if "tile_id" in private and owner is not None:
            record.draws.append((owner, int(private["tile_id"]), left))
            record.moves.append((owner, "draw", [int(private["tile_id"])], event_id))
    elif event.type == "drew" and event.data.get("tile_id") is not None:
        record.moves.append((event.seat, "take", [int(event.data["tile_id"])], event_id))
    elif event.type == "discarded":
        record.moves.append((event.seat, "discard", [int(event.data["tile_id"])], event_id))
    elif event.type == "won":
        record.moves.append((event.seat, "discard", [int(event.data["discard_id"])], event_id))
        shown = [int(t) for group in event.data.get("group_ids") or [] for t in group]
        record.moves.append((event.seat, "show", shown, event_id))
    elif event.type == "kishpa_replaced":
        record.replacement_kishpa = str(event.data.get("kishpa") or "")
        replacement = event.data.get("kishpa_id")
        record.replacement_id = None if replacement is None else int(replacement)
        record.dolls_returned += [int(t) for t in event.data.get("dolls_returned_ids") or []]
    elif event.type == KISHPA.round_end_event:
        record.server_seed = str(event.data.get("server_seed") or "")
        record.client_seeds = list(event.data.get("client_seeds") or [])
        record.ended = True


def _deal_started(
    table_id: str, round_no: int, players: list[str], event: TableEvent
) -> RoundRecord:
    """A Hand deal's record; its players are the table's (Hand seats never change)."""
    data = event.data
    starter = int(data.get("starter") or 0)
    top = data.get("top_discard")
    return RoundRecord(
        table_id=table_id,
        round_no=round_no,
        players=list(players),
        starter=starter,
        commitment=str(data.get("commitment") or ""),
        hand_size=_hand_size(data, starter),
        game=HAND.name,
        top_discard=None if top is None else int(top),
    )


def _observe_hand(record: RoundRecord, event: TableEvent, event_id: str = "") -> None:
    """Fold one Hand event into the record (``seed_revealed`` ends it).

    A draw from the stock is public (``drew_from_stock``: the cards left) followed by the
    drawer's private ``card_drawn`` (the card).
    """
    inner = event.private_data or {}
    seat = event.private_seat
    if event.type == "private" and seat is not None and seat >= 0:
        data = inner.get("data") or {}
        if inner.get("type") == "dealt":
            record.hands[seat] = [int(c) for c in data.get("cards", [])]
        elif inner.get("type") == "card_drawn":
            pending = [i for i, d in enumerate(record.draws) if d[0] == seat and d[1] < 0]
            if pending:
                at = pending[-1]
                record.draws[at] = (seat, int(data["card"]), record.draws[at][2])
                record.moves.append((seat, "draw", [int(data["card"])], event_id))
    elif event.type == "drew_from_stock" and event.seat >= 0:
        record.draws.append((event.seat, -1, int(event.data["stock_size"])))
    elif event.type == HAND.round_end_event:
        record.server_seed = str(event.data.get("server_seed") or "")
        record.client_seeds = list(event.data.get("client_seeds") or [])
        record.ended = True
    elif event.type == "deal_ended":
        hands = event.data.get("hands") or []
        record.cards_left = {s: [int(c) for c in cards] for s, cards in enumerate(hands)}
    else:
        _hand_move(record, event, event_id)


def _hand_move(record: RoundRecord, event: TableEvent, event_id: str) -> None:
    """A Hand move that took cards into a hand or out of it (public events)."""
    data, seat = event.data, event.seat
    moves: list[tuple[str, list[int]]] = []
    if event.type == "drew_from_discard":
        moves = [("take", [int(data["card"])])]
    elif event.type == "discarded":
        moves = [("discard", [int(data["card"])])]
    elif event.type == "melds_laid":
        moves = [("meld", [int(c) for m in data.get("melds") or [] for c in m["cards"]])]
    elif event.type == "laid_off":
        moves = [("meld", [int(data["card"])])]
    elif event.type == "joker_released":
        moves = [
            ("meld", [int(c) for c in data.get("cards") or []]),
            ("release", [int(j) for j in data.get("jokers") or []]),
        ]
    elif event.type == "turn_undone":
        moves = [("undo", [])]
    for kind, cards in moves:
        record.moves.append((seat, kind, cards, event_id))


@dataclass(frozen=True, slots=True)
class GameFold:
    """How one game's stream entries fold into a round's record."""

    game: GameSpec
    start: Callable[[str, int, list[str], TableEvent], RoundRecord]
    """``(table id, round, the table's players, the start event) -> the new record``."""
    observe: Callable[[RoundRecord, TableEvent, str], None]
    """Fold one later event of the round (with its stream id) into the record."""


FOLDS: Mapping[str, GameFold] = {
    f.game.name: f
    for f in (
        GameFold(KISHPA, _started, _observe),
        GameFold(HAND, _deal_started, _observe_hand),
    )
}
"""Each game's fold, by game name (a unit test checks every registered game has one)."""
STARTS: Mapping[str, GameFold] = {f.game.round_start_event: f for f in FOLDS.values()}
"""The fold a round starts with, by the game's round start event."""
