"""What differs between the games for a client: one adapter per game.

The one bot loop (:mod:`cli.play.bot`) and the one terminal session
(:mod:`cli.play.session`) are generic; an adapter tells them which events may give the seat
something to do, rebuilds the pure bot's view from the player's own ``TableView``, asks the
pure bot of ``games.<game>.bot`` for a move and sends it through the SDK. Everything here
is a translation: no rule is decided on the client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from rich.text import Text

from cli.play.render import tile_text
from games.fair import FairStream
from games.hand import actions as ha
from games.hand.bot import MAX_ACTIONS_PER_TURN, next_action
from games.hand.deal_state import Phase
from games.hand.melds import MeldKind, make_meld
from games.hand.ruleset import DEFAULT_RULES as HAND_RULES
from games.kishpa import bot as kishpa_bot
from games.kishpa import round as rnd
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from sdk import KishpaClient
from sdk.views import my_seat, my_turn

SUIT_STYLES = {"S": "bold white", "H": "bold red", "D": "bold magenta", "C": "bold green"}


class GameAdapter(Protocol):
    """The per-game part of a client (declarative, plus the pure bot's translation)."""

    @property
    def name(self) -> str:
        """The game's name (``kishpa``, ``hand``)."""

    @property
    def game(self) -> common_pb2.Game.ValueType:
        """The game's wire enum."""

    @property
    def bot_tag(self) -> str:
        """The domain tag of the bot's own random stream (``FairStream``)."""

    @property
    def wake_kinds(self) -> frozenset[str]:
        """Events after which the seat may have something to do (its own or the table's)."""

    @property
    def round_end_kind(self) -> str:
        """The event that ends a round (a deal)."""

    @property
    def win_kind(self) -> str:
        """The event whose seat won the round (went out)."""

    @property
    def moves_per_wake(self) -> int:
        """Most moves a bot makes in a row before it waits for the next event."""

    @property
    def presses_last_round(self) -> bool:
        """Whether the creator may press last round (Hand always plays all its deals)."""

    def next_move(self, view: table_pb2.TableView, stream: FairStream) -> Any | None:
        """The pure bot's move for the player's view, or None when he has nothing to do."""

    def ends_turn(self, move: Any) -> bool:
        """Whether the move hands the turn on (a person's ``auto`` stops after it)."""

    async def send(
        self, client: KishpaClient, table_id: str, move: Any, view: table_pb2.TableView
    ) -> tuple[table_pb2.TableView, Text]:
        """Send the move; the view after it and what was done, for people (``drew R7``)."""


# ---- Kishpa ------------------------------------------------------------------------------

KISHPA_PHASES = {
    table_pb2.ROUND_PHASE_START_REVEAL: rnd.START_REVEAL,
    table_pb2.ROUND_PHASE_FIRST_DISCARD: rnd.FIRST_DISCARD,
    table_pb2.ROUND_PHASE_TURNS: rnd.TURNS,
    table_pb2.ROUND_PHASE_END_REVEAL: rnd.END_REVEAL,
    table_pb2.ROUND_PHASE_ENDED: rnd.ENDED,
}


def kishpa_bot_view(view: table_pb2.TableView) -> dict[str, Any] | None:
    """The round view the pure Kishpa bot reads, rebuilt from the player's own TableView."""
    seat = my_seat(view)
    if seat is None or not view.HasField("round"):
        return None
    r = view.round
    actions = view.available_actions
    return {
        "seat": seat,
        "phase": KISHPA_PHASES.get(r.phase, rnd.ENDED),
        "turn": r.turn_seat if r.HasField("turn_seat") else None,
        "drew": r.turn_drew,
        "hand": [{"id": t.id, "tile": t.face} for t in r.my_rack.tiles],
        "discards": [{"id": t.id, "tile": t.face} for t in r.discards],
        "kishpa": r.kishpa.kishpa.face,
        "joker": r.kishpa.joker_face,
        "may_reveal": table_pb2.PLAYER_ACTION_REVEAL_KISHPA in actions,
        "window_waits_for_me": table_pb2.PLAYER_ACTION_DECLINE_REVEAL in actions,
    }


def _face_of(view: table_pb2.TableView, tile_id: int) -> str:
    return next((t.face for t in view.round.my_rack.tiles if t.id == tile_id), str(tile_id))


@dataclass(frozen=True)
class KishpaAdapter:
    """Kishpa: draw, discard or win; reveal the kishpa in its windows."""

    name: str = "kishpa"
    game: common_pb2.Game.ValueType = common_pb2.GAME_KISHPA
    bot_tag: str = kishpa_bot.BOT_TAG
    wake_kinds: frozenset[str] = frozenset(
        {"turn_started", "reveal_window_opened", "round_started"}
    )
    round_end_kind: str = "round_ended"
    win_kind: str = "won"
    moves_per_wake: int = 4
    presses_last_round: bool = True

    def next_move(self, view: table_pb2.TableView, stream: FairStream) -> rnd.Action | None:
        data = kishpa_bot_view(view)
        return None if data is None else kishpa_bot.choose_action(data, stream)

    def ends_turn(self, move: Any) -> bool:
        return not isinstance(move, rnd.Draw)

    async def send(
        self, client: KishpaClient, table_id: str, move: Any, view: table_pb2.TableView
    ) -> tuple[table_pb2.TableView, Text]:
        joker = view.round.kishpa.joker_face
        if isinstance(move, rnd.Draw):
            drawn = await client.draw(table_id, from_discards=move.source == rnd.DISCARD)
            return drawn.table, Text("drew ").append_text(tile_text(drawn.tile.face, joker))
        if isinstance(move, rnd.Discard):
            after = await client.discard(table_id, move.tile)
            face = _face_of(view, move.tile)
            return after, Text("discarded ").append_text(tile_text(face, joker))
        if isinstance(move, rnd.Win):
            won = await client.win(table_id, move.tile, move.arrangement or ())
            return won.table, Text(f"won! {won.result.win_payout} per loser", style="bold yellow")
        if isinstance(move, rnd.Reveal):
            return await client.reveal_kishpa(table_id), Text("revealed the kishpa")
        if isinstance(move, rnd.Pass):
            return await client.decline_reveal(table_id), Text("passed")
        raise ValueError(f"a player cannot send {move!r}")


# ---- Hand --------------------------------------------------------------------------------

HAND_KINDS = {common_pb2.GROUP_KIND_RUN: MeldKind.RUN, common_pb2.GROUP_KIND_SET: MeldKind.SET}


def hand_bot_view(view: table_pb2.TableView) -> dict[str, Any] | None:
    """The seat view the pure Hand bot reads, when it is this player's turn (else None)."""
    if not my_turn(view) or view.status != table_pb2.TABLE_STATUS_PLAYING:
        return None
    r = view.round
    if r.phase != table_pb2.ROUND_PHASE_TURNS or not r.HasField("hand"):
        return None
    hand = r.hand
    melds = [
        make_meld([t.id for t in m.cards], m.seat, HAND_RULES, HAND_KINDS.get(m.kind)).to_dict()
        for m in hand.melds
    ]
    opened = set(hand.opened_seats)
    seats = len(view.seats)
    return {
        "seat": view.my_seat,
        "phase": Phase.PLAY.value if r.turn_drew else Phase.DRAW.value,
        "hand": [t.id for t in r.my_rack.tiles],
        "discard_pile": [t.id for t in r.discards],
        "melds": melds,
        "opened": [s in opened for s in range(seats)],
        # Only the default lay-off ruling reads these; "opened before this turn" suffices.
        "opened_turn": [0 if s in opened else -1 for s in range(seats)],
        "turn_no": 1,
        "must_use": hand.must_use.id if hand.HasField("must_use") else None,
    }


def hand_card(face: str) -> Text:
    """A card in its suit's colour; jokers starred."""
    if face in ("J1", "J2"):
        return Text("★" + face, style="bold yellow")
    return Text(face, style=SUIT_STYLES.get(face[-1:], ""))


@dataclass(frozen=True)
class HandAdapter:
    """Hand (Rummy 51): draw, lay melds, lay off, release jokers, undo, discard."""

    name: str = "hand"
    game: common_pb2.Game.ValueType = common_pb2.GAME_HAND
    bot_tag: str = "kishpa/hand/v1/botclient"
    wake_kinds: frozenset[str] = frozenset({"turn_started", "deal_started"})
    round_end_kind: str = "deal_ended"
    win_kind: str = "went_out"
    moves_per_wake: int = MAX_ACTIONS_PER_TURN
    presses_last_round: bool = False

    def next_move(self, view: table_pb2.TableView, stream: FairStream) -> ha.Action | None:
        data = hand_bot_view(view)
        return None if data is None else next_action(data, HAND_RULES, stream)

    def ends_turn(self, move: Any) -> bool:
        return isinstance(move, ha.Discard)

    async def send(
        self, client: KishpaClient, table_id: str, move: Any, view: table_pb2.TableView
    ) -> tuple[table_pb2.TableView, Text]:
        match move:
            case ha.DrawStock() | ha.DrawDiscard():
                took = isinstance(move, ha.DrawDiscard)
                drawn = await client.draw(table_id, from_discards=took)
                said = Text("took " if took else "drew ").append_text(hand_card(drawn.tile.face))
                return drawn.table, said
            case ha.LayMelds(melds=melds):
                kinds = [None if m.kind is None else m.kind.value for m in melds]
                laid = await client.lay_melds(table_id, [m.cards for m in melds], kinds)
                return laid, Text("laid melds")
            case ha.LayOff(meld_id=meld_id, card=card, end=end):
                off = await client.lay_off(table_id, meld_id, card, end=end or "")
                return off, Text(f"laid off on meld #{meld_id}")
            case ha.ReleaseJoker(meld_id=meld_id, cards=cards):
                released = await client.release_joker(table_id, meld_id, cards)
                return released, Text(f"took the joker of meld #{meld_id}")
            case ha.UndoTurn():
                return await client.undo_turn(table_id), Text("took the turn back")
            case ha.Discard(card=card):
                after = await client.discard(table_id, card)
                return after, Text("discarded ").append_text(hand_card(_face_of(view, card)))
        raise ValueError(f"a player cannot send {move!r}")


KISHPA = KishpaAdapter()
HAND = HandAdapter()
ADAPTERS: dict[common_pb2.Game.ValueType, GameAdapter] = {a.game: a for a in (KISHPA, HAND)}
"""Every game's adapter by its wire enum (a unit test checks every registered game has one)."""
BY_NAME: dict[str, GameAdapter] = {a.name: a for a in ADAPTERS.values()}
"""Every game's adapter by the game's name (``games.registry``)."""


def adapter_for(game: common_pb2.Game.ValueType) -> GameAdapter:
    """The adapter of a game (``GAME_KISHPA``, ``GAME_HAND``)."""
    return ADAPTERS[game]
