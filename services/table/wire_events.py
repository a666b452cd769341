"""Table events from the stream's internal form to their typed ``kishpa.table.v1`` messages.

The stream keeps each event as a ``type`` plus JSON ``data`` (``shared/stream.py``,
shared with the workers); clients receive one typed message per event
(``TableEvent.event``, a ``oneof``). This module is the one place that maps one to the
other: a builder per internal type, each reading the keys the engines and the workers
write. An internal type with no builder is a programming error that the tests catch
(``tests/unit/test_wire_events.py`` plays both games and converts every event).

Every tile or card travels as ``Tile{id, face}``, so a client never needs the deck's
numbering to show one (issue 17, item 4).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from google.protobuf import duration_pb2, timestamp_pb2

from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from kishpa.wallet.v1 import wallet_pb2
from services.common.games import GAME_ENUMS
from services.table.engine import WATCH_ANYONE, WATCH_INVITEES, WATCH_PLAYERS, TableSettings
from shared.stream import StoredEvent, TableEvent

Face = Callable[[int], str]
"""The face of a tile id in the table's game (``R7``, ``10H``)."""

WATCH_POLICIES = {
    table_pb2.WATCH_POLICY_PLAYERS: WATCH_PLAYERS,
    table_pb2.WATCH_POLICY_INVITEES: WATCH_INVITEES,
    table_pb2.WATCH_POLICY_ANYONE: WATCH_ANYONE,
}
WATCH_POLICY_ENUMS = {name: enum for enum, name in WATCH_POLICIES.items()}
BOT_LEVEL_ENUMS = {"easy": table_pb2.BOT_LEVEL_EASY, "normal": table_pb2.BOT_LEVEL_NORMAL}
DEADLINE_KINDS = {
    "turn": table_pb2.DEADLINE_KIND_TURN,
    "window": table_pb2.DEADLINE_KIND_REVEAL_WINDOW,
    "next_round": table_pb2.DEADLINE_KIND_NEXT_ROUND,
}
MOMENTS = {"start": table_pb2.REVEAL_MOMENT_START, "end": table_pb2.REVEAL_MOMENT_END}
PHASES = {
    "start": table_pb2.SETTLEMENT_PHASE_START,
    "end": table_pb2.SETTLEMENT_PHASE_END,
    "buy_in": table_pb2.SETTLEMENT_PHASE_BUY_IN,
    "payout": table_pb2.SETTLEMENT_PHASE_PAYOUT,
}
BOWL_OUTCOMES = {
    "kept": table_pb2.BOWL_OUTCOME_KEPT,
    "taken": table_pb2.BOWL_OUTCOME_TAKEN,
    "split": table_pb2.BOWL_OUTCOME_SPLIT,
}
DEAL_END_REASONS = {
    "went_out": table_pb2.DEAL_END_REASON_WENT_OUT,
    "stock_exhausted": table_pb2.DEAL_END_REASON_STOCK_EXHAUSTED,
}
SOURCES = {"pile": table_pb2.DRAW_SOURCE_PILE, "discard": table_pb2.DRAW_SOURCE_DISCARD}
GROUP_KINDS = {"run": common_pb2.GROUP_KIND_RUN, "set": common_pb2.GROUP_KIND_SET}
TRANSFER_REASONS: dict[str, wallet_pb2.TransferReason.ValueType] = {
    name.removeprefix("TRANSFER_REASON_").lower(): value
    for name, value in wallet_pb2.TransferReason.items()
    if value != wallet_pb2.TRANSFER_REASON_UNSPECIFIED
}
"""Wallet reason text (``bowl_contribution``) to its enum value."""


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
        watch_policy=WATCH_POLICY_ENUMS.get(
            settings.watch_policy, table_pb2.WATCH_POLICY_UNSPECIFIED
        ),
        invited_watchers=settings.invited_watchers,
        bots=settings.bots,
        bot_level=BOT_LEVEL_ENUMS.get(settings.bot_level, table_pb2.BOT_LEVEL_UNSPECIFIED),
    )
    if game == "kishpa":
        allow = bool(settings.options.get("allow_high_wrap", False))
        msg.kishpa.CopyFrom(table_pb2.KishpaOptions(allow_high_wrap=allow))
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


