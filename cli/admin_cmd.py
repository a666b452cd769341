"""``kishpa admin``: the audited operator commands (kishpa.admin.v1 on the wallet service).

Every command signs in as an operator: ``--token`` or ``KISHPA_ADMIN_TOKEN`` (the identity
provider's token with the operator's roles: production), else a token of a development
issuer minted here in the name of ``--as`` (default: the login name) with ``--role``: the
``kishpa run --tls`` issuer's key (``KISHPA_DEV_ISSUER_KEY_FILE``, from ``var/tls/
operator.env``), or under plain ``make run`` the shared ``KISHPA_SERVICE_SECRET``. Production
services accept neither development issuer. Money moves only
as wallet batches of their own reason, and each action is written to the audit log with its
reason and ticket (``kishpa admin audit`` lists it). A mutation prints its request id: run
it again with ``--request-id`` to retry it without doing it twice.

Exit status: 0 done, 1 refused (the message says why), 2 not signed in or unreachable.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from cli.wallet_rpc import bearer, refused, signed_in, wallet_channel

NEEDED_ROLE = {"credit": "finance", "debit": "finance", "approve": "finance", "close-table": "ops"}
"""The operator role each mutating command needs (services/common/access.py)."""


def register(subparsers: Any) -> None:
    """Add the ``admin`` command group to the ``kishpa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "admin", help="audited operator actions: credit, debit, close a table, read the audit log"
    )
    parser.add_argument("--token", default="", help="admin token (default KISHPA_ADMIN_TOKEN)")
    parser.add_argument(
        "--as", dest="operator", default="", help="operator id when minting a token here"
    )
    parser.add_argument(
        "--role",
        dest="roles",
        action="append",
        choices=("support", "finance", "ops"),
        help="operator role of a token minted here (repeatable; default: the one the "
        "command needs: finance for credit/debit/approve, ops for close-table, else support)",
    )
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")
    commands = parser.add_subparsers(dest="admin_command", required=True, metavar="COMMAND")

    def justified(cmd: argparse.ArgumentParser) -> None:
        cmd.add_argument("--reason", required=True, help="why (recorded in the audit log)")
        cmd.add_argument("--ticket", required=True, help="support ticket / incident reference")
        cmd.add_argument("--request-id", default="", help="retry an earlier call with its id")

    for name, what in (("credit", "credit a player from the bank"), ("debit", "debit a player")):
        cmd = commands.add_parser(name, help=what)
        cmd.add_argument("--player", required=True)
        cmd.add_argument("--amount", type=int, required=True, help="whole tokens")
        justified(cmd)
        cmd.set_defaults(handler=_handler(_credit if name == "credit" else _debit))

    approve = commands.add_parser(
        "approve", help="approve a credit or debit above the threshold (another operator's)"
    )
    approve.add_argument("--request-id", required=True, help="the request id to approve")
    approve.add_argument("--reason", required=True, help="why you agree (audit log)")
    approve.add_argument("--ticket", required=True, help="support ticket / incident reference")
    approve.set_defaults(handler=_handler(_approve))

    close = commands.add_parser(
        "close-table", help="close a stuck table and refund its bowl or pot to who paid it"
    )
    close.add_argument("--table", required=True)
    justified(close)
    close.set_defaults(handler=_handler(_close))

    tables = commands.add_parser("tables", help="the tables a player moved tokens at")
    tables.add_argument("--player", required=True)
    tables.set_defaults(handler=_handler(_tables))

    transfers = commands.add_parser("transfers", help="a player's transfers, newest first")
    transfers.add_argument("--player", required=True)
    transfers.add_argument("--table", default="")
    transfers.add_argument("--limit", type=int, default=50)
    transfers.set_defaults(handler=_handler(_transfers))

    audit = commands.add_parser("audit", help="the audit log, newest first")
    audit.add_argument("--player", default="")
    audit.add_argument("--table", default="")
    audit.add_argument("--limit", type=int, default=50)
    audit.set_defaults(handler=_handler(_audit))

    token = commands.add_parser(
        "token", help="print a development operator token (needs a development issuer's key)"
    )
    token.set_defaults(handler=_print_token)


class _NoToken(LookupError):
    pass


def _token(args: argparse.Namespace) -> str:
    token: str = args.token or os.environ.get("KISHPA_ADMIN_TOKEN", "")
    if token:
        return token
    operator = args.operator or getpass.getuser()
    roles = args.roles or [NEEDED_ROLE.get(args.admin_command, "support")]
    issuer_key = os.environ.get("KISHPA_DEV_ISSUER_KEY_FILE", "")
    if issuer_key:
        from pathlib import Path

        from cli.devpki import DEV_AUDIENCE, dev_operator_token

        audience = os.environ.get("KISHPA_OIDC_AUDIENCE", "") or DEV_AUDIENCE
        return dev_operator_token(Path(issuer_key), operator, roles, audience=audience)
    secret = os.environ.get("KISHPA_SERVICE_SECRET", "")
    if not secret:
        raise _NoToken(
            "no operator token: pass --token or set KISHPA_ADMIN_TOKEN (your identity "
            "provider's token); for development, source var/tls/operator.env (kishpa run "
            "--tls) or run where KISHPA_SERVICE_SECRET is set (make run), with --as <your id>"
        )
    from services.common.auth import TokenAuthority

    return TokenAuthority(None, secret).issue_admin_token(operator, operator, roles=roles).token


def _print_token(args: argparse.Namespace) -> int:
    try:
        print(_token(args))
    except _NoToken as exc:
        print(f"kishpa admin: {exc}", file=sys.stderr)
        return 2
    return 0


