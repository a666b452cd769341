"""Kishpa's part of ``kishpa play``: its board, commands and events (see
:mod:`cli.play.session` for the loop every game shares)."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import RenderableType
from rich.text import Text

from cli.play.games import KISHPA, GameAdapter
from cli.play.render import RackTile, arrange, board, bowl_text, joker_face, tile_text
from cli.play.session import PlaySession
from games.kishpa.solver import winning_discards
from games.kishpa.tiles import parse_face
from kishpa.table.v1 import table_pb2
from sdk import events
from sdk.views import my_turn, turn_seat

COMMANDS: tuple[tuple[str, str], ...] = (
    ("draw  (d)", "draw a tile from the pile"),
    ("take  (t)", "take the top discard"),
    ("discard N|FACE  (x)", "discard a tile: its number in your rack, or its face (R7)"),
    ("win [N|FACE]  (w)", "discard that tile and win (no tile: the best winning discard)"),
    ("reveal  (r)", "reveal the kishpa while a reveal window is open"),
    ("pass  (p)", "do not reveal in this window"),
    ("hint  (h)", "the server's best arrangement and any winning discard"),
    ("auto  (a)", "let the bot play this move for you"),
    ("last", "make the next round the last one (the table's creator only)"),
)

FRIENDLY = {
    "MUST_DRAW_FIRST": "Draw a tile first (draw, or take the top discard).",
    "ALREADY_DREW": "You already drew this turn: discard a tile (or win).",
    "NOT_A_WINNING_HAND": "That discard does not leave a winning hand.",
    "WINDOW_CLOSED": "No reveal window is open now.",
    "NO_DISCARD": "There is no discard to take.",
}


class KishpaUI:
    """Kishpa at the terminal: racks grouped by the solver, reveal windows, the bowl."""

    adapter: GameAdapter = KISHPA
    commands = COMMANDS
    friendly: Mapping[str, str] = FRIENDLY

    def board(self, session: PlaySession) -> RenderableType:
        return board(session.view, session.names)

    def situation(self, session: PlaySession) -> tuple[object, ...]:
        view = session.view
        r = view.round
        return (
            r.round,
            r.pile_count,  # with the discards: a new turn is a new situation
            len(r.discards),
            r.phase,
            turn_seat(view),
            r.turn_drew,
            session.may(table_pb2.PLAYER_ACTION_REVEAL_KISHPA),
        )

    def tell_what_to_do(self, session: PlaySession) -> None:
        view = session.view
        r = view.round
        say = session.console.print
        if session.may(table_pb2.PLAYER_ACTION_REVEAL_KISHPA):
            say("You hold the kishpa: reveal the kishpa now? (reveal / pass)", style="bold magenta")
        elif my_turn(view) and r.phase == table_pb2.ROUND_PHASE_FIRST_DISCARD:
            say("Your turn — you start: discard a tile (discard N)", style="bold green")
            self._tell_wins(session)
        elif my_turn(view) and r.phase == table_pb2.ROUND_PHASE_TURNS:
            if not r.turn_drew:
                say(
                    "Your turn — draw a tile (draw) or take the top discard (take)",
                    style="bold green",
                )
            else:
                say("Now discard a tile (discard N) or win (win N)", style="green")
                self._tell_wins(session)

    @staticmethod
    def _best_win(view: table_pb2.TableView) -> tuple[int, int] | None:
        """The best winning discard of a 15-tile rack: (tile id, payout per loser)."""
        r = view.round
        tiles = list(r.my_rack.tiles)
        if len(tiles) != 15 or not r.kishpa.kishpa.face:
            return None
        wins = winning_discards(
            [parse_face(t.face) for t in tiles], parse_face(r.kishpa.kishpa.face)
        )
        if not wins:
            return None
        best = max(wins, key=lambda w: w.payout_per_loser)
        return tiles[best.position].id, best.payout_per_loser

    def _tell_wins(self, session: PlaySession) -> None:
        best = self._best_win(session.view)
        if best is None:
            return
        rack = arrange(session.view.round.my_rack.tiles, joker_face(session.view))
        tile = {t.tile_id: t for t in rack.tiles}[best[0]]
        session.console.print(
            f"★ You can win: win {tile.number} ({tile.face}), {best[1]} per loser",
            style="bold yellow",
        )

    def _tile(self, session: PlaySession, arg: str) -> RackTile | None:
        rack = arrange(session.view.round.my_rack.tiles, joker_face(session.view))
        if not arg:
            session.console.print(
                "Which tile? Give its number in your rack or its face, e.g. discard 3", style="red"
            )
            return None
        tile = rack.find(arg)
        if tile is None:
            session.console.print(f"You have no tile {arg!r}.", style="red")
        return tile

    async def command(self, session: PlaySession, verb: str, arg: str) -> bool:
        client, tid, say = session.client, session.table_id, session.console.print
        if verb in ("d", "draw", "t", "take"):
            took = verb in ("t", "take")
            drawn = await client.draw(tid, from_discards=took)
            session.view = drawn.table
            joker = joker_face(session.view)
            say(
                Text("You took " if took else "You drew ").append_text(
                    tile_text(drawn.tile.face, joker)
                )
            )
            session.show_board()
            session.tell_what_to_do()
        elif verb in ("x", "discard"):
            tile = self._tile(session, arg)
            if tile is not None:
                session.view = await client.discard(tid, tile.tile_id)
                joker = joker_face(session.view)
                say(Text("You discarded ").append_text(tile_text(tile.face, joker)))
        elif verb in ("w", "win"):
            await self._win(session, arg)
        elif verb in ("r", "reveal"):
            session.view = await client.reveal_kishpa(tid)
            say("You revealed the kishpa.", style="magenta")
        elif verb in ("p", "pass"):
            session.view = await client.decline_reveal(tid)
            say("You pass.")
        elif verb == "last":
            session.view = await client.press_last_round(tid)
            say("Last round pressed: the next round is the final one.", style="yellow")
        else:
            return False
        return True

    async def _win(self, session: PlaySession, arg: str) -> None:
        if arg:
            tile = self._tile(session, arg)
            if tile is None:
                return
            tile_id = tile.tile_id
        else:
            best = self._best_win(session.view)
            if best is None:
                session.console.print("No discard wins with this rack.", style="red")
                return
            tile_id = best[0]
        won = await session.client.win(session.table_id, tile_id)
        session.view = won.table
        session.console.print(
            f"You won! {won.result.win_payout} from every other player.", style="bold yellow"
        )

    async def show_hint(self, session: PlaySession) -> None:
        hint = await session.client.hint(session.table_id)
        joker = joker_face(session.view)
        text = Text("Best groups: ")
        for group in hint.groups:
            text.append("[")
            text.append(" ".join(t.face for t in group.tiles))
            text.append("] ")
        if hint.loose_tiles:
            text.append(" loose: " + " ".join(t.face for t in hint.loose_tiles), style="dim")
        session.console.print(text)
        if hint.winning_discards:
            wins = Text("Winning discards: ", style="bold yellow")
            for tile in hint.winning_discards:
                wins.append_text(tile_text(tile.face, joker)).append(" ")
            session.console.print(wins)

    async def narrate(self, session: PlaySession, event: table_pb2.TableEvent) -> bool:
        kind = events.kind(event)
        who = session.name(events.seat(event))
        mine = session.mine(event)
        joker = joker_face(session.view)
        say = session.console.print
        if kind == "round_started":
            await session.refresh()
            say(Text(f"Round {event.round} starts.", style="bold cyan"))
            session.show_board()
            return True
        if kind == "kishpa_replaced":
            replaced = event.kishpa_replaced
            say(
                f"Nobody held a joker: the kishpa is now {replaced.kishpa.face}, "
                f"joker {replaced.joker_face}."
            )
        elif kind == "reveal_window_opened":
            await session.refresh()
            return session.may(table_pb2.PLAYER_ACTION_REVEAL_KISHPA)
        elif kind == "kishpa_revealed" and not mine:  # his own: said when he revealed
            say(f"{who} revealed the kishpa.", style="magenta")
        elif kind == "drew" and not mine:
            if event.drew.source == table_pb2.DRAW_SOURCE_DISCARD:
                say(
                    Text(f"{who} took ")
                    .append_text(tile_text(event.drew.tile.face, joker))
                    .append(" from the discards")
                )
            else:
                say(f"{who} drew from the pile.", style="dim")
        elif kind == "discarded" and not mine:
            say(Text(f"{who} discarded ").append_text(tile_text(event.discarded.tile.face, joker)))
        elif kind == "won":
            won = event.won
            groups = " ".join("[" + " ".join(t.face for t in g.tiles) + "]" for g in won.groups)
            say(
                f"{who} won, discarding {won.final_discard.face} · "
                f"{won.payout_per_loser} per loser  {groups}",
                style="bold yellow",
            )
        elif kind == "pile_exhausted":
            say("The pile ran out: nobody wins this round.", style="yellow")
        elif kind == "round_ended":
            await session.refresh()
            ended = event.round_ended
            result = (
                f"{session.name(ended.winner_seat)} won"
                if ended.HasField("winner_seat")
                else "no winner"
            )
            say(Text(f"Round {event.round} is over: {result}.", style="bold cyan"))
        elif kind == "bowl":
            say(bowl_text(event.bowl, session.names_by_player()), style="dim")
        return False