def _fill(msg: table_pb2.TableEvent, event: TableEvent, b: _Build) -> bool:
    """Set ``msg``'s oneof from the internal event; False for an unknown type."""
    t = event.type
    d: Mapping[str, Any] = {**event.data, **(event.private_data or {})}
    # ---- the table (both games) ----
    if t == "table_created":
        msg.table_created.CopyFrom(
            table_pb2.TableCreated(creator_player_id=str(d["creator"]), settings=_settings(d))
        )
    elif t == "player_joined":
        msg.player_joined.CopyFrom(
            table_pb2.PlayerJoined(
                player_id=str(d["player_id"]),
                display_name=str(d.get("name")),
                bot=bool(d.get("bot", False)),
            )
        )
    elif t == "player_left":
        msg.player_left.CopyFrom(table_pb2.PlayerLeft(player_id=str(d["player_id"])))
    elif t == "autoplay_on":
        msg.autoplay_on.CopyFrom(table_pb2.AutoplayOn(player_id=str(d["player_id"])))
    elif t == "deadline":
        msg.deadline.CopyFrom(
            table_pb2.DeadlineSet(
                kind=DEADLINE_KINDS.get(str(d["kind"]), table_pb2.DEADLINE_KIND_UNSPECIFIED),
                deadline=timestamp(int(d["at_ms"])),
            )
        )
    elif t == "last_round_pressed":
        cause = table_pb2.LAST_ROUND_CAUSE_ABANDONED if d.get("reason") else None
        msg.last_round_pressed.CopyFrom(
            table_pb2.LastRoundPressed(
                next_round=int(d["next_round"]),
                cause=cause or table_pb2.LAST_ROUND_CAUSE_PRESSED,
            )
        )
    elif t == "phase_recorded":
        msg.phase_recorded.CopyFrom(
            table_pb2.PhaseRecorded(
                phase=PHASES.get(str(d["phase"]), table_pb2.SETTLEMENT_PHASE_UNSPECIFIED)
            )
        )
    elif t == "settled":
        msg.settled.CopyFrom(
            table_pb2.Settled(
                phase=PHASES.get(str(d["phase"]), table_pb2.SETTLEMENT_PHASE_UNSPECIFIED),
                batch_id=str(d.get("batch_id", "")),
                balances={str(k): int(v) for k, v in dict(d.get("balances") or {}).items()},
                settle_time=timestamp(int(d.get("settled_ms", 0))),
                payments=_payments(d.get("postings")),
            )
        )
    elif t == "table_closed":
        msg.table_closed.CopyFrom(
            table_pb2.TableClosed(
                by_operator=bool(d.get("by_operator", False)),
                reason=str(d.get("reason", "")),
                closed_by=str(d.get("closed_by", "")),
            )
        )
    elif t == "turn_started":
        # Kishpa says first_discard; Hand's starter begins in the "play" phase (no draw).
        first = bool(d.get("first_discard", False)) or d.get("phase") == "play"
        msg.turn_started.CopyFrom(table_pb2.TurnStarted(first_turn=first))
    elif t in ("turn_timed_out", "timed_out"):
        msg.turn_timed_out.CopyFrom(
            table_pb2.TurnTimedOut(in_a_row=_optional_int(d.get("in_a_row")))
        )
    elif t == "dealt":
        if "cards" in d:  # Hand: wholly private
            tiles = b.tiles(d["cards"])
            msg.dealt.CopyFrom(table_pb2.Dealt(tile_count=len(tiles), tiles=tiles))
        else:
            hand = [int(x["id"]) for x in d.get("hand", [])]
            msg.dealt.CopyFrom(table_pb2.Dealt(tile_count=int(d["tiles"]), tiles=b.tiles(hand)))
    elif t == "drew":
        drew = table_pb2.Drew(
            source=SOURCES.get(str(d["source"]), table_pb2.DRAW_SOURCE_UNSPECIFIED),
            pile_count=int(d["pile"]),
        )
        if d.get("tile_id") is not None:
            drew.tile.CopyFrom(b.tile(d["tile_id"]))
        msg.drew.CopyFrom(drew)
    elif t == "drew_from_stock":
        msg.drew.CopyFrom(
            table_pb2.Drew(source=table_pb2.DRAW_SOURCE_PILE, pile_count=int(d["stock_size"]))
        )
    elif t == "drew_from_discard":
        msg.drew.CopyFrom(
            table_pb2.Drew(source=table_pb2.DRAW_SOURCE_DISCARD, tile=b.tile(d["card"]))
        )
    elif t == "card_drawn":
        msg.card_drawn.CopyFrom(table_pb2.CardDrawn(tile=b.tile(d["card"])))
    elif t == "discarded":
        tile_id = d["tile_id"] if "tile_id" in d else d["card"]
        msg.discarded.CopyFrom(table_pb2.Discarded(tile=b.tile(tile_id)))
    # ---- Kishpa ----
    elif t == "round_started":
        msg.round_started.CopyFrom(
            table_pb2.KishpaRoundStarted(
                player_ids=[str(p) for p in d["players"]],
                starter_seat=int(d["starter"]),
                shuffle_commitment=str(d["commitment"]),
                kishpa=b.tile(d["kishpa_id"]),
                joker_face=str(d["joker"]),
                dolls_returned=b.tiles(d.get("dolls_returned_ids", [])),
                hand_sizes=[int(n) for n in d["hand_sizes"]],
                pile_count=int(d["pile"]),
            )
        )
    elif t == "reveal_window_opened":
        msg.reveal_window_opened.CopyFrom(
            table_pb2.RevealWindowOpened(moment=MOMENTS[str(d["moment"])])
        )
    elif t == "may_reveal":
        msg.may_reveal.CopyFrom(table_pb2.MayReveal(moment=MOMENTS[str(d["moment"])]))
    elif t == "kishpa_revealed":
        msg.kishpa_revealed.CopyFrom(
            table_pb2.KishpaRevealed(player_id=str(d["player"]), kishpa_face=str(d["tile"]))
        )
    elif t == "reveal_declined":
        msg.reveal_declined.CopyFrom(table_pb2.RevealDeclined())
    elif t == "reveal_window_closed":
        msg.reveal_window_closed.CopyFrom(
            table_pb2.RevealWindowClosed(moment=MOMENTS[str(d["moment"])])
        )
    elif t == "kishpa_replaced":
        msg.kishpa_replaced.CopyFrom(
            table_pb2.KishpaReplaced(kishpa=b.tile(d["kishpa_id"]), joker_face=str(d["joker"]))
        )
    elif t == "won":
        msg.won.CopyFrom(
            table_pb2.Won(
                player_id=str(d["player"]),
                final_discard=b.tile(d["discard_id"]),
                groups=b.groups(d["group_ids"], d.get("group_kinds") or ()),
                payout_per_loser=int(d["payout_per_loser"]),
            )
        )
    elif t == "pile_exhausted":
        msg.pile_exhausted.CopyFrom(table_pb2.PileExhausted(turns_played=int(d["turns"])))
    elif t == "round_ended":
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
        msg.round_ended.CopyFrom(ended)
    elif t == "bowl":
        winner = d.get("winner")
        msg.bowl.CopyFrom(
            table_pb2.BowlResolved(
                outcome=BOWL_OUTCOMES.get(str(d["outcome"]), table_pb2.BOWL_OUTCOME_UNSPECIFIED),
                amount=int(d["amount"]),
                bowl=int(d["bowl"]),
                winner_player_id=None if winner is None else str(winner),
                streaks={str(k): int(v) for k, v in dict(d.get("streaks") or {}).items()},
            )
        )
    # ---- Hand ----
    elif t == "game_started":
        msg.game_started.CopyFrom(
            table_pb2.HandGameStarted(
                stake=int(d["stake"]),
                pot=int(d["pot"]),
                deals=int(d["deals"]),
                player_ids=[str(p) for p in d["players"]],
            )
        )
    elif t == "deal_started":
        msg.deal_started.CopyFrom(
            table_pb2.HandDealStarted(
                starter_seat=int(d["starter"]),
                hand_sizes=[int(n) for n in d["hand_sizes"]],
                top_discard=b.tile(d["top_discard"]),
                stock_size=int(d["stock_size"]),
                shuffle_commitment=str(d["commitment"]),
            )
        )
    elif t == "melds_laid":
        msg.melds_laid.CopyFrom(
            table_pb2.MeldsLaid(
                opening=bool(d["opening"]),
                value=int(d["value"]),
                melds=[b.meld(m) for m in d["melds"]],
            )
        )
    elif t == "laid_off":
        msg.laid_off.CopyFrom(
            table_pb2.LaidOff(
                meld_id=int(d["meld_id"]),
                card=b.tile(d["card"]),
                meld=b.meld(d["meld"], d["meld_id"]),
            )
        )
    elif t == "joker_released":
        msg.joker_released.CopyFrom(
            table_pb2.JokerReleased(
                meld_id=int(d["meld_id"]),
                cards=b.tiles(d["cards"]),
                jokers=b.tiles(d["jokers"]),
                meld=b.meld(d["meld"], d["meld_id"]),
            )
        )
    elif t == "turn_undone":
        msg.turn_undone.CopyFrom(
            table_pb2.TurnUndone(
                discard_pile=b.tiles(d["discard_pile"]),
                melds=[b.meld(m) for m in d["melds"]],
            )
        )
    elif t == "went_out":
        msg.went_out.CopyFrom(table_pb2.WentOut(hand_win=bool(d["hand"])))
    elif t == "deal_ended":
        msg.deal_ended.CopyFrom(
            table_pb2.DealEnded(
                reason=DEAL_END_REASONS.get(
                    str(d["reason"]), table_pb2.DEAL_END_REASON_UNSPECIFIED
                ),
                winner_seat=_optional_int(d.get("winner")),
                hand_win=bool(d["hand"]),
                scores=[int(s) for s in d["scores"]],
                hands=[
                    table_pb2.SeatTiles(seat=s, tiles=b.tiles(h))
                    for s, h in enumerate(d.get("hands") or [])
                ],
            )
        )
    elif t == "seed_revealed":
        msg.seed_revealed.CopyFrom(
            table_pb2.SeedRevealed(
                server_seed=str(d["server_seed"]),
                shuffle_commitment=str(d["commitment"]),
                client_seeds=[str(c or "") for c in d.get("client_seeds") or []],
            )
        )
    elif t == "deal_scored":
        msg.deal_scored.CopyFrom(
            table_pb2.DealScored(
                starter_seat=int(d["starter"]),
                winner_seat=_optional_int(d.get("winner")),
                hand_win=bool(d["hand"]),
                scores=[int(s) for s in d["scores"]],
                totals=[int(s) for s in d["totals"]],
            )
        )
    elif t == "game_ended":
        msg.game_ended.CopyFrom(
            table_pb2.GameEnded(
                totals=[int(s) for s in d["totals"]],
                winner_seats=[int(s) for s in d["winners"]],
                pot=int(d["pot"]),
                payouts=[int(p) for p in d["payouts"]],
            )
        )
    else:
        return False
    return True