Call = Callable[[Any, argparse.Namespace, Any], Awaitable[Any]]


def _handler(call: Call) -> Callable[[argparse.Namespace], int]:
    return signed_in("kishpa admin", _token, lambda args, token: _run(call, args, token))


async def _run(call: Call, args: argparse.Namespace, token: str) -> int:
    import grpc
    from google.protobuf.json_format import MessageToDict

    from kishpa.admin.v1 import admin_pb2_grpc

    async with wallet_channel() as channel:
        stub = admin_pb2_grpc.AdminServiceStub(channel)
        try:
            response = await call(stub, args, bearer(token))
        except grpc.aio.AioRpcError as exc:
            return refused("kishpa admin", exc, as_json=args.json)
    if args.json:
        print(json.dumps(MessageToDict(response, preserving_proto_field_name=True)))
    else:
        _show(args, response)
    return 0


def _request_id(args: argparse.Namespace) -> str:
    rid: str = args.request_id or uuid.uuid4().hex
    args.request_id = rid
    return rid


async def _credit(stub: Any, args: argparse.Namespace, md: Any) -> Any:
    from kishpa.admin.v1 import admin_pb2

    request = admin_pb2.CreditPlayerRequest(
        player_id=args.player,
        amount=args.amount,
        reason=args.reason,
        ticket=args.ticket,
        request_id=_request_id(args),
    )
    return await stub.CreditPlayer(request, metadata=md, timeout=30)


async def _debit(stub: Any, args: argparse.Namespace, md: Any) -> Any:
    from kishpa.admin.v1 import admin_pb2

    request = admin_pb2.DebitPlayerRequest(
        player_id=args.player,
        amount=args.amount,
        reason=args.reason,
        ticket=args.ticket,
        request_id=_request_id(args),
    )
    return await stub.DebitPlayer(request, metadata=md, timeout=30)


async def _approve(stub: Any, args: argparse.Namespace, md: Any) -> Any:
    from kishpa.admin.v1 import admin_pb2

    request = admin_pb2.ApproveAdjustmentRequest(
        request_id=args.request_id, reason=args.reason, ticket=args.ticket
    )
    return await stub.ApproveAdjustment(request, metadata=md, timeout=30)


async def _close(stub: Any, args: argparse.Namespace, md: Any) -> Any:
    from kishpa.admin.v1 import admin_pb2

    request = admin_pb2.CloseTableRequest(
        table_id=args.table, reason=args.reason, ticket=args.ticket, request_id=_request_id(args)
    )
    print(f"request id {args.request_id}", file=sys.stderr)
    return await stub.CloseTable(request, metadata=md, timeout=60)


async def _tables(stub: Any, args: argparse.Namespace, md: Any) -> Any:
    from kishpa.admin.v1 import admin_pb2

    return await stub.ListPlayerTables(
        admin_pb2.ListPlayerTablesRequest(player_id=args.player), metadata=md, timeout=30
    )


async def _transfers(stub: Any, args: argparse.Namespace, md: Any) -> Any:
    from kishpa.admin.v1 import admin_pb2

    request = admin_pb2.ListPlayerTransfersRequest(
        player_id=args.player, table_id=args.table, page_size=args.limit
    )
    return await stub.ListPlayerTransfers(request, metadata=md, timeout=30)


async def _audit(stub: Any, args: argparse.Namespace, md: Any) -> Any:
    from kishpa.admin.v1 import admin_pb2

    request = admin_pb2.ListAuditEntriesRequest(
        player_id=args.player, table_id=args.table, page_size=args.limit
    )
    return await stub.ListAuditEntries(request, metadata=md, timeout=30)


def _entry_line(e: Any) -> str:
    from kishpa.admin.v1 import admin_pb2

    action = admin_pb2.AdminAction.Name(e.action).removeprefix("ADMIN_ACTION_").lower()
    target = e.player_id or e.table_id
    when = e.create_time.ToDatetime().strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"#{e.entry_id} {when} {e.admin_id} {action} {target} amount={e.amount} "
        f"batch={e.batch_id} ticket={e.ticket} reason={e.reason!r}"
    )


def _show(args: argparse.Namespace, response: Any) -> None:
    command = args.admin_command
    if command in ("credit", "debit"):
        print(_entry_line(response.entry))
        if response.pending_approval:
            print(
                f"above the approval threshold: nothing moved yet; another operator runs "
                f"`kishpa admin approve --request-id {args.request_id} ...`"
            )
        print(f"balance of {args.player}: {response.balance} (request id {args.request_id})")
    elif command == "approve":
        print(_entry_line(response.entry))
        print(f"balance of {response.entry.player_id}: {response.balance}")
    elif command == "close-table":
        for entry in response.entries:
            print(_entry_line(entry))
        for refund in response.refunds:
            print(f"refund {refund.amount} from {refund.from_account} to {refund.player_id}")
        if not response.refunds:
            print("nothing to refund (the bowl/pot was empty)")
    elif command == "tables":
        for t in response.tables:
            last = t.last_time.ToDatetime().strftime("%Y-%m-%d %H:%M:%S")
            print(f"{t.table_id}  rounds={t.rounds}  net={t.net:+d}  last={last}")
    elif command == "transfers":
        from sdk.events import reason_text

        print(f"balance of {args.player}: {response.balance}")
        for t in response.transfers:
            p = t.posting
            print(
                f"#{t.transfer_id} batch={t.batch_id} {p.from_account} -> {p.to_account} "
                f"{p.amount} {reason_text(p.reason)} table={p.table_id or '-'} round={p.round}"
            )
    elif command == "audit":
        for entry in response.entries:
            print(_entry_line(entry))
