"""An ended round's record as one player may know it, rebuilt from the table's event stream.

``GetRoundRecord`` serves what the server published during the round (the commitment, the
turned kishpa, the revealed seed and client seeds) together with the caller's own private
facts (his dealt tiles and the tiles he drew from the pile), so the caller can recompute
the deal (docs/fairness.md) long after the round. A Hand deal (``deal_started`` ...
``seed_revealed``) gives the same: the caller's dealt cards, the turned card, his draws from
the stock and the revealed seeds. The record is read back from the same
stream the players watched, so it says exactly what they were told; nothing of another
seat's hand is ever in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from games.contributions import CONTRIBUTION_ACCEPTED, SEED_COMMITTED
from services.common.errors import FailedPrecondition, NotFound, PermissionDenied
from services.table.store import TableStore
from shared.stream import StoredEvent, TableEvent

READ_PAGE = 500


@dataclass(slots=True)
class RoundRecord:
    """The public facts of one ended round plus one seat's own dealt tiles and draws.

    Once the seed is revealed nothing of the deal is secret any more (anyone can recompute
    it), so the record also carries every seat's dealt tiles and every draw from the pile,
    read from the table's own stream: what the server actually dealt, for a whole-table
    check (docs/fairness.md).
    """

    table_id: str
    round_no: int
    players: list[str]
    starter: int
    my_seat: int
    commitment: str = ""
    server_seed: str = ""
    client_seeds: list[str | None] = field(default_factory=list)
    kishpa: str = ""
    kishpa_id: int | None = None
    replacement_kishpa: str = ""
    replacement_id: int | None = None
    dolls_returned: list[int] = field(default_factory=list)
    dealt: list[int] = field(default_factory=list)
    pile_draws: list[tuple[int, int]] = field(default_factory=list)
    hand_size: int = 14
    game: str = "kishpa"
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


async def round_record(
    store: TableStore, table_id: str, round_no: int, player_id: str
) -> RoundRecord:
    """The record of ``round_no`` for ``player_id``; refused unless he sat in that round."""
    if round_no < 1:
        raise NotFound("ROUND_NOT_FOUND", "rounds are numbered from 1")
    record: RoundRecord | None = None
    before = _Before()
    ended = False
    cursor = "0-0"
    while not ended:
        page = await store.read_events(table_id, cursor, count=READ_PAGE)
        if not page:
            break
        cursor = page[-1].id
        for stored in page:
            event = stored.event
            if event.type in (SEED_COMMITTED, CONTRIBUTION_ACCEPTED):
                # Sent between deals (their round is the one before): the deal is in the data.
                if int(event.data.get("deal") or 0) == round_no:
                    _before_deal(before, stored)
                continue
            if event.round != round_no:
                continue
            if event.type == "round_started":
                record = _started(table_id, round_no, player_id, event)
            elif event.type == "deal_started":
                record = await _deal_started(store, table_id, round_no, player_id, event)
            elif record is not None and record.game == "hand":
                ended = _observe_hand(record, event, stored.id) or ended
            elif record is not None:
                ended = _observe(record, event, stored.id) or ended
            if event.type in ("round_started", "deal_started") and record is not None:
                _seat_marks(record, event.data)
                record.deal_event_id = stored.id
                record.precommitment = before.precommitment
                record.precommitment_event_id = before.precommitment_event_id
                record.contributions = _seated(record.players, before.contributions)
    if record is None:
        if await store.load(table_id) is None:
            raise NotFound("TABLE_NOT_FOUND", f"no table {table_id!r} (or it expired)")
        raise NotFound("ROUND_NOT_FOUND", f"table {table_id} has no round {round_no}")
    if record.my_seat < 0:
        raise PermissionDenied("NOT_SEATED", f"you did not play round {round_no} of this table")
    if not ended:
        raise FailedPrecondition(
            "ROUND_NOT_ENDED", f"round {round_no} has not ended: its seed is still secret"
        )
    snapshot = await store.load(table_id)
    sit_down = {} if snapshot is None else dict(snapshot.state.get("client_seeds") or {})
    record.seat_client_seeds = [str(sit_down.get(p) or "") for p in record.players]
    return record


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


def _started(table_id: str, round_no: int, player_id: str, event: TableEvent) -> RoundRecord:
    data = event.data
    players = [str(p) for p in data.get("players") or []]
    starter = int(data.get("starter") or 0)
    kishpa_id = data.get("kishpa_id")
    return RoundRecord(
        table_id=table_id,
        round_no=round_no,
        players=players,
        starter=starter,
        my_seat=players.index(player_id) if player_id in players else -1,
        commitment=str(data.get("commitment") or ""),
        kishpa=str(data.get("kishpa") or ""),
        kishpa_id=None if kishpa_id is None else int(kishpa_id),
        dolls_returned=[int(t) for t in data.get("dolls_returned_ids") or []],
        hand_size=_hand_size(data, starter),
    )


def _observe(record: RoundRecord, event: TableEvent, event_id: str = "") -> bool:
    """Fold one event of the round into the record; True at ``round_ended``."""
    mine = record.my_seat >= 0 and event.private_seat == record.my_seat
    private = event.private_data or {}
    owner = event.private_seat
    if event.type == "dealt" and owner is not None and owner >= 0:
        tiles = [int(t["id"]) for t in private.get("hand", [])]
        record.hands[owner] = tiles
        if mine:
            record.dealt = tiles
    elif event.type == "drew" and event.data.get("source") == "pile":
        left = int(event.data["pile"])
        if "tile_id" in private and owner is not None:
            record.draws.append((owner, int(private["tile_id"]), left))
            record.moves.append((owner, "draw", [int(private["tile_id"])], event_id))
        if mine:
            record.pile_draws.append((int(private["tile_id"]), left))
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
    elif event.type == "round_ended":
        record.server_seed = str(event.data.get("server_seed") or "")
        record.client_seeds = list(event.data.get("client_seeds") or [])
        return True
    return False


async def _deal_started(
    store: TableStore, table_id: str, round_no: int, player_id: str, event: TableEvent
) -> RoundRecord:
    """A Hand deal's record; its players are the table's (Hand seats never change)."""
    table = await store.load(table_id)
    players = [] if table is None else [str(p) for p in table.state.get("players") or []]
    data = event.data
    starter = int(data.get("starter") or 0)
    top = data.get("top_discard")
    return RoundRecord(
        table_id=table_id,
        round_no=round_no,
        players=players,
        starter=starter,
        my_seat=players.index(player_id) if player_id in players else -1,
        commitment=str(data.get("commitment") or ""),
        hand_size=_hand_size(data, starter),
        game="hand",
        top_discard=None if top is None else int(top),
    )


def _observe_hand(record: RoundRecord, event: TableEvent, event_id: str = "") -> bool:
    """Fold one Hand event into the record; True at ``seed_revealed``.

    A draw from the stock is public (``drew_from_stock``: the cards left) followed by the
    drawer's private ``card_drawn`` (the card).
    """
    inner = event.private_data or {}
    seat = event.private_seat
    if event.type == "private" and seat is not None and seat >= 0:
        data = inner.get("data") or {}
        if inner.get("type") == "dealt":
            cards = [int(c) for c in data.get("cards", [])]
            record.hands[seat] = cards
            if seat == record.my_seat:
                record.dealt = cards
        elif inner.get("type") == "card_drawn":
            pending = [i for i, d in enumerate(record.draws) if d[0] == seat and d[1] < 0]
            if pending:
                at = pending[-1]
                record.draws[at] = (seat, int(data["card"]), record.draws[at][2])
                record.moves.append((seat, "draw", [int(data["card"])], event_id))
                if seat == record.my_seat and record.pile_draws:
                    left = record.pile_draws[-1][1]
                    record.pile_draws[-1] = (int(data["card"]), left)
    elif event.type == "drew_from_stock" and event.seat >= 0:
        record.draws.append((event.seat, -1, int(event.data["stock_size"])))
        if event.seat == record.my_seat >= 0:
            record.pile_draws.append((-1, int(event.data["stock_size"])))
    elif event.type == "seed_revealed":
        record.server_seed = str(event.data.get("server_seed") or "")
        record.client_seeds = list(event.data.get("client_seeds") or [])
        return True
    elif event.type == "deal_ended":
        hands = event.data.get("hands") or []
        record.cards_left = {s: [int(c) for c in cards] for s, cards in enumerate(hands)}
    else:
        _hand_move(record, event, event_id)
    return False


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