def event_message(stored: StoredEvent, face: Face) -> table_pb2.TableEvent | None:
    """The typed message of a stream entry already filtered for its viewer
    (``TableEvent.for_viewer``); None for an internal type clients are not sent."""
    event = stored.event
    msg = table_pb2.TableEvent(
        event_id=stored.id,
        round=event.round,
        seat=None if event.seat < 0 else event.seat,
        create_time=timestamp(int(stored.id.split("-", 1)[0])),
    )
    return msg if _fill(msg, event, _Build(face)) else None


KNOWN = frozenset(
    {
        "table_created",
        "player_joined",
        "player_left",
        "autoplay_on",
        "deadline",
        "last_round_pressed",
        "phase_recorded",
        "settled",
        "table_closed",
        "turn_started",
        "turn_timed_out",
        "timed_out",
        "dealt",
        "drew",
        "drew_from_stock",
        "drew_from_discard",
        "card_drawn",
        "discarded",
        "round_started",
        "reveal_window_opened",
        "may_reveal",
        "kishpa_revealed",
        "reveal_declined",
        "reveal_window_closed",
        "kishpa_replaced",
        "won",
        "pile_exhausted",
        "round_ended",
        "bowl",
        "game_started",
        "deal_started",
        "melds_laid",
        "laid_off",
        "joker_released",
        "turn_undone",
        "went_out",
        "deal_ended",
        "seed_revealed",
        "deal_scored",
        "game_ended",
    }
)
"""Every internal event type :func:`event_message` converts (checked by the tests)."""
