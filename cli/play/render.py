"""How ``kishpa play`` shows a table: the rack grouped into runs and sets (the solver's best
arrangement), jokers and dolls marked, tiles in their colours, seats, bowl, turn and timer."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from games.kishpa.solver import best_arrangement
from games.kishpa.tiles import Face, parse_face, sort_key
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from sdk import events
from sdk.views import my_seat, turn_seat

TILE_STYLES = {"R": "bold red", "B": "bold blue", "Y": "bold yellow", "K": "bold white"}
JOKER_MARK = "★"
DOLL_MARK = "◆"


@dataclass(frozen=True, slots=True)
class RackTile:
    """A tile of the rack as shown: its number in the display (what commands use), id, face."""

    number: int
    tile_id: int
    face: str


@dataclass(frozen=True, slots=True)
class Rack:
    """The rack in display order: groups (runs and sets), then the loose tiles."""

    groups: list[list[RackTile]]
    loose: list[RackTile]

    @property
    def tiles(self) -> list[RackTile]:
        """Every tile, in display order (``number`` is the position, from 1)."""
        return [t for g in self.groups for t in g] + self.loose

    def find(self, token: str) -> RackTile | None:
        """The tile a person named: its number in the display, or its face (``R7``)."""
        tiles = self.tiles
        if token.isdigit():
            n = int(token)
            return tiles[n - 1] if 1 <= n <= len(tiles) else None
        face = token.upper()
        # The loose copy first: discarding it breaks no group.
        for tile in reversed(tiles):
            if tile.face == face:
                return tile
        return None


def joker_face(view: table_pb2.TableView) -> str:
    """The round's joker face (``R6``), or ``""`` before the first round."""
    return view.round.kishpa.joker_face if view.HasField("round") else ""


def arrange(tiles: Sequence[common_pb2.Tile], joker: str) -> Rack:
    """The rack grouped by the solver's best arrangement; loose tiles sorted."""
    faces: list[Face] = [parse_face(t.face) for t in tiles]
    groups: list[list[int]] = []
    if joker and faces:
        groups = [list(g.positions) for g in best_arrangement(faces, parse_face(joker))]
    grouped = {p for g in groups for p in g}
    loose = sorted(
        (p for p in range(len(tiles)) if p not in grouped), key=lambda p: sort_key(faces[p])
    )
    order = [*[p for g in groups for p in g], *loose]
    numbers = {p: i + 1 for i, p in enumerate(order)}

    def shown(p: int) -> RackTile:
        return RackTile(numbers[p], tiles[p].id, tiles[p].face)

    return Rack([[shown(p) for p in g] for g in groups], [shown(p) for p in loose])


def tile_text(face: str, joker: str, number: int | None = None) -> Text:
    """One tile, coloured, a joker starred and a doll diamond-marked (with what it plays as)."""
    text = Text()
    if number is not None:
        text.append(f"{number}:", style="dim")
    if face in ("DR", "DK"):
        text.append(f"{DOLL_MARK}{face}", style="bold magenta")
        if joker:
            text.append(f"={joker}", style="magenta")
        return text
    style = TILE_STYLES.get(face[:1], "")
    if face == joker:
        text.append(f"{face}{JOKER_MARK}", style=f"{style} reverse")
    else:
        text.append(face, style=style)
    return text


def rack_text(rack: Rack, joker: str) -> Text:
    """The rack on one line: ``[1:R3 2:R4 3:R5]  [4:K7 5:B7 6:Y7]  loose 7:B2 8:DR=R6``."""
    text = Text()
    for group in rack.groups:
        text.append("[", style="green")
        for i, tile in enumerate(group):
            if i:
                text.append(" ")
            text.append_text(tile_text(tile.face, joker, tile.number))
        text.append("]  ", style="green")
    if rack.loose:
        text.append("loose ", style="dim")
        for i, tile in enumerate(rack.loose):
            if i:
                text.append(" ")
            text.append_text(tile_text(tile.face, joker, tile.number))
    return text


def seconds_left(view: table_pb2.TableView, now: float | None = None) -> int | None:
    """Whole seconds until the turn or window times out, if there is a deadline."""
    if not view.HasField("round") or not view.round.HasField("deadline"):
        return None
    deadline = view.round.deadline.seconds + view.round.deadline.nanos / 1e9
    return max(0, int(deadline - (time.time() if now is None else now)))


def seat_name(view: table_pb2.TableView, seat: int | None, names: Mapping[str, str]) -> str:
    """How a seat is called: "You", a known name, the table's name for it, or "Seat N"."""
    if seat is None or seat < 0 or seat >= len(view.seats):
        return "the table"
    info = view.seats[seat]
    if seat == my_seat(view):
        return "You"
    return names.get(info.player_id) or info.display_name or f"Seat {seat + 1}"


