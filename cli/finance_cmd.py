"""``kishpa wallet export|report|runs|drift``: the finance commands (docs/wallet.md, "For
finance").

They call the wallet's finance RPCs at ``KISHPA_WALLET_ADDR`` with ``--token`` or
``KISHPA_WALLET_TOKEN`` (an operator's token with the finance role), else the workers'
service credential minted from ``KISHPA_SERVICE_SECRET`` (what the CronJobs have; the
access table, ``services/common/access.py``, lets the worker and finance read these).
``export`` writes each chunk as it arrives and prints the cursor to resume from on stderr,
so a period of any size streams.
``drift`` runs the drift check once (Redis, the table service, the wallet and the round
archive: the rounds new since its last clean run, and the live tables) and records it.

Exit status: 0 done (drift: no difference), 1 refused or differences found, 2 not signed in
or unreachable.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import IO, Any

from cli.wallet_rpc import bearer, refused, signed_in, wallet_address, wallet_channel

CSV_COLUMNS = (
    "transfer_id",
    "batch_id",
    "seq",
    "time_utc",
    "from_account",
    "to_account",
    "amount",
    "reason",
    "table_id",
    "round",
    "phase",
    "posted_utc",
)
"""An export's columns: ``time_utc`` is the effective time, ``posted_utc`` the moment of
posting (they differ only for a posting made while its month was closed)."""
EXPORT_FORMATS = ("csv", "jsonl")
STATEMENT_COLUMNS = (
    "line",
    "transfer_id",
    "batch_id",
    "seq",
    "time_utc",
    "posted_utc",
    "reason",
    "table_id",
    "round",
    "phase",
    "counterparty",
    "amount",
    "balance",
)
"""A statement's CSV columns; the first row is the opening balance, the last the closing."""


def register(commands: Any) -> None:
    """Add the finance commands to ``kishpa wallet``'s sub-commands."""
    exp = commands.add_parser("export", help="stream a period's transfers as CSV or JSON lines")
    exp.add_argument("--since", required=True, type=moment, help="start (inclusive), UTC")
    exp.add_argument("--until", required=True, type=moment, help="end (exclusive), UTC")
    exp.add_argument("--account", default="")
    exp.add_argument("--table", default="")
    exp.add_argument("--reason", default="", help="e.g. bowl_contribution")
    exp.add_argument("--format", choices=EXPORT_FORMATS, default="csv")
    exp.add_argument("--output", "-o", default="-", help="file to write (default stdout)")
    exp.add_argument("--cursor", default="", help="resume after this cursor (printed on stderr)")
    exp.add_argument("--chunk-size", type=int, default=2000)
    _signed_in(exp)
    exp.set_defaults(handler=_export_to_file)

    rep = commands.add_parser("report", help="totals per reason, balances as of, month-end")
    kinds = rep.add_subparsers(dest="report_kind", required=True, metavar="REPORT")
    month = kinds.add_parser("month", help="a month's close: opening, movements, closing")
    month.add_argument("month", type=_month, help="YYYY-MM (UTC)")
    period = kinds.add_parser("period", help="the same close for any [since, until)")
    period.add_argument("--since", required=True, type=moment)
    period.add_argument("--until", required=True, type=moment)
    totals = kinds.add_parser("totals", help="totals per reason over [since, until)")
    totals.add_argument("--since", required=True, type=moment)
    totals.add_argument("--until", required=True, type=moment)
    asof = kinds.add_parser("balances", help="balances as of a moment")
    asof.add_argument("--as-of", required=True, type=moment)
    asof.add_argument("accounts", nargs="*", help="accounts to show (totals per kind always)")
    for cmd in (month, period, totals, asof):
        cmd.add_argument("--json", action="store_true", help="print JSON")
        _signed_in(cmd)
        cmd.set_defaults(handler=_rpc(_report))

    runs = commands.add_parser("runs", help="reconciliation runs (ledger and drift), newest first")
    runs.add_argument("--kind", choices=("ledger", "drift"), default="")
    runs.add_argument("--limit", type=int, default=20)
    runs.add_argument("--json", action="store_true")
    _signed_in(runs)
    runs.set_defaults(handler=_rpc(_runs))

    stm = commands.add_parser(
        "statement", help="one account's postings with running balance, opening and closing"
    )
    stm.add_argument("account", help="player:<id>, bowl:<table>, pot:<table> or bank")
    stm.add_argument("--since", type=moment, help="start (inclusive, effective time), UTC")
    stm.add_argument("--until", type=moment, help="end (exclusive), UTC; default now")
    stm.add_argument("--format", choices=EXPORT_FORMATS, default="csv")
    stm.add_argument("--output", "-o", default="-", help="file to write (default stdout)")
    _signed_in(stm)
    stm.set_defaults(handler=_to_file(_statement))

    acc = commands.add_parser("accounts", help="every account with its balance")
    acc.add_argument("--kind", choices=("player", "bowl", "pot", "bank"), default="")
    acc.add_argument("--json", action="store_true", help="print JSON lines")
    _signed_in(acc)
    acc.set_defaults(handler=_rpc(_accounts))

    close = commands.add_parser(
        "close-period", help="close a month (UTC) for good (operator role finance; audited)"
    )
    close.add_argument("month", type=_month_text, help="YYYY-MM")
    close.add_argument("--reason", default="", help="recorded in the audit log")
    close.add_argument("--ticket", default="", help="recorded in the audit log")
    close.add_argument(
        "--request-id", default="", help="idempotency key (default close-YYYY-MM: a retry is safe)"
    )
    close.add_argument(
        "--as", dest="operator", default="", help="operator id when minting a token here"
    )
    close.add_argument("--json", action="store_true")
    close.add_argument(
        "--token", default="", help="operator token (default KISHPA_ADMIN_TOKEN, then minted)"
    )
    close.set_defaults(
        handler=signed_in(
            "kishpa wallet close-period", _operator_token, lambda a, t: _call(_close, a, t)
        )
    )

    periods = commands.add_parser("periods", help="the closed months, oldest first")
    periods.add_argument("--json", action="store_true")
    _signed_in(periods)
    periods.set_defaults(handler=_rpc(_periods))

    drift = commands.add_parser(
        "drift", help="compare new rounds and live tables with the ledger; exit 1 on a difference"
    )
    drift.add_argument("--json", action="store_true")
    drift.add_argument("--source", default="cli", help="recorded as who ran it (e.g. cronjob)")
    drift.set_defaults(handler=_drift)


