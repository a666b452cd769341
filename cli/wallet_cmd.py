"""``kishpa wallet``: operator tools on the wallet database (``DATABASE_URL``).

``reconcile`` proves the ledger is consistent (exit 1 on any discrepancy, ``--json`` for
jobs) and stores the run; ``balance`` and ``history`` read accounts and postings directly.
The finance commands (``export``, ``report``, ``runs``, ``drift``) are in ``finance_cmd``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``wallet`` command group to the ``kishpa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "wallet", help="reconcile the wallet ledger, read balances and history"
    )
    parser.add_argument("--database-url", help="override DATABASE_URL")
    commands = parser.add_subparsers(dest="wallet_command", required=True, metavar="COMMAND")

    rec = commands.add_parser("reconcile", help="check the ledger; exit 1 on any discrepancy")
    rec.add_argument("--json", action="store_true", help="print the report as JSON")
    rec.add_argument(
        "--full",
        action="store_true",
        help="compare every batch with its result, not only those after the last clean run "
        "(weekly: docs/operations.md)",
    )
    rec.add_argument(
        "--full-every-days",
        type=float,
        default=0,
        metavar="D",
        help="run the full check instead when no clean full run started in the last D days "
        "(the CronJob: 7)",
    )
    rec.add_argument("--source", default="cli", help="recorded as who ran it (cronjob, cli, ...)")
    rec.add_argument(
        "--record-to",
        choices=("database", "wallet", "none"),
        default="database",
        help="store the run in the ledger database (default), through the wallet's "
        "RecordReconciliationRun (for a read-only database role), or not at all",
    )
    rec.set_defaults(handler=_reconcile)

    ver = commands.add_parser(
        "verify-chain",
        help="recompute the ledger's hash chain; exit 1 naming the first broken batch",
    )
    ver.add_argument("--json", action="store_true", help="print the report as JSON")
    ver.set_defaults(handler=_verify_chain)

    bal = commands.add_parser("balance", help="print the balances of accounts")
    bal.add_argument("accounts", nargs="+", help="account ids: player:<id>, bowl:<table>, bank")
    bal.set_defaults(handler=_balance)

    his = commands.add_parser("history", help="print postings, newest first")
    his.add_argument("--account", default="")
    his.add_argument("--table", default="")
    his.add_argument("--round", type=int, default=0)
    his.add_argument("--reason", default="")
    his.add_argument(
        "--limit", type=int, default=50, help="how many postings (read 500 a page; 0: all)"
    )
    his.set_defaults(handler=_history)

    from cli import finance_cmd

    finance_cmd.register(commands)
    from cli import wallet_explain

    wallet_explain.register(commands)


def _url(args: argparse.Namespace) -> str:
    from services.common.settings import Settings

    url: str = args.database_url or Settings(service="wallet-cli").database_url
    return url


def _reconcile(args: argparse.Namespace) -> int:
    import time

    import grpc
    from sqlalchemy.exc import DBAPIError

    from cli.finance_cmd import record_via_wallet
    from services.wallet.reconcile import format_report, ledger_run, reconcile_url

    started = time.time()
    try:
        in_database = args.source if args.record_to == "database" else ""
        report = reconcile_url(
            _url(args),
            source=in_database,
            incremental=not args.full,
            full_every_days=args.full_every_days,
        )
    except DBAPIError as exc:
        # Exit 2, not 1: "could not check" must not read as "found discrepancies".
        print(f"kishpa wallet reconcile: cannot read the ledger: {exc.orig}", file=sys.stderr)
        print("(is DATABASE_URL right, and has `kishpa migrate` run?)", file=sys.stderr)
        return 2
    if args.record_to == "wallet":
        try:
            report.run_id = record_via_wallet(ledger_run(report, args.source, started))
        except (grpc.RpcError, LookupError) as exc:
            print(f"kishpa wallet reconcile: could not record the run: {exc}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(format_report(report))
    return 0 if report.ok else 1


def _verify_chain(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import DBAPIError

    from services.wallet.chain import format_report, verify
    from services.wallet.database import create_wallet_engine

    engine = create_wallet_engine(_url(args), pool_size=3)
    try:
        report = verify(engine)
    except DBAPIError as exc:
        print(f"kishpa wallet verify-chain: cannot read the ledger: {exc.orig}", file=sys.stderr)
        print("(is DATABASE_URL right, and has `kishpa migrate` run?)", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(format_report(report))
    return 0 if report.ok else 1


def _balance(args: argparse.Namespace) -> int:
    from services.wallet.accounts import ils
    from services.wallet.database import create_wallet_engine
    from services.wallet.errors import WalletError
    from services.wallet.ledger import Ledger

    engine = create_wallet_engine(_url(args), pool_size=1)
    try:
        ledger = Ledger(engine)
        for account in args.accounts:
            try:
                tokens = ledger.balance(account)
            except WalletError as exc:
                print(f"{account}: {exc}", file=sys.stderr)
                return 1
            print(f"{account}\t{tokens} tokens\t{ils(tokens)} ILS")
    finally:
        engine.dispose()
    return 0


def _history(args: argparse.Namespace) -> int:
    from cli.finance_cmd import UtcMillis
    from services.wallet.database import create_wallet_engine
    from services.wallet.errors import WalletError
    from services.wallet.ledger import Ledger, TransferFilter

    if args.limit < 0:
        print("kishpa wallet history: --limit must be 0 (all) or more", file=sys.stderr)
        return 2
    engine = create_wallet_engine(_url(args), pool_size=1)
    times = UtcMillis()
    try:
        ledger = Ledger(engine)
        filters = TransferFilter(args.account, args.table, args.round, args.reason)
        left, token = args.limit or -1, ""
        try:
            if args.account:
                ledger.balance(args.account)  # an unopened player is an error, as everywhere
            while left:
                size = 500 if left < 0 else min(left, 500)
                transfers, token = ledger.list_transfers(filters, size, token)
                for t in transfers:
                    p = t.posting
                    where = f" table={p.table_id} round={p.round} {p.phase}" if p.table_id else ""
                    print(
                        f"{times(t.effective_ms or t.created_ms)} #{t.transfer_id} "
                        f"batch={t.batch_id}.{t.seq} {p.from_account} -> {p.to_account} "
                        f"{p.amount} {p.reason}{where.rstrip()}"
                    )
                left -= len(transfers)
                if not token:
                    break
        except WalletError as exc:
            print(f"kishpa wallet history: {exc}", file=sys.stderr)
            return 1
    finally:
        engine.dispose()
    return 0
