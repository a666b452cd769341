"""Reading ``kishpa.table.v1.TableEvent`` messages: which event, which seat, what moved.

Every event is one case of the ``TableEvent.event`` oneof (``drew``, ``round_ended``...);
``kind(event)`` names it, ``seat(event)`` is the seat it is about (None for the table).
A client ignores kinds it does not know: a newer server may send more.
"""

from __future__ import annotations

from dataclasses import dataclass

from kishpa.table.v1 import table_pb2
from kishpa.wallet.v1 import wallet_pb2

TABLE_CLOSED = "table_closed"


def kind(event: table_pb2.TableEvent) -> str:
    """The event's oneof case (``"drew"``, ``"settled"``...); ``""`` for one this client's
    generated code does not know."""
    return event.WhichOneof("event") or ""


def seat(event: table_pb2.TableEvent) -> int | None:
    """The seat the event is about, or None for the table."""
    return event.seat if event.HasField("seat") else None


def reason_text(reason: wallet_pb2.TransferReason.ValueType) -> str:
    """A transfer reason as the wallet's short text (``bowl_contribution``)."""
    return wallet_pb2.TransferReason.Name(reason).removeprefix("TRANSFER_REASON_").lower()


@dataclass(frozen=True, slots=True)
class Payment:
    """One movement of a settlement, with the accounts named for people."""

    payer: str
    payee: str
    amount: int
    reason: str


def account_name(account: str, names: dict[str, str]) -> str:
    """``player:<id>`` as the player's name (or id); ``bowl:<t>`` as "the bowl"..."""
    kind_, _, rest = account.partition(":")
    if kind_ == "player":
        return names.get(rest) or rest
    if kind_ in ("bowl", "pot"):
        return f"the {kind_}"
    return account


def payments(settled: table_pb2.Settled, names: dict[str, str]) -> list[Payment]:
    """Who paid whom and why in a settlement (bank loads included)."""
    return [
        Payment(
            account_name(p.from_account, names),
            account_name(p.to_account, names),
            p.amount,
            reason_text(p.reason),
        )
        for p in settled.payments
    ]
