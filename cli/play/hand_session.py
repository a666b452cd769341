"""``kishpa play --game hand``: a Hand (Rummy 51) table from the keyboard.

The same loop as :class:`cli.play.session.PlaySession` (line reader, event stream); only the
board, the commands and the narration are Hand's: draw or take, lay melds, lay off, release
jokers, undo a turn begun from the discards, discard.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import grpc
from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cli.play.render import seat_name, seconds_left
from cli.play.session import PlaySession
from games.fair import SERVER_SEED_BYTES, FairStream
from games.hand import actions as ha
from games.hand.bot import MAX_ACTIONS_PER_TURN, next_action
from games.hand.cards import is_joker, sort_key
from games.hand.ruleset import DEFAULT_RULES
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from sdk import KishpaError, events
from sdk.views import my_seat, my_turn, turn_seat
from services.table.hand_botclient import BOT_TAG, bot_view

SUIT_STYLES = {"S": "bold white", "H": "bold red", "D": "bold magenta", "C": "bold green"}

HAND_COMMANDS: tuple[tuple[str, str], ...] = (
    ("draw  (d)", "draw a card from the stock"),
    ("take  (t)", "take the top discard (use it in a meld or lay-off this turn)"),
    ("meld N N N [/ N N N ...]  (m)", "lay melds (card numbers or faces; a run low to high)"),
    ("layoff M N [low|high]  (l)", "add card N to meld #M on the table"),
    ("release M N [N]  (j)", "put your card(s) in place of meld #M's joker and take it"),
    ("undo  (u)", "take back a turn begun from the discards"),
    ("discard N|FACE  (x)", "discard a card, ending your turn"),
    ("hint", "melds you could lay now"),
    ("auto  (a)", "let the bot play the rest of this turn for you"),
    ("start", "start the game now with the players seated (creator only)"),
    ("Enter", "show the table again"),
    ("help  (?)", "this list"),
    ("quit  (q)", "leave (your seat is played for you until the game ends)"),
)

HAND_FRIENDLY = {
    "NOT_YOUR_TURN": "It is not your turn.",
    "MUST_DRAW_FIRST": "Draw a card first (draw, or take the top discard).",
    "ALREADY_DREW": "You already drew this turn.",
    "NOT_OPENED": "Open first: lay melds worth 51 or more.",
    "OPENING_BELOW_51": "An opening needs 51 points of melds.",
    "DISCARD_NOT_USED": "Use the card you took from the discards first (or undo).",
    "MUST_KEEP_DISCARD": "Keep a card to discard.",
}


def card_text(face: str) -> Text:
    """A card in its suit's colour; jokers starred."""
    if face in ("J1", "J2"):
        return Text("★" + face, style="bold yellow")
    return Text(face, style=SUIT_STYLES.get(face[-1:], ""))


def rack_order(tiles: Sequence[common_pb2.Tile]) -> list[common_pb2.Tile]:
    """The rack as shown (by suit, then rank; jokers last); numbers are positions from 1."""
    return sorted(tiles, key=lambda t: (is_joker(t.id), sort_key(t.id)))


