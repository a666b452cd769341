"""Hand's part of ``kishpa play --game hand``: its board, commands and events (see
:mod:`cli.play.session` for the loop every game shares): draw or take, lay melds, lay off,
release jokers, undo a turn begun from the discards, discard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cli.play.games import HAND, GameAdapter, hand_card
from cli.play.render import seat_name, seconds_left
from cli.play.session import PlaySession
from games.hand.cards import is_joker, sort_key
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from sdk import events
from sdk.views import my_seat, my_turn, turn_seat

COMMANDS: tuple[tuple[str, str], ...] = (
    ("draw  (d)", "draw a card from the stock"),
    ("take  (t)", "take the top discard (use it in a meld or lay-off this turn)"),
    ("meld N N N [/ N N N ...]  (m)", "lay melds (card numbers or faces; a run low to high)"),
    ("layoff M N [low|high]  (l)", "add card N to meld #M on the table"),
    ("release M N [N]  (j)", "put your card(s) in place of meld #M's joker and take it"),
    ("undo  (u)", "take back a turn begun from the discards"),
    ("discard N|FACE  (x)", "discard a card, ending your turn"),
    ("hint", "melds you could lay now"),
    ("auto  (a)", "let the bot play the rest of this turn for you"),
)

FRIENDLY = {
    "MUST_DRAW_FIRST": "Draw a card first (draw, or take the top discard).",
    "ALREADY_DREW": "You already drew this turn.",
    "NOT_OPENED": "Open first: lay melds worth 51 or more.",
    "OPENING_BELOW_51": "An opening needs 51 points of melds.",
    "DISCARD_NOT_USED": "Use the card you took from the discards first (or undo).",
    "MUST_KEEP_DISCARD": "Keep a card to discard.",
}


def rack_order(tiles: Sequence[common_pb2.Tile]) -> list[common_pb2.Tile]:
    """The rack as shown (by suit, then rank; jokers last); numbers are positions from 1."""
    return sorted(tiles, key=lambda t: (is_joker(t.id), sort_key(t.id)))


class HandUI:
    """Hand at the terminal: melds on the table, the pot, cards by suit."""

    adapter: GameAdapter = HAND
    commands = COMMANDS
    friendly: Mapping[str, str] = FRIENDLY

    @staticmethod
    def rack(session: PlaySession) -> list[common_pb2.Tile]:
        return rack_order(session.view.round.my_rack.tiles)

    def board(self, session: PlaySession) -> RenderableType:
        view, names = session.view, session.names
        parts: list[RenderableType] = []
        r = view.round if view.HasField("round") else None
        if r is not None and r.round:
            h = r.hand
            parts.append(
                Text(f"Deal {r.round} of {h.deals_per_game}   Pot {h.pot}   Stock {r.pile_count}")
            )
            top = Text("Top discard ")
            if r.discards:
                top.append_text(hand_card(r.discards[-1].face))
            else:
                top.append("none", style="dim")
            parts.append(top)
            for meld in h.melds:
                line = Text(f"#{meld.meld_id} ")
                for card in meld.cards:
                    line.append_text(hand_card(card.face)).append(" ")
                line.append(f"({seat_name(view, meld.seat, names)})", style="dim")
                parts.append(line)
        seats = Table.grid(padding=(0, 2))
        opened = set(r.hand.opened_seats) if r is not None else set()
        for info in view.seats:
            turn = r is not None and turn_seat(view) == info.seat
            seats.add_row(
                Text("▶" if turn else " ", style="bold green"),
                Text(
                    seat_name(view, info.seat, names) if info.player_id else "(free)",
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
            for number, tile in enumerate(self.rack(session), start=1):
                rack.append(f"{number}:", style="dim").append_text(hand_card(tile.face))
                rack.append(" ")
            parts.append(rack)
            turn_now = turn_seat(view)
            if turn_now is not None:
                left = seconds_left(view)
                clock = f" · {left}s left" if left is not None else ""
                parts.append(Text(f"Turn: {seat_name(view, turn_now, names)}{clock}", style="cyan"))
        title = f"Hand · deal {r.round}" if r is not None and r.round else "Waiting for players"
        return Panel(RichGroup(*parts), title=title, title_align="left", expand=False)

    def situation(self, session: PlaySession) -> tuple[object, ...]:
        view = session.view
        r = view.round
        return (
            r.round,
            r.pile_count,
            len(r.discards),
            turn_seat(view),
            r.turn_drew,
            len(r.my_rack.tiles),
            len(r.hand.melds),
            r.hand.must_use.id if r.hand.HasField("must_use") else None,
        )

    def tell_what_to_do(self, session: PlaySession) -> None:
        view = session.view
        r = view.round
        say = session.console.print
        if not my_turn(view) or r.phase != table_pb2.ROUND_PHASE_TURNS:
            return
        if not r.turn_drew:
            say("Your turn — draw a card (draw) or take the top discard (take)", style="bold green")
        elif r.hand.HasField("must_use"):
            say(
                f"Use {r.hand.must_use.face} in a meld or lay-off (meld / layoff), or undo",
                style="green",
            )
        else:
            say("Meld, lay off or release a joker, then discard a card (discard N)", style="green")

    # ---- commands ----------------------------------------------------------------------

    def card(self, session: PlaySession, token: str) -> common_pb2.Tile | None:
        """The card a person named: its number in the rack, or its face (``10H``)."""
        rack = self.rack(session)
        if token.isdigit():
            n = int(token)
            return rack[n - 1] if 1 <= n <= len(rack) else None
        face = token.upper()
        return next((t for t in rack if t.face == face), None)

    def cards(self, session: PlaySession, tokens: Sequence[str]) -> list[int] | None:
        ids: list[int] = []
        for token in tokens:
            tile = self.card(session, token)
            if tile is None or tile.id in ids:
                session.console.print(f"You have no card {token!r}.", style="red")
                return None
            ids.append(tile.id)
        return ids

    async def command(self, session: PlaySession, verb: str, arg: str) -> bool:
        client, tid, say = session.client, session.table_id, session.console.print
        words = arg.replace(",", " / ").split()
        if verb in ("d", "draw", "t", "take"):
            took = verb in ("t", "take")
            drawn = await client.draw(tid, from_discards=took)
            session.view = drawn.table
            say(Text(f"You {'took' if took else 'drew'} ").append_text(hand_card(drawn.tile.face)))
        elif verb in ("m", "meld"):
            groups: list[list[str]] = [[]]
            for word in words:
                if word == "/":
                    groups.append([])
                else:
                    groups[-1].append(word)
            melds = [self.cards(session, g) for g in groups if g]
            if not melds or any(m is None for m in melds):
                say("Which cards? e.g. meld 1 2 3 / 7 8 9", style="red")
                return True
            session.view = await client.lay_melds(tid, [m for m in melds if m is not None])
            say("You laid your melds.")
        elif verb in ("l", "layoff"):
            end = words[2].lower() if len(words) > 2 else ""
            ids = (
                self.cards(session, words[1:2]) if len(words) >= 2 and words[0].isdigit() else None
            )
            if ids is None or end not in ("", "low", "high"):
                say("Usage: layoff MELD CARD [low|high]", style="red")
                return True
            session.view = await client.lay_off(tid, int(words[0]), ids[0], end=end)
            say(f"You laid off on meld #{words[0]}.")
        elif verb in ("j", "release"):
            ids = self.cards(session, words[1:]) if len(words) >= 2 and words[0].isdigit() else None
            if not ids:
                say("Usage: release MELD CARD [CARD]", style="red")
                return True
            session.view = await client.release_joker(tid, int(words[0]), ids)
            say("You took the joker.", style="yellow")
        elif verb in ("u", "undo"):
            session.view = await client.undo_turn(tid)
            say("Turn taken back.")
            session.tell_what_to_do()
            return True
        elif verb in ("x", "discard"):
            tile = self.card(session, arg) if arg else None
            if tile is None:
                say(f"You have no card {arg!r}.", style="red")
                return True
            session.view = await client.discard(tid, tile.id)
            say(Text("You discarded ").append_text(hand_card(tile.face)))
            return True
        else:
            return False
        session.show_board()
        session.tell_what_to_do()
        return True

    async def show_hint(self, session: PlaySession) -> None:
        hint = await session.client.hint(session.table_id)
        text = Text("Melds you could lay: ")
        for group in hint.groups:
            text.append("[" + " ".join(t.face for t in group.tiles) + "] ")
        session.console.print(text if hint.groups else Text("No melds in your hand yet."))

    async def narrate(self, session: PlaySession, event: table_pb2.TableEvent) -> bool:
        kind = events.kind(event)
        who = session.name(events.seat(event))
        mine = session.mine(event)
        say = session.console.print
        if kind == "game_started":
            started = event.game_started
            say(
                f"The game starts: {started.deals} deals, pot {started.pot} tokens.",
                style="bold cyan",
            )
        elif kind == "deal_started":
            await session.refresh()
            say(Text(f"Deal {event.round} starts.", style="bold cyan"))
            session.show_board()
            return True
        elif kind == "drew" and not mine:
            if event.drew.source == table_pb2.DRAW_SOURCE_DISCARD:
                say(Text(f"{who} took ").append_text(hand_card(event.drew.tile.face)))
            else:
                say(f"{who} drew from the stock.", style="dim")
        elif kind == "melds_laid" and not mine:
            laid = event.melds_laid
            opening = " (opening)" if laid.opening else ""
            melds = " ".join("[" + " ".join(c.face for c in m.cards) + "]" for m in laid.melds)
            say(f"{who} laid{opening} {melds}")
        elif kind == "laid_off" and not mine:
            off = event.laid_off
            say(
                Text(f"{who} laid off ")
                .append_text(hand_card(off.card.face))
                .append(f" on meld #{off.meld_id}.")
            )
        elif kind == "joker_released" and not mine:
            say(f"{who} took a joker from meld #{event.joker_released.meld_id}.")
        elif kind == "discarded" and not mine:
            say(Text(f"{who} discarded ").append_text(hand_card(event.discarded.tile.face)))
        elif kind == "went_out":
            with_hand = " with a hand!" if event.went_out.hand_win else "."
            say(f"{who} went out{with_hand}", style="bold yellow")
        elif kind == "deal_ended":
            ended = event.deal_ended
            if ended.reason == table_pb2.DEAL_END_REASON_STOCK_EXHAUSTED:
                say("The stock ran out: nobody wins this deal.", style="yellow")
            for left in ended.hands:
                if left.tiles and left.seat != my_seat(session.view):
                    cards = Text(f"  {session.name(left.seat)} held ")
                    for card in left.tiles:
                        cards.append_text(hand_card(card.face)).append(" ")
                    say(cards)
        elif kind == "deal_scored":
            totals = event.deal_scored.totals
            scores = ", ".join(f"{session.name(s)} {t}" for s, t in enumerate(totals))
            say(f"Deal {event.round} scored · totals: {scores}", style="bold cyan")
        elif kind == "game_ended":
            payouts = event.game_ended.payouts
            paid = ", ".join(f"{session.name(s)} {p}" for s, p in enumerate(payouts) if p)
            say(f"The game is over · the pot pays {paid}.", style="bold yellow")
        return False