def _signed_in(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--token", default="", help="bearer token (default KISHPA_WALLET_TOKEN)")


def moment(text: str) -> dt.datetime:
    """A UTC moment from ``2026-12-01`` or ``2026-12-01T10:00[:00][Z|+00:00]``."""
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO date or time: {text!r}") from None
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def _month(text: str) -> tuple[dt.datetime, dt.datetime]:
    try:
        start = dt.datetime.strptime(text, "%Y-%m").replace(tzinfo=dt.UTC)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a month (YYYY-MM): {text!r}") from None
    return start, month_after(start)


def _month_text(text: str) -> str:
    _month(text)
    return text


def month_after(start: dt.datetime) -> dt.datetime:
    """The first instant of the month after ``start``'s."""
    return (start.replace(day=1) + dt.timedelta(days=32)).replace(day=1)


def _token(args: argparse.Namespace) -> str:
    token: str = args.token or os.environ.get("KISHPA_WALLET_TOKEN", "")
    return token or _jobs_credential()


def _jobs_credential() -> str:
    """The jobs' (``worker``'s) credential: under mutual TLS nothing ("": the workload's
    client certificate says who calls), else a service token from the shared key."""
    from shared.tls import client_tls_from_env

    secret = os.environ.get("KISHPA_SERVICE_SECRET", "")
    if secret:
        from services.common.auth import TokenAuthority

        return TokenAuthority(None, secret).issue_service_token("worker").token
    tls = client_tls_from_env()
    if tls is not None and tls.cert_file is not None:
        return ""
    raise LookupError(
        "no credential: pass --token, set KISHPA_WALLET_TOKEN, run with the worker's "
        "certificate (KISHPA_TLS_CERT_FILE, KISHPA_TLS_KEY_FILE, KISHPA_TLS_CA_FILE) or where "
        "KISHPA_SERVICE_SECRET is set"
    )


def _operator_token(args: argparse.Namespace) -> str:
    """An operator token with the finance role: ``--token``, ``KISHPA_ADMIN_TOKEN``, else
    minted from ``KISHPA_SERVICE_SECRET`` in the name of ``--as`` (default the login)."""
    token: str = args.token or os.environ.get("KISHPA_ADMIN_TOKEN", "")
    if token:
        return token
    secret = os.environ.get("KISHPA_SERVICE_SECRET", "")
    if not secret:
        raise LookupError(
            "no operator token: pass --token, set KISHPA_ADMIN_TOKEN, or run where "
            "KISHPA_SERVICE_SECRET is set (with --as <your id>)"
        )
    import getpass

    from services.common.auth import TokenAuthority

    who = args.operator or getpass.getuser()
    return TokenAuthority(None, secret).issue_admin_token(who, who, roles=["finance"]).token


Call = Callable[[Any, argparse.Namespace, Any], Awaitable[int]]


def _rpc(call: Call) -> Callable[[argparse.Namespace], int]:
    return signed_in("kishpa wallet", _token, lambda args, token: _call(call, args, token))


async def _call(call: Call, args: argparse.Namespace, token: str) -> int:
    import grpc

    from kishpa.wallet.v1 import wallet_pb2_grpc

    async with wallet_channel() as channel:
        try:
            return await call(wallet_pb2_grpc.WalletServiceStub(channel), args, bearer(token))
        except grpc.aio.AioRpcError as exc:
            return refused("kishpa wallet", exc)


def _stamp(moment_: dt.datetime) -> Any:
    from google.protobuf.timestamp_pb2 import Timestamp

    stamp = Timestamp()
    stamp.FromDatetime(moment_)
    return stamp


def _duration(ms: int) -> Any:
    from google.protobuf.duration_pb2 import Duration

    duration = Duration()
    duration.FromMilliseconds(ms)
    return duration


def _iso(ms: int) -> str:
    """UTC ISO 8601 with milliseconds and ``Z``."""
    when = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


class UtcMillis:
    """``_iso`` for a stream of times, several times faster: the date is worked out once per
    day, the time of day by arithmetic, and a repeated millisecond (a batch's postings share
    theirs) is answered from the last one."""

    def __init__(self) -> None:
        self._day = -1
        self._date = ""
        self._ms = -1
        self._text = ""

    def __call__(self, ms: int) -> str:
        if ms == self._ms:
            return self._text
        day, rest = divmod(ms, 86_400_000)
        if day != self._day:
            self._day = day
            self._date = _iso(day * 86_400_000)[:11]  # "YYYY-MM-DDT"
        seconds, milli = divmod(rest, 1000)
        hours, seconds = divmod(seconds, 3600)
        minutes, seconds = divmod(seconds, 60)
        self._ms = ms
        self._text = f"{self._date}{hours:02d}:{minutes:02d}:{seconds:02d}.{milli:03d}Z"
        return self._text


def chunk_rows(chunk: Any, times: UtcMillis) -> list[tuple[Any, ...]]:
    """An export chunk sent as columns, as rows of values in ``CSV_COLUMNS`` order."""
    c = chunk.columns
    names = _REASON_NAMES or _reason_names()
    posted_times = UtcMillis()
    effective = c.effective_time_ms or c.create_time_ms  # a wallet that predates it
    return list(
        zip(
            c.transfer_id,
            c.batch_id,
            c.seq,
            map(times, effective),
            c.from_account,
            c.to_account,
            c.amount,
            [names.get(r) or _reason_name(r) for r in c.reason],
            c.table_id,
            [n if t else None for t, n in zip(c.table_id, c.round, strict=True)],
            c.phase,
            map(posted_times, c.create_time_ms),
            strict=True,
        )
    )


_REASON_NAMES: dict[int, str] = {}


def _reason_names() -> dict[int, str]:
    from kishpa.wallet.v1 import wallet_pb2

    for value in wallet_pb2.TransferReason.values():
        _REASON_NAMES[value] = _reason_name(value)
    return _REASON_NAMES


def _reason_name(value: int) -> str:
    from kishpa.wallet.v1 import wallet_pb2

    return wallet_pb2.TransferReason.Name(value).removeprefix("TRANSFER_REASON_").lower()  # type: ignore[arg-type]


def _reason_value(text: str) -> int:
    from kishpa.wallet.v1 import wallet_pb2

    if not text:
        return 0
    try:
        return int(wallet_pb2.TransferReason.Value("TRANSFER_REASON_" + text.upper()))
    except ValueError:
        raise ValueError(f"unknown reason {text!r}") from None


def _row(t: Any) -> dict[str, Any]:
    p = t.posting
    posted = t.create_time.ToMilliseconds()
    effective = t.effective_time.ToMilliseconds() if t.HasField("effective_time") else posted
    return {
        "transfer_id": t.transfer_id,
        "batch_id": t.batch_id,
        "seq": t.seq,
        "time_utc": _iso(effective),
        "from_account": p.from_account,
        "to_account": p.to_account,
        "amount": p.amount,
        "reason": _reason_name(p.reason),
        "table_id": p.table_id,
        "round": round_value(p.table_id, p.round),
        "phase": p.phase,
        "posted_utc": _iso(posted),
    }


def round_value(table_id: str, number: int) -> int | None:
    """A posting's round as exported: none (empty in CSV, null in JSON) for a posting about
    no table, so that "no round" is not Hand's real round 0."""
    return number if table_id else None


async def _export(stub: Any, args: argparse.Namespace, md: Any) -> int:
    from kishpa.wallet.v1 import wallet_pb2

    try:
        reason = _reason_value(args.reason)
    except ValueError as exc:
        print(f"kishpa wallet export: {exc}", file=sys.stderr)
        return 1
    request = wallet_pb2.ExportTransfersRequest(
        since=_stamp(args.since),
        until=_stamp(args.until),
        account=args.account,
        table_id=args.table,
        reason=reason,  # type: ignore[arg-type]
        cursor=args.cursor,
        chunk_size=args.chunk_size,
        columns=True,
    )
    out: IO[str] = args.out
    rows = 0
    cursor = args.cursor
    finished = False
    try:
        writer = csv.writer(out, lineterminator="\n")
        if args.format == "csv" and not args.cursor:
            writer.writerow(CSV_COLUMNS)
        times = UtcMillis()
        async for chunk in stub.ExportTransfers(request, metadata=md):
            # Columns from this server; Transfer messages from one that predates them.
            values = chunk_rows(chunk, times) if chunk.columns.transfer_id else None
            if values is None:
                values = [tuple(_row(t).values()) for t in chunk.transfers]
            if args.format == "csv":
                writer.writerows(values)
            else:
                dumps = json.JSONEncoder(separators=(",", ":")).encode
                out.writelines(dumps(dict(zip(CSV_COLUMNS, v, strict=True))) + "\n" for v in values)
            rows += len(values)
            out.flush()  # what is written is durable before the cursor says so
            cursor = chunk.cursor  # "" after the last chunk
        finished = True
    finally:
        args.rows_written = rows
        if finished:
            print(f"exported {rows} transfers; resume with --cursor (done)", file=sys.stderr)
        else:  # refused, unreachable or interrupted: never "(done)"
            resume = f"; resume with --cursor {cursor}" if cursor else ""
            print(f"export stopped after {rows} transfers{resume}", file=sys.stderr)
    return 0


def _export_to_file(args: argparse.Namespace) -> int:
    return _to_file(_export, append=bool(args.cursor))(args)


def _to_file(call: Call, *, append: bool = False) -> Callable[[argparse.Namespace], int]:
    """Run ``call`` writing to ``args.out``: stdout, or ``--output`` through a temporary file
    beside it that replaces it only when the command succeeded (a refused or interrupted
    run leaves an existing file as it was). ``append`` (a resumed export) copies the file
    first, so the temporary file continues it."""

    def handle(args: argparse.Namespace) -> int:
        if args.output == "-":
            args.out = sys.stdout
            return _rpc(call)(args)
        import shutil
        import tempfile

        target = os.path.abspath(args.output)
        fd, temporary = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".part", dir=os.path.dirname(target)
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                if append and os.path.exists(target):
                    with open(target, encoding="utf-8", newline="") as before:
                        shutil.copyfileobj(before, out)
                args.out = out
                code = _rpc(call)(args)
            if code == 0:
                os.replace(temporary, target)
            elif getattr(args, "rows_written", 0):
                # Keep what an interrupted export wrote, beside (never over) the target:
                # finish it with --cursor and --output pointing at it.
                os.replace(temporary, target + ".partial")
                print(f"(incomplete: kept in {target}.partial)", file=sys.stderr)
            return code
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)

    return handle