class HandPlaySession(PlaySession):
    """One player at one Hand table, from the keyboard."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hand_stream = FairStream(os.urandom(SERVER_SEED_BYTES), (), BOT_TAG)

    # ---- the board ---------------------------------------------------------------------

    def rack(self) -> list[common_pb2.Tile]:
        return rack_order(self.view.round.my_rack.tiles)

    def show_board(self) -> None:
        """Draw the table: deal, pot, stock, discards, melds, seats, the rack."""
        self.console.print(self.board())

    def board(self) -> RenderableType:
        view = self.view
        parts: list[RenderableType] = []
        r = view.round if view.HasField("round") else None
        if r is not None and r.round:
            h = r.hand
            parts.append(
                Text(f"Deal {r.round} of {h.deals_per_game}   Pot {h.pot}   Stock {r.pile_count}")
            )
            top = Text("Top discard ")
            if r.discards:
                top.append_text(card_text(r.discards[-1].face))
            else:
                top.append("none", style="dim")
            parts.append(top)
            for meld in h.melds:
                line = Text(f"#{meld.meld_id} ")
                for card in meld.cards:
                    line.append_text(card_text(card.face)).append(" ")
                line.append(f"({seat_name(view, meld.seat, self.names)})", style="dim")
                parts.append(line)
        seats = Table.grid(padding=(0, 2))
        opened = set(r.hand.opened_seats) if r is not None else set()
        for info in view.seats:
            turn = r is not None and turn_seat(view) == info.seat
            seats.add_row(
                Text("▶" if turn else " ", style="bold green"),
                Text(
                    seat_name(view, info.seat, self.names) if info.player_id else "(free)",
                    style="bold" if info.seat == my_seat(view) else "",
                ),
                f"{info.tile_count} cards" if info.player_id and r is not None else "",
                "opened" if info.seat in opened else "",
                f"{info.score} points" if info.player_id and r is not None else "",
                f"{info.balance:,} tokens" if info.player_id else "",
            )
        parts.append(seats)
        if r is not None and r.round and my_seat(view) is not None:
            rack = Text("Your cards  ")
            for number, tile in enumerate(self.rack(), start=1):
                rack.append(f"{number}:", style="dim").append_text(card_text(tile.face))
                rack.append(" ")
            parts.append(rack)
            if turn_seat(view) is not None:
                left = seconds_left(view)
                clock = f" · {left}s left" if left is not None else ""
                who = seat_name(view, r.turn_seat, self.names)
                parts.append(Text(f"Turn: {who}{clock}", style="cyan"))
        title = f"Hand · deal {r.round}" if r is not None and r.round else "Waiting for players"
        return Panel(RichGroup(*parts), title=title, title_align="left", expand=False)

    def tell_what_to_do(self) -> None:
        """One line saying what the player can do now (or nothing when he waits)."""
        view = self.view
        if not view.HasField("round") or my_seat(view) is None:
            if view.status == table_pb2.TABLE_STATUS_WAITING:
                self.console.print("Waiting for players to join…", style="dim")
            return
        r = view.round
        if not my_turn(view) or r.phase != table_pb2.ROUND_PHASE_TURNS:
            return
        if not r.turn_drew:
            self.console.print(
                "Your turn — draw a card (draw) or take the top discard (take)",
                style="bold green",
            )
        elif r.hand.HasField("must_use"):
            self.console.print(
                f"Use {r.hand.must_use.face} in a meld or lay-off (meld / layoff), or undo",
                style="green",
            )
        else:
            self.console.print(
                "Meld, lay off or release a joker, then discard a card (discard N)", style="green"
            )

    def show_help(self) -> None:
        """The list of commands."""
        table = Table(show_header=False, box=None, padding=(0, 2))
        for command, what in HAND_COMMANDS:
            table.add_row(Text(command, style="bold"), what)
        self.console.print(table)

    # ---- commands ----------------------------------------------------------------------

    def card(self, token: str) -> common_pb2.Tile | None:
        """The card a person named: its number in the rack, or its face (``10H``)."""
        rack = self.rack()
        if token.isdigit():
            n = int(token)
            return rack[n - 1] if 1 <= n <= len(rack) else None
        face = token.upper()
        return next((t for t in rack if t.face == face), None)

    def cards(self, tokens: Sequence[str]) -> list[int] | None:
        ids: list[int] = []
        for token in tokens:
            tile = self.card(token)
            if tile is None or tile.id in ids:
                self.console.print(f"You have no card {token!r}.", style="red")
                return None
            ids.append(tile.id)
        return ids

    async def _dispatch(self, verb: str, arg: str) -> None:
        tid = self.table_id
        words = arg.replace(",", " / ").split()
        if verb in ("d", "draw", "t", "take"):
            drawn = await self.client.draw(tid, from_discards=verb in ("t", "take"))
            self.view = drawn.table
            what = "took" if verb in ("t", "take") else "drew"
            self.console.print(Text(f"You {what} ").append_text(card_text(drawn.tile.face)))
            self.show_board()
            self.tell_what_to_do()
        elif verb in ("m", "meld"):
            groups: list[list[str]] = [[]]
            for word in words:
                if word == "/":
                    groups.append([])
                else:
                    groups[-1].append(word)
            melds = [self.cards(g) for g in groups if g]
            if not melds or any(m is None for m in melds):
                self.console.print("Which cards? e.g. meld 1 2 3 / 7 8 9", style="red")
                return
            self.view = await self.client.lay_melds(tid, [m for m in melds if m is not None])
            self.console.print("You laid your melds.")
            self.show_board()
            self.tell_what_to_do()
        elif verb in ("l", "layoff"):
            end = words[2].lower() if len(words) > 2 else ""
            ids = self.cards(words[1:2]) if len(words) >= 2 and words[0].isdigit() else None
            if ids is None or end not in ("", "low", "high"):
                self.console.print("Usage: layoff MELD CARD [low|high]", style="red")
                return
            self.view = await self.client.lay_off(tid, int(words[0]), ids[0], end=end)
            self.console.print(f"You laid off on meld #{words[0]}.")
            self.show_board()
            self.tell_what_to_do()
        elif verb in ("j", "release"):
            ids = self.cards(words[1:]) if len(words) >= 2 and words[0].isdigit() else None
            if not ids:
                self.console.print("Usage: release MELD CARD [CARD]", style="red")
                return
            self.view = await self.client.release_joker(tid, int(words[0]), ids)
            self.console.print("You took the joker.", style="yellow")
            self.show_board()
            self.tell_what_to_do()
        elif verb in ("u", "undo"):
            self.view = await self.client.undo_turn(tid)
            self.console.print("Turn taken back.")
            self.tell_what_to_do()
        elif verb in ("x", "discard"):
            tile = self.card(arg) if arg else None
            if tile is None:
                self.console.print(f"You have no card {arg!r}.", style="red")
                return
            self.view = await self.client.discard(tid, tile.id)
            self.console.print(Text("You discarded ").append_text(card_text(tile.face)))
        elif verb == "hint":
            hint = await self.client.hint(tid)
            text = Text("Melds you could lay: ")
            for group in hint.groups:
                text.append("[" + " ".join(t.face for t in group.tiles) + "] ")
            self.console.print(text if hint.groups else Text("No melds in your hand yet."))
        elif verb in ("a", "auto"):
            await self._auto_turn()
        elif verb == "":
            await self.refresh()
            self.show_board()
            self.tell_what_to_do()
        elif verb in ("help", "?"):
            self.show_help()
        elif verb == "start":
            self.view = await self.client.start_game(tid)
        else:
            self.console.print(f"Unknown command {verb!r}. Type help for the list.", style="red")

    async def _auto_turn(self) -> None:
        """The bot plays the rest of the player's turn."""
        for _ in range(MAX_ACTIONS_PER_TURN):
            await self.refresh()
            data = bot_view(self.view, DEFAULT_RULES)
            if data is None:
                self.console.print("Nothing to do right now.", style="dim")
                return
            move = next_action(data, DEFAULT_RULES, self.hand_stream)
            tid = self.table_id
            match move:
                case ha.DrawStock() | ha.DrawDiscard():
                    drawn = await self.client.draw(
                        tid, from_discards=isinstance(move, ha.DrawDiscard)
                    )
                    self.console.print(Text("Auto: drew ").append_text(card_text(drawn.tile.face)))
                case ha.LayMelds(melds=melds):
                    await self.client.lay_melds(tid, [m.cards for m in melds])
                    self.console.print("Auto: laid melds.")
                case ha.LayOff(meld_id=meld_id, card=card, end=end):
                    await self.client.lay_off(tid, meld_id, card, end=end or "")
                    self.console.print(f"Auto: laid off on meld #{meld_id}.")
                case ha.ReleaseJoker(meld_id=meld_id, cards=cards):
                    await self.client.release_joker(tid, meld_id, cards)
                    self.console.print(f"Auto: took the joker of meld #{meld_id}.")
                case ha.UndoTurn():
                    await self.client.undo_turn(tid)
                    self.console.print("Auto: took the turn back.")
                case ha.Discard(card=card):
                    face = next(t.face for t in self.view.round.my_rack.tiles if t.id == card)
                    self.view = await self.client.discard(tid, card)
                    self.console.print(Text("Auto: discarded ").append_text(card_text(face)))
                    return

    # ---- following the table -------------------------------------------------------------

    async def _narrate(self, event: table_pb2.TableEvent) -> None:
        seat = events.seat(event)
        who = self.name(seat)
        mine = seat is not None and seat == my_seat(self.view)
        kind = events.kind(event)
        attention = False
        if kind == "player_joined":
            await self.refresh()
            self.console.print(f"{who} sat down in seat {(seat or 0) + 1}.")
        elif kind == "game_started":
            started = event.game_started
            self.console.print(
                f"The game starts: {started.deals} deals, pot {started.pot} tokens.",
                style="bold cyan",
            )
        elif kind == "deal_started":
            await self.refresh()
            self.console.print(Text(f"Deal {event.round} starts.", style="bold cyan"))
            self.show_board()
            attention = True
        elif kind == "drew" and not mine:
            if event.drew.source == table_pb2.DRAW_SOURCE_DISCARD:
                self.console.print(
                    Text(f"{who} took ").append_text(card_text(event.drew.tile.face))
                )
            else:
                self.console.print(f"{who} drew from the stock.", style="dim")
        elif kind == "melds_laid" and not mine:
            laid = event.melds_laid
            opening = " (opening)" if laid.opening else ""
            melds = " ".join("[" + " ".join(c.face for c in m.cards) + "]" for m in laid.melds)
            self.console.print(f"{who} laid{opening} {melds}")
        elif kind == "laid_off" and not mine:
            off = event.laid_off
            self.console.print(
                Text(f"{who} laid off ")
                .append_text(card_text(off.card.face))
                .append(f" on meld #{off.meld_id}.")
            )
        elif kind == "joker_released" and not mine:
            self.console.print(f"{who} took a joker from meld #{event.joker_released.meld_id}.")
        elif kind == "discarded" and not mine:
            self.console.print(
                Text(f"{who} discarded ").append_text(card_text(event.discarded.tile.face))
            )
        elif kind == "turn_started" and mine:
            await self.refresh()
            self.show_board()
            attention = True
        elif kind == "turn_timed_out":
            self.console.print(
                f"{who} ran out of time; the server played the turn.", style="yellow"
            )
        elif kind == "went_out":
            hand = event.went_out.hand_win
            self.console.print(
                f"{who} went out{' with a hand!' if hand else '.'}", style="bold yellow"
            )
        elif kind == "deal_ended":
            ended = event.deal_ended
            if ended.reason == table_pb2.DEAL_END_REASON_STOCK_EXHAUSTED:
                self.console.print("The stock ran out: nobody wins this deal.", style="yellow")
            for left in ended.hands:
                if left.tiles and left.seat != my_seat(self.view):
                    cards = Text(f"  {self.name(left.seat)} held ")
                    for card in left.tiles:
                        cards.append_text(card_text(card.face)).append(" ")
                    self.console.print(cards)
        elif kind == "deal_scored":
            totals = event.deal_scored.totals
            scores = ", ".join(f"{self.name(s)} {t}" for s, t in enumerate(totals))
            self.console.print(f"Deal {event.round} scored · totals: {scores}", style="bold cyan")
        elif kind == "game_ended":
            payouts = event.game_ended.payouts
            paid = ", ".join(f"{self.name(s)} {p}" for s, p in enumerate(payouts) if p)
            self.console.print(f"The game is over · the pot pays {paid}.", style="bold yellow")
        elif kind == "settled":
            self.show_payments(event)
        elif kind == "table_closed":
            await self.refresh()
            self.show_board()
            self.console.print("The table has closed. Thanks for playing!", style="bold")
        if attention:
            self.tell_what_to_do()

    async def command(self, line: str) -> bool:
        """Run one typed command, with Hand's own words for the rules' refusals."""
        verb, _, rest = line.partition(" ")
        verb = verb.lower()
        if verb in ("q", "quit", "exit"):
            return False
        try:
            await self._dispatch(verb, rest.strip())
        except KishpaError as exc:
            text = HAND_FRIENDLY.get(exc.reason or "", exc.message)
            self.console.print(Text("✗ " + text, style="red"))
            if exc.code == grpc.StatusCode.UNAVAILABLE:
                self.console.print("The server cannot be reached; try again in a moment.")
        return True
