"""Table events from the stream's internal form to their typed ``kishpa.table.v1`` messages.

The stream keeps each event as a ``type`` plus JSON ``data`` (``shared/stream.py``,
shared with the workers); clients receive one typed message per event
(``TableEvent.event``, a ``oneof``). This module is the one place that maps one to the
other, in one table (:data:`EVENT_KINDS`): per case of the ``oneof`` a builder, the internal
types it is built from, which game writes it and what it tells a client. Where two games
write the same type with their own data (``dealt``, ``discarded``, ``turn_started``), each
game's builder is registered for it (``@kind(..., games=...)``): a builder is chosen by the
table's game and the event's type, never by the data's shape. The table renders
the list of events in ``docs/api.md`` (``python -m services.table.wire_events`` prints it; a
test keeps the two equal), and ``tests/unit/test_wire_events.py`` checks that the table, the
``oneof`` and the types the games and the workers write are the same sets. Adding an event
kind is one builder here (its ``@kind`` line is its row) plus its message in the proto.

Every tile or card travels as ``Tile{id, face}``, so a client never needs the deck's
numbering to show one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import duration_pb2, message, timestamp_pb2

import games.hand as hand
import games.kishpa as kishpa
from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from kishpa.wallet.v1 import wallet_pb2
from services.common.games import GAME_ENUMS
from services.table.engine import TableSettings
from services.table.game_wire import WIRES
from services.table.wire_enums import (
    BOT_LEVELS,
    BOWL_OUTCOMES,
    DEADLINE_KINDS,
    DEAL_END_REASONS,
    DRAW_SOURCES,
    GROUP_KINDS,
    REVEAL_MOMENTS,
    SETTLEMENT_PHASES,
    TRANSFER_REASONS,
    WATCH_POLICIES,
)
from shared.stream import StoredEvent, TableEvent

Face = Callable[[int], str]
"""The face of a tile id in the table's game (``R7``, ``10H``)."""


def timestamp(ms: int) -> timestamp_pb2.Timestamp:
    """A Timestamp from Unix milliseconds."""
    stamp = timestamp_pb2.Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def duration(ms: int) -> duration_pb2.Duration:
    """A Duration from milliseconds."""
    out = duration_pb2.Duration()
    out.FromMilliseconds(ms)
    return out


class _Build:
    """Builds the oneof messages of one table's events (``face`` names its tiles)."""

    def __init__(self, face: Face) -> None:
        self.face = face

    def tile(self, tile_id: Any) -> common_pb2.Tile:
        return common_pb2.Tile(id=int(tile_id), face=self.face(int(tile_id)))

    def tiles(self, ids: Iterable[Any]) -> list[common_pb2.Tile]:
        return [self.tile(t) for t in ids]

    def groups(self, groups: Sequence[Any], kinds: Sequence[str]) -> list[common_pb2.TileGroup]:
        """Tile groups with their kinds (a won event stored before kinds were: unspecified)."""
        kinds = [*kinds, *[""] * (len(groups) - len(kinds))]
        return [
            common_pb2.TileGroup(
                kind=GROUP_KINDS.get(kind, common_pb2.GROUP_KIND_UNSPECIFIED), tiles=self.tiles(g)
            )
            for g, kind in zip(groups, kinds, strict=False)
        ]

    def meld(self, raw: Mapping[str, Any], meld_id: Any = None) -> table_pb2.Meld:
        return table_pb2.Meld(
            meld_id=int(raw["id"] if meld_id is None else meld_id),
            kind=GROUP_KINDS.get(str(raw.get("kind")), common_pb2.GROUP_KIND_UNSPECIFIED),
            cards=self.tiles(raw.get("cards", [])),
            seat=int(raw.get("owner", 0)),
        )