def _kinds_text(kinds: Any) -> list[str]:
    return [f"  {k.kind:<7} {k.tokens:>16} tokens in {k.accounts} accounts" for k in kinds]


def _totals_text(totals: Any) -> list[str]:
    lines = [f"  {'reason':<18} {'postings':>10} {'tokens':>14} {'from bank':>14} {'to bank':>14}"]
    lines.extend(
        f"  {_reason_name(t.reason):<18} {t.postings:>10} {t.tokens:>14} {t.from_bank:>14} "
        f"{t.to_bank:>14}"
        for t in totals
    )
    return lines


def plain(message: Any) -> dict[str, Any]:
    """A reply as the JSON the finance commands print: reasons by their ledger names
    (``win``, as in exports), 64-bit integers as JSON integers, times as ISO 8601 UTC, every
    field present (docs/wallet.md, "JSON shapes")."""
    from google.protobuf.timestamp_pb2 import Timestamp

    out: dict[str, Any] = {}
    for f in message.DESCRIPTOR.fields:
        value = getattr(message, f.name)

        def one(v: Any, f: Any = f) -> Any:
            if f.message_type is not None:
                if f.message_type.full_name == Timestamp.DESCRIPTOR.full_name:
                    return _iso(v.ToMilliseconds())
                return plain(v)
            if f.enum_type is not None and f.enum_type.name == "TransferReason":
                return _reason_name(v)
            return v

        if f.is_repeated:
            out[f.name] = [one(v) for v in value]
        elif f.has_presence and not message.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = one(value)
    return out


