"""The table's internal names for every wire enum, defined once and derived from the protos.

The engines and the stream speak in lower-case names (``"pile"``, ``"buy_in"``, ``"run"``);
clients see ``kishpa.*.v1`` enums. Each map here is read off the enum's descriptor (the value
name without its prefix, lower-cased), so a value added to a ``.proto`` is known here without
an edit; the few internal names that differ from the wire's are written out beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Protocol, TypeVar

from kishpa.common.v1 import common_pb2
from kishpa.table.v1 import table_pb2
from kishpa.wallet.v1 import wallet_pb2

V = TypeVar("V", bound=int)
V_co = TypeVar("V_co", bound=int, covariant=True)


class _Enum(Protocol[V_co]):
    """A generated enum type (its ``items()`` are ``(name, value)`` pairs)."""

    def items(self) -> Sequence[tuple[str, V_co]]: ...


def names_of(
    enum: _Enum[V], prefix: str, renamed: Mapping[str, str] | None = None
) -> Mapping[str, V]:
    """Internal name -> enum value for every value but the zero (``UNSPECIFIED``) one;
    ``renamed`` maps a wire name to the internal name when they differ."""
    renamed = renamed or {}
    out: dict[str, V] = {}
    for wire_name, value in enum.items():
        if value == 0:
            continue
        name = wire_name.removeprefix(prefix).lower()
        out[renamed.get(name, name)] = value
    return MappingProxyType(out)


def values_of(names: Mapping[str, V]) -> Mapping[V, str]:
    """The inverse of :func:`names_of` (enum value -> internal name)."""
    return MappingProxyType({value: name for name, value in names.items()})


GROUP_KINDS: Mapping[str, common_pb2.GroupKind.ValueType] = names_of(
    common_pb2.GroupKind, "GROUP_KIND_"
)
"""``run``, ``set``: a meld's or a hint group's kind."""
GROUP_KIND_NAMES = values_of(GROUP_KINDS)

DRAW_SOURCES: Mapping[str, table_pb2.DrawSource.ValueType] = names_of(
    table_pb2.DrawSource, "DRAW_SOURCE_"
)
"""``pile``, ``discard``: where a draw took its tile from."""
DRAW_SOURCE_NAMES = values_of(DRAW_SOURCES)

RUN_ENDS: Mapping[str, table_pb2.RunEnd.ValueType] = names_of(table_pb2.RunEnd, "RUN_END_")
"""``low``, ``high``: the end of a run a card is laid off at."""
RUN_END_NAMES = values_of(RUN_ENDS)

SETTLEMENT_PHASES: Mapping[str, table_pb2.SettlementPhase.ValueType] = names_of(
    table_pb2.SettlementPhase, "SETTLEMENT_PHASE_"
)
"""The phases a table settles with the wallet: Kishpa's ``start``/``end`` of a round, Hand's
``buy_in``/``payout`` of a game (not to be confused with :data:`ROUND_PHASES`)."""

ROUND_PHASES: Mapping[str, table_pb2.RoundPhase.ValueType] = MappingProxyType(
    {
        **names_of(table_pb2.RoundPhase, "ROUND_PHASE_"),
        "between_rounds": table_pb2.ROUND_PHASE_ENDED,
        "draw": table_pb2.ROUND_PHASE_TURNS,  # Hand: the seat to act draws ...
        "play": table_pb2.ROUND_PHASE_TURNS,  # ... then melds, lays off and discards
    }
)
"""Where a round (Kishpa) or a deal (Hand) is, as the engines name it, to ``Round.phase``
(not to be confused with :data:`SETTLEMENT_PHASES`)."""

TABLE_STATUSES: Mapping[str, table_pb2.TableStatus.ValueType] = names_of(
    table_pb2.TableStatus, "TABLE_STATUS_"
)
"""``waiting``, ``playing``, ``closed`` (``games.table``)."""

WATCH_POLICIES: Mapping[str, table_pb2.WatchPolicy.ValueType] = names_of(
    table_pb2.WatchPolicy, "WATCH_POLICY_"
)
"""``players``, ``invitees``, ``anyone`` (``games.table.WATCH_*``)."""
WATCH_POLICY_NAMES = values_of(WATCH_POLICIES)

BOT_LEVELS: Mapping[str, table_pb2.BotLevel.ValueType] = names_of(table_pb2.BotLevel, "BOT_LEVEL_")
"""``easy``, ``normal``: how the house bots play (``games.table.BOT_LEVELS``)."""
BOT_LEVEL_NAMES = values_of(BOT_LEVELS)

DEADLINE_KINDS: Mapping[str, table_pb2.DeadlineKind.ValueType] = names_of(
    table_pb2.DeadlineKind, "DEADLINE_KIND_", {"reveal_window": "window"}
)
"""``turn``, ``window``, ``next_round`` (``games.table``'s deadline kinds) and
``contributions`` (``games.contributions``)."""

REVEAL_MOMENTS: Mapping[str, table_pb2.RevealMoment.ValueType] = names_of(
    table_pb2.RevealMoment, "REVEAL_MOMENT_"
)
"""``start``, ``end``: which of a Kishpa round's reveal windows."""

BOWL_OUTCOMES: Mapping[str, table_pb2.BowlOutcome.ValueType] = names_of(
    table_pb2.BowlOutcome, "BOWL_OUTCOME_"
)
DEAL_END_REASONS: Mapping[str, table_pb2.DealEndReason.ValueType] = names_of(
    table_pb2.DealEndReason, "DEAL_END_REASON_"
)
TRANSFER_REASONS: Mapping[str, wallet_pb2.TransferReason.ValueType] = names_of(
    wallet_pb2.TransferReason, "TRANSFER_REASON_"
)
"""Wallet reason text (``bowl_contribution``) to its enum value."""

PLAYER_ACTIONS: Mapping[str, table_pb2.PlayerAction.ValueType] = MappingProxyType(
    {
        "discard": table_pb2.PLAYER_ACTION_DISCARD,
        "win": table_pb2.PLAYER_ACTION_WIN,
        "reveal": table_pb2.PLAYER_ACTION_REVEAL_KISHPA,
        "decline_reveal": table_pb2.PLAYER_ACTION_DECLINE_REVEAL,
        "lay_melds": table_pb2.PLAYER_ACTION_LAY_MELDS,
        "lay_off": table_pb2.PLAYER_ACTION_LAY_OFF,
        "release_joker": table_pb2.PLAYER_ACTION_RELEASE_JOKER,
        "undo_turn": table_pb2.PLAYER_ACTION_UNDO_TURN,
    }
)
"""A game's action names (``GameView.actions``) to ``available_actions``; ``draw`` becomes
``DRAW_PILE`` and, when there are discards, ``DRAW_DISCARD``; the table's own actions (join,
start, leave, press last round) are decided by the converter."""
