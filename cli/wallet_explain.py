"""``kishpa wallet explain <transfer id>``: a posting, the rule behind it and the round it
settled, from the ledger (``DATABASE_URL``) and the round archive (``ARCHIVE_DATABASE_URL``).

Finance follows an export's ``transfer_id`` (or its batch, table and round) to the archived
round: what was played, who ended with what, and every posting of the same batch with the
rule that made it. Exit status: 0 explained, 1 no such transfer, 2 a database unreadable.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any

RULES = {
    "opening_grant": "bank -> player: the 2,000 tokens of a new wallet (once per player)",
    "player_load": "bank -> player: a 50-token load the player asked for (LoadTokens)",
    "bank_load": "bank -> player: an automatic 50-token load covering a payment he could not make",
    "bowl_contribution": "player -> bowl: every player's stake into the bowl at a round's start",
    "bonus_doll": "player -> player: a doll bonus (start or end of a Kishpa round)",
    "bonus_joker": "player -> player: a joker bonus (start or end of a Kishpa round)",
    "bonus_one": "player -> player: the bonus for a 1 of the kishpa's colour",
    "bonus_kishpa": "player -> player: the kishpa bonus",
    "win": "player -> player: a loser's payment to the round's winner",
    "bowl_win": "bowl -> player: the bowl taken by a player who won twice in a row",
    "bowl_split": "bowl -> players: the bowl split at the end of the last round",
    "pot_buy_in": "player -> pot: a Hand player's buy-in",
    "pot_payout": "pot -> players: the Hand pot paid out by the game's totals",
    "admin_credit": "bank -> player: an operator's audited credit",
    "admin_debit": "player -> bank: an operator's audited debit",
    "admin_refund": "bowl/pot -> players: a closed table's bowl or pot refunded to who paid it",
}
"""Every ledger reason and its rule (docs/wallet.md "What every reason means")."""


def register(commands: Any) -> None:
    """Add ``explain`` to ``kishpa wallet``'s sub-commands."""
    explain = commands.add_parser(
        "explain", help="a transfer's rule and the archived round it settled"
    )
    explain.add_argument("transfer_id", type=int, help="the transfer id (export, history)")
    explain.add_argument("--archive-url", help="override ARCHIVE_DATABASE_URL")
    explain.add_argument("--json", action="store_true", help="print the explanation as JSON")
    explain.set_defaults(handler=_explain)


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _posting(row: Any) -> dict[str, Any]:
    return {
        "transfer_id": int(row.id),
        "from": row.from_account,
        "to": row.to_account,
        "amount": int(row.amount),
        "reason": row.reason,
        "rule": RULES.get(row.reason, "(no rule known for this reason)"),
        "table_id": row.table_id or "",
        "round": int(row.round or 0),
        "phase": row.phase or "",
        "time": _when(int(row.created_ms)),
    }


def explain(ledger_url: str, archive_url: str, transfer_id: int) -> dict[str, Any] | None:
    """The explanation of one transfer (None when the ledger has no such transfer)."""
    import sqlalchemy as sa

    from archive.database import create_archive_engine
    from archive.store import ArchiveStore
    from services.wallet.database import create_wallet_engine
    from services.wallet.schema import batches, postings

    ledger = create_wallet_engine(ledger_url, pool_size=1)
    try:
        with ledger.connect().execution_options(sqlite_begin="DEFERRED") as conn:
            row = conn.execute(sa.select(postings).where(postings.c.id == transfer_id)).first()
            if row is None:
                return None
            key = conn.execute(
                sa.select(batches.c.idempotency_key).where(batches.c.id == row.batch_id)
            ).scalar()
            batch = conn.execute(
                sa.select(postings)
                .where(postings.c.batch_id == row.batch_id)
                .order_by(postings.c.seq)
            ).all()
    finally:
        ledger.dispose()
    out: dict[str, Any] = {
        "transfer": _posting(row),
        "batch": {"id": str(row.batch_id), "key": key, "postings": [_posting(p) for p in batch]},
        "phase": None,
        "round": None,
    }
    store = ArchiveStore(create_archive_engine(archive_url, pool_size=1))
    try:
        found = store.phases_of_batch(str(row.batch_id))
        archived = store.round_of_phase(found[0]) if found else None
        if archived is None and row.table_id and row.round:
            archived = store.round(row.table_id, int(row.round))  # e.g. an admin refund
    finally:
        store.engine.dispose()
    if found:
        out["phase"] = {
            "table_id": found[0].table_id,
            "round": found[0].round_no,
            "phase": found[0].phase,
            "game": found[0].game,
        }
    if archived is not None:
        out["round"] = {
            "table_id": archived.table_id,
            "round": archived.round_no,
            "game": archived.game,
            "stake": archived.stake,
            "ended": _when(archived.ended_ms),
            "players": list(archived.players),
            "results": archived.results,
            "batch_ids": list(archived.batch_ids),
            "settled_round": archived.settled_round,
            "record_available": archived.record is not None,
        }
    return out


def _print(out: dict[str, Any]) -> None:
    t = out["transfer"]
    print(
        f"transfer {t['transfer_id']}: {t['from']} -> {t['to']}  {t['amount']} tokens  "
        f"{t['reason']}  ({t['time']})"
    )
    print(f"  rule: {t['rule']}")
    batch = out["batch"]
    print(f"batch {batch['id']} ({batch['key']}):")
    for p in batch["postings"]:
        print(
            f"  #{p['transfer_id']} {p['from']} -> {p['to']}  {p['amount']}  {p['reason']}: "
            f"{p['rule']}"
        )
    phase, played = out["phase"], out["round"]
    if phase is None:
        print("not a round's settlement in the archive (an operator's batch, or pruned)")
    else:
        print(
            f"settled phase {phase['round']}:{phase['phase']} of {phase['game']} table "
            f"{phase['table_id']}"
        )
    if played is not None:
        nets = ", ".join(f"{p} {n:+d}" for p, n in played["results"].items()) or "-"
        print(
            f"round {played['round']} of table {played['table_id']} ({played['game']}, stake "
            f"{played['stake']}, ended {played['ended']}): players "
            f"{', '.join(played['players'])}; nets {nets}; batches "
            f"{', '.join(played['batch_ids']) or '-'}"
        )
        if played["record_available"]:
            print(
                f"  its record: kishpa verify --table {played['table_id']} --round "
                f"{played['round']} (as one of its players)"
            )


def _explain(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from services.common.settings import Settings

    settings = Settings(service="wallet-cli")
    ledger_url = args.database_url or settings.database_url
    archive_url = args.archive_url or settings.archive_database_url or ledger_url
    try:
        out = explain(ledger_url, archive_url, args.transfer_id)
    except SQLAlchemyError as exc:
        print(f"kishpa wallet explain: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    if out is None:
        print(f"kishpa wallet explain: no transfer {args.transfer_id}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(out))
    else:
        _print(out)
    return 0