async def _report(stub: Any, args: argparse.Namespace, md: Any) -> int:
    from kishpa.wallet.v1 import wallet_pb2

    kind = args.report_kind
    if kind in ("month", "period"):
        since, until = args.month if kind == "month" else (args.since, args.until)
        reply = await stub.GetPeriodSummary(
            wallet_pb2.GetPeriodSummaryRequest(since=_stamp(since), until=_stamp(until)),
            metadata=md,
            timeout=600,
        )
        lines = [
            f"period {since.isoformat()} .. {until.isoformat()} (UTC, end exclusive)",
            f"opening outstanding {reply.opening_outstanding} tokens",
            *_kinds_text(reply.opening),
            "movements by reason",
            *_totals_text(reply.movements),
            f"closing outstanding {reply.closing_outstanding} tokens",
            *_kinds_text(reply.closing),
        ]
        net = sum(m.from_bank - m.to_bank for m in reply.movements)
        check = reply.opening_outstanding + net == reply.closing_outstanding
        lines.append(f"opening + issued - returned = closing: {'yes' if check else 'NO'}")
        lines.insert(1, _period_state_text(reply))
    elif kind == "totals":
        reply = await stub.GetReasonTotals(
            wallet_pb2.GetReasonTotalsRequest(since=_stamp(args.since), until=_stamp(args.until)),
            metadata=md,
            timeout=600,
        )
        lines = ["totals by reason", *_totals_text(reply.totals)]
    else:
        reply = await stub.GetBalancesAsOf(
            wallet_pb2.GetBalancesAsOfRequest(as_of=_stamp(args.as_of), accounts=args.accounts),
            metadata=md,
            timeout=600,
        )
        lines = [f"balances as of {args.as_of.isoformat()}"]
        lines.extend(f"  {b.account}\t{b.tokens} tokens\t{b.ils} ILS" for b in reply.balances)
        lines.extend(_kinds_text(reply.kinds))
    if args.json:
        print(json.dumps(plain(reply), indent=2))
    else:
        print("\n".join(lines))
    return 0