def settings_message(game: str, settings: TableSettings) -> table_pb2.TableSettings:
    """The settings of a table as a message."""
    msg = table_pb2.TableSettings(
        game=GAME_ENUMS.get(game, common_pb2.GAME_UNSPECIFIED),
        seats=settings.seats,
        turn_time=duration(settings.turn_seconds * 1000),
        reveal_window=duration(settings.reveal_window_seconds * 1000),
        stake=settings.stake,
        next_round_pause=duration(settings.next_round_pause_ms),
        watch_policy=WATCH_POLICIES.get(settings.watch_policy, table_pb2.WATCH_POLICY_UNSPECIFIED),
        invited_watchers=settings.invited_watchers,
        bots=settings.bots,
        bot_level=BOT_LEVELS.get(settings.bot_level, table_pb2.BOT_LEVEL_UNSPECIFIED),
        bot_pause=duration(settings.bot_pause_ms),
    )
    wire = WIRES.get(game)
    if wire is not None:
        wire.options_message(settings, msg)
    return msg


def _settings(data: Mapping[str, Any]) -> table_pb2.TableSettings:
    """A ``table_created`` event's settings (the table's settings dict plus its game)."""
    return settings_message(str(data.get("game", "")), TableSettings.from_dict(data))


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _payments(raw: Any) -> list[table_pb2.Payment]:
    return [
        table_pb2.Payment(
            from_account=str(p["from"]),
            to_account=str(p["to"]),
            amount=int(p["amount"]),
            reason=TRANSFER_REASONS.get(str(p["reason"]), wallet_pb2.TRANSFER_REASON_UNSPECIFIED),
        )
        for p in raw or []
    ]


# ---- the table of event kinds ------------------------------------------------------------

Builder = Callable[[str, Mapping[str, Any], _Build], message.Message]
"""``(internal type, the entry's data with its private part, builder) -> the case's message``."""

BOTH, KISHPA, HAND = "both", kishpa.GAME.title, hand.GAME.title


@dataclass(frozen=True, slots=True)
class EventKind:
    """One case of ``TableEvent.event``: how it is built and what it tells a client."""

    case: str
    """The ``oneof`` field (``melds_laid``)."""
    game: str
    """Which game writes it: :data:`BOTH`, :data:`KISHPA` or :data:`HAND`."""
    shows: str
    """What a client learns from it (a row of the table in ``docs/api.md``)."""
    types: tuple[str, ...]
    """The internal stream types built into this case (usually just the case's name)."""
    builds: dict[str, Builder]
    """The builder by game name (:data:`ANY_GAME`: every game without its own)."""

    def builder(self, game: str) -> Builder:
        """The builder of this case for the table's game."""
        return self.builds.get(game) or self.builds[ANY_GAME]


EVENT_KINDS: dict[str, EventKind] = {}
"""Every case of ``TableEvent.event`` by its field name, in the order of the docs."""
ANY_GAME = ""


def kind(
    case: str, game: str, shows: str, *types: str, games: tuple[str, ...] = (ANY_GAME,)
) -> Callable[[Builder], Builder]:
    """Register the decorated builder as the one for ``case`` (built from ``types``, by
    default the internal type of the same name) at the tables of ``games`` (by name; by
    default every game). The first registration of a case makes its row in the docs."""

    def register(build: Builder) -> Builder:
        known = EVENT_KINDS.get(case)
        if known is None:
            known = EVENT_KINDS[case] = EventKind(case, game, shows, types or (case,), {})
        for name in games:
            if name in known.builds:
                raise ValueError(f"two builders for the event case {case!r} of {name!r}")
            known.builds[name] = build
        return build

    return register


# ---- the table (both games) ----