def board(view: table_pb2.TableView, names: Mapping[str, str]) -> RenderableType:
    """The whole table as the player sees it."""
    joker = joker_face(view)
    parts: list[RenderableType] = []
    r = view.round if view.HasField("round") else None
    if r is not None and r.round:
        facts = Text()
        facts.append("Kishpa ")
        facts.append_text(tile_text(r.kishpa.kishpa.face, ""))
        facts.append("   Joker ")
        facts.append_text(tile_text(joker, joker))
        facts.append(f"   Bowl {view.bowl}   Pile {r.pile_count}")
        if view.settings.stake > 1:
            facts.append(f"   Stake {view.settings.stake}")
        if view.last_round_pressed:
            facts.append("   LAST ROUND", style="bold yellow")
        parts.append(facts)
        top = Text("Top discard ")
        if r.discards:
            top.append_text(tile_text(r.discards[-1].face, joker))
            earlier = [d.face for d in r.discards[-6:-1]]
            if earlier:
                top.append(f"   (before: {' '.join(earlier)})", style="dim")
        else:
            top.append("none", style="dim")
        parts.append(top)
    seats = Table.grid(padding=(0, 2))
    for info in view.seats:
        turn = r is not None and turn_seat(view) == info.seat
        marker = "▶" if turn else " "
        name = seat_name(view, info.seat, names) if info.player_id else "(free)"
        seats.add_row(
            Text(marker, style="bold green"),
            Text(name, style="bold" if info.seat == my_seat(view) else ""),
            f"{info.tile_count} tiles" if info.player_id and r is not None else "",
            # Balances reach the table with the first settlement; before that, nothing to show.
            f"{info.balance:,} tokens" if info.player_id and info.balance else "",
            f"won {info.rounds_won}" if info.player_id else "",
        )
    parts.append(seats)
    if r is not None and r.round and my_seat(view) is not None:
        rack = arrange(r.my_rack.tiles, joker)
        parts.append(Text("Your rack  ").append_text(rack_text(rack, joker)))
        left = seconds_left(view)
        clock = f" · {left}s left" if left is not None else ""
        if turn_seat(view) is not None:
            who = seat_name(view, r.turn_seat, names)
            parts.append(Text(f"Turn: {who}{clock}", style="cyan"))
        elif r.phase in (table_pb2.ROUND_PHASE_START_REVEAL, table_pb2.ROUND_PHASE_END_REVEAL):
            parts.append(
                Text(f"Reveal window open: the kishpa's holder may reveal{clock}", style="magenta")
            )
        elif (
            r.phase == table_pb2.ROUND_PHASE_ENDED and view.status == table_pb2.TABLE_STATUS_PLAYING
        ):
            parts.append(
                Text("Round over: the next one is dealt once everyone is ready", style="cyan")
            )
    title = f"Round {r.round}" if r is not None and r.round else "Waiting for players"
    return Panel(RichGroup(*parts), title=title, title_align="left", expand=False)


REASON_WORDS = {
    "bowl_contribution": "into the bowl",
    "bonus_doll": "doll bonus",
    "bonus_joker": "joker bonus",
    "bonus_one": "bonus for a 1 of the kishpa's colour",
    "bonus_kishpa": "kishpa bonus",
    "win": "win",
    "bowl_win": "took the bowl",
    "bowl_split": "bowl split",
    "bank_load": "bank load (50 tokens to cover a payment)",
    "pot_buy_in": "buy-in",
    "pot_payout": "pot payout",
}
PHASE_TITLES = {
    table_pb2.SETTLEMENT_PHASE_START: "start of round {round}",
    table_pb2.SETTLEMENT_PHASE_END: "end of round {round}",
    table_pb2.SETTLEMENT_PHASE_BUY_IN: "buy-in",
    table_pb2.SETTLEMENT_PHASE_PAYOUT: "the pot",
}


def payments_text(event: table_pb2.TableEvent, names: Mapping[str, str]) -> Text | None:
    """A ``settled`` event as "who paid whom and why" lines (None when nothing moved)."""
    paid = events.payments(event.settled, dict(names))
    if not paid:
        return None
    title = PHASE_TITLES.get(event.settled.phase, "settlement").format(round=event.round)
    out = Text(f"Payments, {title}:", style="bold")
    for p in paid:
        why = REASON_WORDS.get(p.reason, p.reason.replace("_", " "))
        out.append(f"\n  {p.payer} → {p.payee}  {p.amount}  ({why})")
    return out


def bowl_text(bowl: table_pb2.BowlResolved, names: Mapping[str, str]) -> str:
    """What happened to the bowl after a round."""
    winner = names.get(bowl.winner_player_id, bowl.winner_player_id)
    if bowl.outcome == table_pb2.BOWL_OUTCOME_TAKEN:
        return f"{winner} won twice in a row and takes the bowl ({bowl.amount} tokens)."
    if bowl.outcome == table_pb2.BOWL_OUTCOME_SPLIT:
        return f"Last round: the bowl ({bowl.amount} tokens) is split."
    return f"Bowl: {bowl.bowl} tokens."