def _period_state_text(reply: Any) -> str:
    """Whether a period report is final (the same bytes forever) or still open."""
    if reply.closed:
        months = ", ".join(
            f"{c.month} (closed {_iso(c.close_time.ToMilliseconds())} by {c.closed_by}, chain "
            f"head {c.chain_seq} {c.chain_hash})"
            for c in reply.closes
        )
        return f"CLOSED: final{': ' + months if months else ' (before the first closed month)'}"
    return "OPEN: this period is not closed; its figures may still change"


async def _statement(stub: Any, args: argparse.Namespace, md: Any) -> int:
    from kishpa.wallet.v1 import wallet_pb2

    request = wallet_pb2.GetAccountStatementRequest(account=args.account)
    if args.since:
        request.since.CopyFrom(_stamp(args.since))
    if args.until:
        request.until.CopyFrom(_stamp(args.until))
    out: IO[str] = args.out
    writer = csv.writer(out, lineterminator="\n")
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    since = _iso(_stamp(args.since).ToMilliseconds()) if args.since else ""
    until = _iso(_stamp(args.until).ToMilliseconds()) if args.until else ""

    def emit(values: tuple[Any, ...]) -> None:
        if args.format == "csv":
            writer.writerow(values)
        else:
            out.write(dumps(dict(zip(STATEMENT_COLUMNS, values, strict=True))) + "\n")

    if args.format == "csv":
        writer.writerow(STATEMENT_COLUMNS)
    times, posted = UtcMillis(), UtcMillis()
    names = _REASON_NAMES or _reason_names()
    count = total = 0
    async for chunk in stub.GetAccountStatement(request, metadata=md, timeout=600):
        if count == 0 and not total:
            state = "closed" if chunk.closed else "open"
            emit(
                (
                    "opening",
                    None,
                    None,
                    None,
                    since,
                    None,
                    state,
                    None,
                    None,
                    None,
                    chunk.account,
                    None,
                    chunk.opening_balance,
                )
            )
        for x in chunk.lines:
            emit(
                (
                    "posting",
                    x.transfer_id,
                    x.batch_id,
                    x.seq,
                    times(x.effective_time.ToMilliseconds()),
                    posted(x.posted_time.ToMilliseconds()),
                    names.get(x.reason) or _reason_name(x.reason),
                    x.table_id,
                    x.round if x.HasField("round") else None,
                    x.phase,
                    x.counterparty,
                    x.amount,
                    x.balance,
                )
            )
            total += x.amount
        count += len(chunk.lines)
        if chunk.last:
            emit(
                (
                    "closing",
                    None,
                    None,
                    None,
                    until,
                    None,
                    None,
                    None,
                    None,
                    None,
                    chunk.account,
                    total,
                    chunk.closing_balance,
                )
            )
    out.flush()
    return 0