@kind("table_created", BOTH, "creator, settings")
def _table_created(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.TableCreated(creator_player_id=str(d["creator"]), settings=_settings(d))


@kind("player_joined", BOTH, "player id, display name, whether a bot; `seat` is the seat")
def _player_joined(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.PlayerJoined(
        player_id=str(d["player_id"]),
        display_name=str(d.get("name")),
        bot=bool(d.get("bot", False)),
    )


@kind("player_left", BOTH, "player id; `seat` is the seat")
def _player_left(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.PlayerLeft(player_id=str(d["player_id"]))


@kind(
    "deadline", BOTH, "`kind` (`TURN`, `REVEAL_WINDOW`, `NEXT_ROUND`) and the `deadline` Timestamp"
)
def _deadline(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.DeadlineSet(
        kind=DEADLINE_KINDS.get(str(d["kind"]), table_pb2.DEADLINE_KIND_UNSPECIFIED),
        deadline=timestamp(int(d["at_ms"])),
    )


@kind(
    "turn_started",
    BOTH,
    "`first_turn`: the starter's turn without a draw",
    games=(kishpa.GAME.name,),
)
def _turn_started(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.TurnStarted(first_turn=bool(d.get("first_discard", False)))


@kind("turn_started", BOTH, "", games=(hand.GAME.name,))
def _hand_turn_started(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    # Hand's starter begins in the "play" phase (no draw).
    return table_pb2.TurnStarted(first_turn=d.get("phase") == "play")


@kind(
    "turn_timed_out",
    BOTH,
    "the server played the turn; Kishpa: `in_a_row`",
    "turn_timed_out",
    "timed_out",
)
def _turn_timed_out(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.TurnTimedOut(in_a_row=_optional_int(d.get("in_a_row")))


@kind("autoplay_on", BOTH, "the seat is played by the server until its player acts")
def _autoplay_on(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.AutoplayOn(player_id=str(d["player_id"]))


@kind(
    "dealt",
    BOTH,
    "`tile_count`; private: the `tiles`. Hand: wholly private",
    games=(kishpa.GAME.name,),
)
def _dealt(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    mine = [int(x["id"]) for x in d.get("hand", [])]
    return table_pb2.Dealt(tile_count=int(d["tiles"]), tiles=b.tiles(mine))


@kind("dealt", BOTH, "", games=(hand.GAME.name,))
def _hand_dealt(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    tiles = b.tiles(d["cards"])  # wholly private: only the seat's own entry has them
    return table_pb2.Dealt(tile_count=len(tiles), tiles=tiles)


@kind(
    "drew",
    BOTH,
    "`source`, `pile_count` (unset for Hand's draw from the discards); `tile` when taken from"
    " the discards, or (Kishpa, private) from the pile",
    "drew",
    "drew_from_stock",
    "drew_from_discard",
)
def _drew(t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    if t == "drew_from_stock":  # Hand: the card is in the private card_drawn
        return table_pb2.Drew(source=table_pb2.DRAW_SOURCE_PILE, pile_count=int(d["stock_size"]))
    if t == "drew_from_discard":
        return table_pb2.Drew(source=table_pb2.DRAW_SOURCE_DISCARD, tile=b.tile(d["card"]))
    drew = table_pb2.Drew(
        source=DRAW_SOURCES.get(str(d["source"]), table_pb2.DRAW_SOURCE_UNSPECIFIED),
        pile_count=int(d["pile"]),
    )
    if d.get("tile_id") is not None:
        drew.tile.CopyFrom(b.tile(d["tile_id"]))
    return drew


@kind("card_drawn", HAND, "private: the card drawn from the stock")
def _card_drawn(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.CardDrawn(tile=b.tile(d["card"]))


@kind("discarded", BOTH, "the tile", games=(kishpa.GAME.name,))
def _discarded(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.Discarded(tile=b.tile(d["tile_id"]))


@kind("discarded", BOTH, "", games=(hand.GAME.name,))
def _hand_discarded(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.Discarded(tile=b.tile(d["card"]))


@kind("phase_recorded", KISHPA, "a settlement record (`SettlementPhase` `START`/`END`) was written")
def _phase_recorded(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.PhaseRecorded(
        phase=SETTLEMENT_PHASES.get(str(d["phase"]), table_pb2.SETTLEMENT_PHASE_UNSPECIFIED)
    )


@kind(
    "settled",
    BOTH,
    "written by the workers: `phase` (`START`, `END`, `BUY_IN`, `PAYOUT`), `batch_id`, every"
    " player's `balances`, `settle_time`, and `payments`: who paid whom and why (`from_account`,"
    " `to_account`, `amount`, `reason` as `kishpa.wallet.v1.TransferReason`), automatic bank"
    " loads included",
)
def _settled(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.Settled(
        phase=SETTLEMENT_PHASES.get(str(d["phase"]), table_pb2.SETTLEMENT_PHASE_UNSPECIFIED),
        batch_id=str(d.get("batch_id", "")),
        balances={str(k): int(v) for k, v in dict(d.get("balances") or {}).items()},
        settle_time=timestamp(int(d.get("settled_ms", 0))),
        payments=_payments(d.get("postings")),
    )


@kind(
    "last_round_pressed",
    BOTH,
    "`next_round`, `cause` (`PRESSED` by the creator, or `ABANDONED`: every seat on "
    "auto-play; a leave makes the round in progress the last, Hand's game ends with it)",
)
def _last_round_pressed(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    cause = table_pb2.LAST_ROUND_CAUSE_ABANDONED if d.get("reason") else None
    return table_pb2.LastRoundPressed(
        next_round=int(d["next_round"]), cause=cause or table_pb2.LAST_ROUND_CAUSE_PRESSED
    )


@kind(
    "table_closed",
    BOTH,
    "the table closed: `by_operator`, `reason`, `closed_by` (`settled` may still follow)",
)
def _table_closed(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.TableClosed(
        by_operator=bool(d.get("by_operator", False)),
        reason=str(d.get("reason", "")),
        closed_by=str(d.get("closed_by", "")),
    )


@kind(
    "seed_committed",
    BOTH,
    "the commitment to a coming deal's server seed, before any contribution (docs/fairness.md)",
)
def _seed_committed(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.SeedCommitted(deal=int(d["deal"]), shuffle_commitment=str(d["commitment"]))


@kind(
    "contribution_accepted",
    BOTH,
    "a seat's contribution to a coming deal's shuffle (`seat`: his seat when it was accepted;"
    " `player_id`: the contributor)",
)
def _contribution_accepted(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.ContributionAccepted(
        deal=int(d["deal"]),
        contribution=str(d["contribution"]),
        player_id=str(d.get("player_id") or ""),
    )


@kind("player_ready", BOTH, "between deals: `seat` is ready for `next_round` (Ready)")
def _player_ready(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.PlayerReady(player_id=str(d["player_id"]), next_round=int(d["next_round"]))


# ---- Kishpa ----


@kind(
    "round_started",
    KISHPA,
    "players, starter, shuffle commitment, kishpa, joker face, dolls returned, hand sizes, pile,"
    " the deal's seats",
)
def _round_started(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.KishpaRoundStarted(
        player_ids=[str(p) for p in d["players"]],
        starter_seat=int(d["starter"]),
        shuffle_commitment=str(d["commitment"]),
        kishpa=b.tile(d["kishpa_id"]),
        joker_face=str(d["joker"]),
        dolls_returned=b.tiles(d.get("dolls_returned_ids", [])),
        hand_sizes=[int(n) for n in d["hand_sizes"]],
        pile_count=int(d["pile"]),
        seats=_deal_seats(d),
    )


def _deal_seats(d: Mapping[str, Any]) -> table_pb2.DealSeats | None:
    """What a deal's start says of its seats (games/contributions.py seat_marks), if it does."""
    if "bot_seats" not in d:
        return None
    until = int(d.get("awaited_until_ms") or 0)
    return table_pb2.DealSeats(
        bot_seats=[int(s) for s in d["bot_seats"]],
        declared_seats=[int(s) for s in d["declared_seats"]],
        awaited_seats=[int(s) for s in d["awaited_seats"]],
        autoplay_seats=[int(s) for s in d["autoplay_seats"]],
        awaited_until=timestamp(until) if until else None,
    )


@kind("reveal_window_opened", KISHPA, "`moment` (`START`, `END`)")
def _reveal_window_opened(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.RevealWindowOpened(moment=REVEAL_MOMENTS[str(d["moment"])])


@kind("may_reveal", KISHPA, "private, wholly: the seat may reveal (`moment`)")
def _may_reveal(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.MayReveal(moment=REVEAL_MOMENTS[str(d["moment"])])


@kind("kishpa_revealed", KISHPA, "who, and the face shown")
def _kishpa_revealed(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.KishpaRevealed(player_id=str(d["player"]), kishpa_face=str(d["tile"]))


@kind("reveal_declined", KISHPA, "private, wholly: the seat declined")
def _reveal_declined(_t: str, _d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.RevealDeclined()


@kind("reveal_window_closed", KISHPA, "`moment` (`START`, `END`)")
def _reveal_window_closed(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.RevealWindowClosed(moment=REVEAL_MOMENTS[str(d["moment"])])


@kind("kishpa_replaced", KISHPA, "the new kishpa, joker face and the dolls it turned back")
def _kishpa_replaced(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.KishpaReplaced(
        kishpa=b.tile(d["kishpa_id"]),
        joker_face=str(d["joker"]),
        dolls_returned=b.tiles(d.get("dolls_returned_ids", [])),
    )


@kind("won", KISHPA, "winner, final discard, the 14 tiles as runs and sets, payout per loser")
def _won(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.Won(
        player_id=str(d["player"]),
        final_discard=b.tile(d["discard_id"]),
        groups=b.groups(d["group_ids"], d.get("group_kinds") or ()),
        payout_per_loser=int(d["payout_per_loser"]),
    )


@kind("pile_exhausted", KISHPA, "turns played")
def _pile_exhausted(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.PileExhausted(turns_played=int(d["turns"]))


@kind(
    "round_ended",
    KISHPA,
    "winner (unset: nobody), final discard, reveal seats, the server seed, client seeds and"
    " commitment (to verify the shuffle)",
)
def _round_ended(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    ended = table_pb2.RoundEnded(
        winner_seat=_optional_int(d.get("winner")),
        start_reveal_seat=_optional_int(d.get("start_reveal")),
        end_reveal_seat=_optional_int(d.get("end_reveal")),
        server_seed=str(d["server_seed"]),
        client_seeds=[s or "" for s in d.get("client_seeds", [])],
        shuffle_commitment=str(d.get("commitment", "")),
    )
    if d.get("final_discard_id") is not None:
        ended.final_discard.CopyFrom(b.tile(d["final_discard_id"]))
    return ended


@kind(
    "bowl",
    KISHPA,
    "`outcome` (`KEPT`, `TAKEN`, `SPLIT`), amount, bowl left, winner, streaks by player",
)
def _bowl(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    winner = d.get("winner")
    return table_pb2.BowlResolved(
        outcome=BOWL_OUTCOMES.get(str(d["outcome"]), table_pb2.BOWL_OUTCOME_UNSPECIFIED),
        amount=int(d["amount"]),
        bowl=int(d["bowl"]),
        winner_player_id=None if winner is None else str(winner),
        streaks={str(k): int(v) for k, v in dict(d.get("streaks") or {}).items()},
    )


# ---- Hand ----


@kind("game_started", HAND, "stake, pot, deals, players")
def _game_started(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.HandGameStarted(
        stake=int(d["stake"]),
        pot=int(d["pot"]),
        deals=int(d["deals"]),
        player_ids=[str(p) for p in d["players"]],
    )


@kind(
    "deal_started",
    HAND,
    "starter, hand sizes, top discard, stock size, commitment, the deal's seats",
)
def _deal_started(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.HandDealStarted(
        starter_seat=int(d["starter"]),
        hand_sizes=[int(n) for n in d["hand_sizes"]],
        top_discard=b.tile(d["top_discard"]),
        stock_size=int(d["stock_size"]),
        shuffle_commitment=str(d["commitment"]),
        seats=_deal_seats(d),
    )


@kind("melds_laid", HAND, "opening, value, the melds (`Meld`: id, kind, cards, owner seat)")
def _melds_laid(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.MeldsLaid(
        opening=bool(d["opening"]), value=int(d["value"]), melds=[b.meld(m) for m in d["melds"]]
    )


@kind("laid_off", HAND, "the meld id, the card, the meld as it now is")
def _laid_off(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.LaidOff(
        meld_id=int(d["meld_id"]), card=b.tile(d["card"]), meld=b.meld(d["meld"], d["meld_id"])
    )


@kind("joker_released", HAND, "the meld id, the cards put in, the jokers taken, the meld")
def _joker_released(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.JokerReleased(
        meld_id=int(d["meld_id"]),
        cards=b.tiles(d["cards"]),
        jokers=b.tiles(d["jokers"]),
        meld=b.meld(d["meld"], d["meld_id"]),
    )


@kind("turn_undone", HAND, "the discard pile and the melds as they were before the turn")
def _turn_undone(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.TurnUndone(
        discard_pile=b.tiles(d["discard_pile"]), melds=[b.meld(m) for m in d["melds"]]
    )


@kind("went_out", HAND, "`hand_win`: the seat opened and went out in the same turn (a *hand*)")
def _went_out(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.WentOut(hand_win=bool(d["hand"]))


@kind(
    "deal_ended",
    HAND,
    "reason (`WENT_OUT`, `STOCK_EXHAUSTED`), winner, scores, and every seat's cards left"
    " (`SeatTiles`, faces included)",
)
def _deal_ended(_t: str, d: Mapping[str, Any], b: _Build) -> message.Message:
    return table_pb2.DealEnded(
        reason=DEAL_END_REASONS.get(str(d["reason"]), table_pb2.DEAL_END_REASON_UNSPECIFIED),
        winner_seat=_optional_int(d.get("winner")),
        hand_win=bool(d["hand"]),
        scores=[int(s) for s in d["scores"]],
        hands=[
            table_pb2.SeatTiles(seat=s, tiles=b.tiles(h))
            for s, h in enumerate(d.get("hands") or [])
        ],
    )


@kind("seed_revealed", HAND, "the deal's server seed, commitment and client seeds (seat order)")
def _seed_revealed(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.SeedRevealed(
        server_seed=str(d["server_seed"]),
        shuffle_commitment=str(d["commitment"]),
        client_seeds=[str(c or "") for c in d.get("client_seeds") or []],
    )


@kind("deal_scored", HAND, "starter, winner, hand win, the deal's scores and the totals")
def _deal_scored(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.DealScored(
        starter_seat=int(d["starter"]),
        winner_seat=_optional_int(d.get("winner")),
        hand_win=bool(d["hand"]),
        scores=[int(s) for s in d["scores"]],
        totals=[int(s) for s in d["totals"]],
    )


@kind("game_ended", HAND, "totals, winners, pot and payouts")
def _game_ended(_t: str, d: Mapping[str, Any], _b: _Build) -> message.Message:
    return table_pb2.GameEnded(
        totals=[int(s) for s in d["totals"]],
        winner_seats=[int(s) for s in d["winners"]],
        pot=int(d["pot"]),
        payouts=[int(p) for p in d["payouts"]],
    )


# ---- converting ----

BY_TYPE: Mapping[str, EventKind] = {t: k for k in EVENT_KINDS.values() for t in k.types}
"""The event kind of each internal type."""
KNOWN = frozenset(BY_TYPE)
"""Every internal event type :func:`event_message` converts (checked by the tests)."""


def event_message(stored: StoredEvent, face: Face, game: str) -> table_pb2.TableEvent | None:
    """The typed message of a stream entry of a table of ``game`` already filtered for its
    viewer (``TableEvent.for_viewer``); None for an internal type clients are not sent."""
    event: TableEvent = stored.event
    found = BY_TYPE.get(event.type)
    if found is None:
        return None
    data: Mapping[str, Any] = {**event.data, **(event.private_data or {})}
    msg = table_pb2.TableEvent(
        event_id=stored.id,
        round=event.round,
        seat=None if event.seat < 0 else event.seat,
        create_time=timestamp(int(stored.id.split("-", 1)[0])),
    )
    built = found.builder(game)(event.type, data, _Build(face))
    getattr(msg, found.case).CopyFrom(built)
    return msg


def reference_markdown() -> str:
    """The list of events in ``docs/api.md``, rendered from :data:`EVENT_KINDS`."""
    fields = table_pb2.TableEvent.DESCRIPTOR.fields_by_name
    lines = ["| case (message) | game | what it says |", "|---|---|---|"]
    for k in EVENT_KINDS.values():
        message_type = fields[k.case].message_type
        name = message_type.name if message_type is not None else k.case
        others = [t for t in k.types if t != k.case]
        inner = f" (stream: {', '.join(f'`{t}`' for t in others)})" if others else ""
        lines.append(f"| `{k.case}` (`{name}`){inner} | {k.game} | {k.shows} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference_markdown())