async def _accounts(stub: Any, args: argparse.Namespace, md: Any) -> int:
    from kishpa.wallet.v1 import wallet_pb2

    token = ""
    while True:
        reply = await stub.ListAccounts(
            wallet_pb2.ListAccountsRequest(kind=args.kind, page_size=1000, page_token=token),
            metadata=md,
            timeout=60,
        )
        for a in reply.accounts:
            if args.json:
                print(
                    json.dumps(
                        {
                            "account": a.account,
                            "kind": a.kind,
                            "tokens": a.balance.tokens,
                            "ils": a.balance.ils,
                        }
                    )
                )
            else:
                print(f"{a.account}\t{a.kind}\t{a.balance.tokens} tokens\t{a.balance.ils} ILS")
        token = reply.next_page_token
        if not token:
            return 0


async def _close(stub: Any, args: argparse.Namespace, md: Any) -> int:
    from kishpa.admin.v1 import admin_pb2, admin_pb2_grpc

    del stub  # closing is an AdminService call, on the same wallet address
    async with wallet_channel() as channel:
        reply = await admin_pb2_grpc.AdminServiceStub(channel).ClosePeriod(
            admin_pb2.ClosePeriodRequest(
                month=args.month,
                reason=args.reason or f"month-end close of {args.month}",
                ticket=args.ticket or f"month-end {args.month}",
                request_id=args.request_id or f"close-{args.month}",
            ),
            metadata=md,
            timeout=60,
        )
    p = reply.period
    if args.json:
        print(json.dumps({**plain(p), "already_closed": reply.already_closed}, indent=2))
        return 0
    verb = "was already closed" if reply.already_closed else "closed"
    print(
        f"{p.month} {verb}: by {p.closed_by} at {_iso(p.close_time.ToMilliseconds())}; "
        f"chain head then {p.chain_seq} {p.chain_hash}"
    )
    return 0


async def _periods(stub: Any, args: argparse.Namespace, md: Any) -> int:
    from kishpa.wallet.v1 import wallet_pb2

    reply = await stub.ListClosedPeriods(
        wallet_pb2.ListClosedPeriodsRequest(), metadata=md, timeout=30
    )
    if args.json:
        print(json.dumps([plain(p) for p in reply.periods], indent=2))
        return 0
    if not reply.periods:
        print("no closed month")
    for p in reply.periods:
        print(
            f"{p.month}\tclosed {_iso(p.close_time.ToMilliseconds())} by {p.closed_by}\t"
            f"chain head {p.chain_seq} {p.chain_hash}"
        )
    return 0


async def _runs(stub: Any, args: argparse.Namespace, md: Any) -> int:
    from kishpa.wallet.v1 import wallet_pb2

    reply = await stub.ListReconciliationRuns(
        wallet_pb2.ListReconciliationRunsRequest(kind=args.kind, page_size=args.limit),
        metadata=md,
        timeout=30,
    )
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "run_id": r.run_id,
                        "kind": r.kind,
                        "scope": r.scope,
                        "source": r.source,
                        "start_time": _iso(r.start_time.ToMilliseconds()),
                        "duration_ms": r.duration.ToMilliseconds(),
                        "ok": r.ok,
                        "discrepancies": r.discrepancies,
                        "mode": _mode(r),
                        "identity": r.identity,
                        "chain_seq": r.chain_seq,
                        "chain_hash": r.chain_hash,
                        "result": json.loads(r.result_json or "{}"),
                    }
                    for r in reply.runs
                ],
                indent=2,
            )
        )
        return 0
    for r in reply.runs:
        verdict = "ok" if r.ok else f"{r.discrepancies} found"
        who = f"{r.identity} via {r.source}" if r.identity else r.source
        print(
            f"#{r.run_id} {_iso(r.start_time.ToMilliseconds())} {r.kind:<6} "
            f"{_mode(r) or '-':<11} {verdict:<10} {r.duration.ToMilliseconds()} ms  {who}: "
            f"{r.scope}"
        )
    return 0


def _mode(run: Any) -> str:
    """``full`` or ``incremental`` for a ledger run, ``""`` for a drift check."""
    try:
        mode = json.loads(run.result_json or "{}").get("mode", "")
    except ValueError:
        return ""
    return mode if isinstance(mode, str) else ""


def _drift(args: argparse.Namespace) -> int:
    import grpc
    import redis
    import sqlalchemy as sa

    from archive.migrate import ArchiveNotMigrated
    from services.common.logging import configure_logging
    from services.common.settings import Settings, SettingsError
    from workers.drift import GrpcSources, format_report, run_drift_check
    from workers.settlement import redis_client

    settings = Settings(service="worker")
    # Log lines (the alertable wallet_drift_found) go to stderr; the report to stdout.
    configure_logging(settings.log_format, settings.log_level, service="drift")
    try:
        sources = GrpcSources(settings)
    except SettingsError as exc:
        print(f"kishpa wallet drift: {exc}", file=sys.stderr)
        return 2
    try:
        report, run_id = run_drift_check(redis_client(), sources, source=args.source)
    except (redis.RedisError, grpc.RpcError, sa.exc.SQLAlchemyError, ArchiveNotMigrated) as exc:
        print(f"kishpa wallet drift: could not check: {exc!r}"[:500], file=sys.stderr)
        return 2
    finally:
        sources.close()
    if args.json:
        print(json.dumps({**report.to_dict(), "run_id": run_id}, indent=2))
    else:
        print(format_report(report, run_id))
    return 0 if report.ok else 1


def record_via_wallet(run: Any) -> int:
    """Store a :class:`services.wallet.runs.Run` through the wallet's RecordReconciliationRun
    (the worker's certificate under mutual TLS, else a service credential from
    ``KISHPA_SERVICE_SECRET``); the stored run's id."""

    from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc

    token = _jobs_credential()
    pb = wallet_pb2.ReconciliationRun(
        kind=run.kind,
        scope=run.scope,
        source=run.source,
        start_time=_stamp(dt.datetime.fromtimestamp(run.started_ms / 1000, tz=dt.UTC)),
        duration=_duration(run.duration_ms),
        ok=run.ok,
        discrepancies=run.discrepancies,
        result_json=json.dumps(run.result, sort_keys=True),
        chain_seq=run.chain_seq or 0,
        chain_hash=run.chain_hash,
    )
    from shared.tls import client_tls_from_env, sync_channel

    with sync_channel(wallet_address(), client_tls_from_env()) as channel:
        reply = wallet_pb2_grpc.WalletServiceStub(channel).RecordReconciliationRun(
            wallet_pb2.RecordReconciliationRunRequest(run=pb),
            metadata=bearer(token),
            timeout=30,
        )
    return int(reply.run_id)
