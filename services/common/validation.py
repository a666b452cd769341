"""The validation layer at the edge: every request of every service is checked here, from
the protobuf descriptors, before any use case runs.

What is checked, for every RPC of every ``kishpa.*`` service (a new RPC is covered without
being listed anywhere):

- the body decodes as the RPC's request message (corrupt wire format and bad UTF-8 are
  ``INVALID_ARGUMENT``/``MALFORMED_REQUEST``, not a traceback) and is at most
  :data:`MAX_REQUEST_BYTES` (:data:`REQUEST_BYTES` per request type);
- every string field is at most :data:`DEFAULT_MAX_CHARS` characters, every repeated field at
  most :data:`DEFAULT_MAX_ITEMS` items, every enum field one of the enum's defined values;
- the field rules of :data:`RULES`, keyed by the field's full proto name: lengths, formats
  (ids, request ids, stream ids, page tokens) and ranges.

A refusal is ``INVALID_ARGUMENT`` with a short message that names the field (never its value)
and an ErrorInfo whose metadata ``field`` is the field's path (``settings.turn_time``,
``postings[3].amount``). The same table renders the reference in ``docs/api.md``
(``python -m services.common.validation`` prints it; a test keeps the two equal).

Why a table here and not protovalidate rules in the protos: protovalidate 2.1.0 installs and
its Rust engine is fast, but its rules must be written as options on every field of the
``.proto`` files (with ``buf/validate/validate.proto`` vendored for the offline build and a
second protobuf runtime, ``protobuf-py``, pulled in). The contract is being reshaped in the
same release; keeping the rules in one table keyed by full field name keeps them in one
reviewable place, and moving them into the protos later is a mechanical translation.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

import grpc
from google.protobuf import descriptor, descriptor_pool, message, message_factory

from kishpa.table.v1 import history_pb2, table_pb2
from services.common.errors import InvalidArgument, abort_with
from services.common.handlers import wrap_handler
from services.common.logging import get_logger

DEFAULT_MAX_CHARS: Final = 256
"""Any string field without a rule of its own."""
DEFAULT_MAX_ITEMS: Final = 128
"""Any repeated field without a rule of its own."""
MAX_REQUEST_BYTES: Final = 64 * 1024
"""Any request body without a limit of its own (:data:`REQUEST_BYTES`)."""
MAX_UINT64: Final = 2**64 - 1
MAX_INT64: Final = 2**63 - 1

_PRINTABLE_ASCII = re.compile(r"[\x21-\x7e]*")
_ID = re.compile(r"[A-Za-z0-9._:-]*")
_STREAM_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")
_PAGE_TOKEN = re.compile(r"[A-Za-z0-9_=-]*")


@dataclass(frozen=True, slots=True)
class Text:
    """A string field: length bounds (characters) and an optional format."""

    max_chars: int = DEFAULT_MAX_CHARS
    min_chars: int = 0
    pattern: re.Pattern[str] | None = None
    format_name: str = ""
    reason: str = "INVALID_FIELD"
    stream_id: bool = False

    def describe(self) -> str:
        """The rule in words, for the docs."""
        size = (
            f"{self.min_chars}-{self.max_chars} characters"
            if self.min_chars
            else f"at most {self.max_chars} characters"
        )
        if self.stream_id:
            return f"empty or a stream id `<ms>-<seq>` (two unsigned 64-bit numbers); {size}"
        return f"{size}{', ' + self.format_name if self.format_name else ''}"


@dataclass(frozen=True, slots=True)
class Number:
    """An integer field: ``low``..``high`` inclusive, or 0 (the default) when allowed."""

    low: int
    high: int
    zero_ok: bool = False
    reason: str = "INVALID_FIELD"

    def describe(self) -> str:
        """The rule in words, for the docs."""
        text = f"{self.low}-{self.high}"
        return f"0 (the default) or {text}" if self.zero_ok and self.low > 0 else text


@dataclass(frozen=True, slots=True)
class Items:
    """A repeated field: at most ``max_items`` items (each item checked by its own rule)."""

    max_items: int
    reason: str = "INVALID_FIELD"

    def describe(self) -> str:
        """The rule in words, for the docs."""
        return f"at most {self.max_items} items"


@dataclass(frozen=True, slots=True)
class Span:
    """A ``google.protobuf.Duration`` field: a valid duration within ``low_ms``..``high_ms``
    (zero, meaning the server default, when ``zero_ok``), whole seconds when asked."""

    low_ms: int
    high_ms: int
    zero_ok: bool = False
    whole_seconds: bool = False
    reason: str = "INVALID_FIELD"

    def describe(self) -> str:
        """The rule in words, for the docs."""
        if self.whole_seconds:
            text = f"a Duration of {self.low_ms // 1000} s-{self.high_ms // 1000} s"
        else:
            text = f"a Duration of {self.low_ms} ms-{self.high_ms} ms"
        if self.whole_seconds:
            text += ", whole seconds"
        return f"unset or 0 (the default), else {text}" if self.zero_ok else text


Rule = Text | Number | Items | Span

_MAX_NANOS = 999_999_999


def _request_id(max_chars: int) -> Text:
    return Text(max_chars, 0, _PRINTABLE_ASCII, "printable ASCII, no spaces", "BAD_REQUEST_ID")


PLAYER_REQUEST_ID = _request_id(64)
"""A client-chosen idempotency key (a UUID fits); services prefix it when they call others."""
TABLE_ID = Text(64, 1, _ID, "letters, digits and `._:-`", "BAD_TABLE_ID")
PLAYER_ID = Text(64, 0, _ID, "letters, digits and `._:-`", "BAD_PLAYERS")
CLIENT_SEED = Text(64, 0, None, "", "BAD_CLIENT_SEED")
ACCOUNT = Text(80, 0, _ID, "`player:<id>`, `bowl:<table>`, `pot:<table>` or `bank`")
TILE_ID = Number(0, 255, reason="MALFORMED_TILE")
TILE_LIST = Items(106)


def _table_requests_with(field: str, but: tuple[str, ...] = ()) -> list[str]:
    """The request types of the ``TableService`` RPCs (all but ``but``) that have ``field``."""
    service = table_pb2.DESCRIPTOR.services_by_name["TableService"]
    return [
        m.input_type.full_name
        for m in service.methods
        if field in m.input_type.fields_by_name and m.name not in but
    ]


_T = "kishpa.table.v1."
_M = "kishpa.matchmaking.v1."
_W = "kishpa.wallet.v1."
_A = "kishpa.auth.v1."

RULES: Final[Mapping[str, Rule]] = MappingProxyType(
    {
        # -- auth
        _A + "LoginRequest.display_name": Text(64, reason="INVALID_DISPLAY_NAME"),
        _A + "LoginRequest.device_id": Text(
            128, 0, _PRINTABLE_ASCII, "printable ASCII, no spaces", "INVALID_DEVICE_ID"
        ),
        _A + "LoginRequest.request_id": PLAYER_REQUEST_ID,
        # -- table: settings (0 means the server default)
        _T + "TableSettings.seats": Number(2, 4, zero_ok=True, reason="BAD_SEATS"),
        _T + "TableSettings.turn_time": Span(
            1000, 600_000, zero_ok=True, whole_seconds=True, reason="BAD_TURN_SECONDS"
        ),
        _T + "TableSettings.reveal_window": Span(
            1000, 600_000, zero_ok=True, whole_seconds=True, reason="BAD_WINDOW_SECONDS"
        ),
        _T + "TableSettings.next_round_pause": Span(0, 60_000, reason="BAD_PAUSE"),
        _T + "TableSettings.bot_pause": Span(0, 5000, reason="BAD_PAUSE"),
        # Stakes: the services refuse any stake they do not offer (BAD_STAKE, naming the list).
        # -- table: requests
        # Every table request that names a table or carries an idempotency key, read off the
        # service's descriptor (a new RPC is covered without being listed here).
        **{f"{name}.table_id": TABLE_ID for name in _table_requests_with("table_id")},
        # Matchmaking prefixes a player's 64-character request id when it calls the table;
        # CloseTable carries an operator's request id, checked by the admin service.
        **{
            f"{name}.request_id": _request_id(128)
            for name in _table_requests_with("request_id", but=("CloseTable",))
        },
        _T + "CreateTableRequest.client_seed": CLIENT_SEED,
        _T + "JoinTableRequest.client_seed": CLIENT_SEED,
        # -- history (the round archive; history_pb2 registers these request types)
        _T + "ListTableRoundsRequest.table_id": TABLE_ID,
        _T + "ListPlayerGamesRequest.player_id": PLAYER_ID,
        **{
            _T + f"{name}.page_token": Text(
                200, 0, _PAGE_TOKEN, "a token from next_page_token", "BAD_PAGE_TOKEN"
            )
            for name in (
                history_pb2.ListPlayerGamesRequest.DESCRIPTOR.name,
                history_pb2.ListTableRoundsRequest.DESCRIPTOR.name,
            )
        },
        _T + "ContributeRequest.contribution": Text(64, 1, None, "", "BAD_CONTRIBUTION"),
        _T + "ReadyRequest.round": Number(1, 1_000_000, reason="BAD_ROUND"),
        _T + "CreateTableRequest.players": Items(4, reason="BAD_PLAYERS"),
        _T + "SeatedPlayer.player_id": PLAYER_ID,
        _T + "SeatedPlayer.display_name": Text(64, reason="INVALID_DISPLAY_NAME"),
        _T + "SeatedPlayer.client_seed": CLIENT_SEED,
        _T + "JoinTableRequest.display_name": Text(64, reason="INVALID_DISPLAY_NAME"),
        _T + "JoinTableRequest.player_id": PLAYER_ID,
        _T + "WatchTableRequest.after_event_id": Text(41, reason="BAD_EVENT_ID", stream_id=True),
        _T + "DiscardRequest.tile_id": TILE_ID,
        _T + "WinRequest.discard_tile_id": TILE_ID,
        _T + "WinRequest.arrangement": Items(15),
        _T + "ProposedGroup.tile_ids": Items(15),
        _T + "ProposedGroup.tile_ids[]": TILE_ID,
        _T + "SetRackOrderRequest.tile_ids": Items(106, reason="BAD_RACK_ORDER"),
        _T + "SetRackOrderRequest.tile_ids[]": Number(0, 255, reason="BAD_RACK_ORDER"),
        _T + "LayMeldsRequest.melds": Items(20, reason="BAD_MELDS"),
        _T + "ProposedMeld.tile_ids": Items(20, reason="BAD_MELDS"),
        _T + "ProposedMeld.tile_ids[]": TILE_ID,
        _T + "LayOffRequest.meld_id": Number(0, 1000),
        _T + "LayOffRequest.tile_id": TILE_ID,
        _T + "ReleaseJokerRequest.meld_id": Number(0, 1000),
        _T + "ReleaseJokerRequest.tile_ids": Items(4),
        _T + "ReleaseJokerRequest.tile_ids[]": TILE_ID,
        # -- matchmaking
        **{
            _M + f"{name}Request.request_id": PLAYER_REQUEST_ID
            for name in ("JoinQueue", "CancelQueue", "CreatePrivateTable", "JoinByCode")
        },
        _M + "JoinQueueRequest.seats": Number(2, 4, zero_ok=True, reason="BAD_SEATS"),
        **{
            _M + f"{name}Request.client_seed": CLIENT_SEED
            for name in ("JoinQueue", "CreatePrivateTable", "JoinByCode")
        },
        _M + "CancelQueueRequest.ticket_id": Text(64, 1, _ID, "an id", "BAD_TICKET_ID"),
        _M + "WatchQueueRequest.ticket_id": Text(64, 1, _ID, "an id", "BAD_TICKET_ID"),
        # A wrong or empty code is NOT_FOUND (INVITE_NOT_FOUND), as people mistype them.
        _M + "JoinByCodeRequest.invite_code": Text(32),
        # -- wallet
        _W + "OpenWalletRequest.player_id": PLAYER_ID,
        _W + "GetBalanceRequest.account": ACCOUNT,
        _W + "LoadTokensRequest.request_id": _request_id(64),
        _W + "ListTransfersRequest.account": ACCOUNT,
        _W + "ListTransfersRequest.table_id": Text(64, 0, _ID, "an id"),
        _W + "ListTransfersRequest.round": Number(0, 2**31 - 1),
        _W + "ListTransfersRequest.page_size": Number(0, 500, reason="INVALID_PAGE_SIZE"),
        _W + "ListTransfersRequest.page_token": Text(
            64, 0, _PAGE_TOKEN, "a token from next_page_token", "INVALID_PAGE_TOKEN"
        ),
        # The idempotency-key column holds 200 characters.
        _W + "ApplyBatchRequest.request_id": _request_id(200),
        _W + "ApplyBatchRequest.postings": Items(1000, reason="TOO_MANY_POSTINGS"),
        _W + "ApplyBatchesRequest.batches": Items(256, reason="INVALID_BATCH_COUNT"),
        _W + "Posting.from_account": ACCOUNT,
        _W + "Posting.to_account": ACCOUNT,
        _W + "Posting.amount": Number(1, 10**12, reason="INVALID_AMOUNT"),
        _W + "Posting.table_id": Text(64, 0, _ID, "an id"),
        _W + "Posting.round": Number(0, 2**31 - 1),
        _W + "Posting.phase": Text(16, 0, _ID, "a phase name"),
        # -- wallet: finance
        _W + "ExportTransfersRequest.account": ACCOUNT,
        _W + "ExportTransfersRequest.table_id": Text(64, 0, _ID, "an id"),
        _W + "ExportTransfersRequest.cursor": Text(
            80, 0, _PAGE_TOKEN, "a cursor from a previous chunk", "INVALID_CURSOR"
        ),
        _W + "ExportTransfersRequest.chunk_size": Number(0, 5000, reason="INVALID_CHUNK_SIZE"),
        _W + "GetBalancesAsOfRequest.accounts": Items(100, reason="TOO_MANY_ACCOUNTS"),
        _W + "GetBalancesAsOfRequest.accounts[]": ACCOUNT,
        _W + "GetTableLedgerRequest.table_id": Text(64, 0, _ID, "an id"),
        _W + "GetTableLedgerRequest.rounds": Items(100),
        _W + "GetTableLedgerRequest.rounds[]": Number(0, 2**31 - 1),
        _W + "ListTableAccountsRequest.page_size": Number(0, 1000, reason="INVALID_PAGE_SIZE"),
        _W + "ListTableAccountsRequest.page_token": Text(
            200, 0, _PAGE_TOKEN, "a token from next_page_token", "INVALID_PAGE_TOKEN"
        ),
        _W + "ListReconciliationRunsRequest.kind": Text(16, 0, _ID, "ledger or drift"),
        _W + "ListReconciliationRunsRequest.page_size": Number(0, 500, reason="INVALID_PAGE_SIZE"),
        _W + "ListReconciliationRunsRequest.page_token": Text(
            64, 0, _PAGE_TOKEN, "a token from next_page_token", "INVALID_PAGE_TOKEN"
        ),
        # A run's JSON lists its first differences, each with what to do.
        _W + "ReconciliationRun.result_json": Text(200_000),
        _W + "ReconciliationRun.chain_hash": Text(64, 0, _ID, "64 hex digits"),
        # -- wallet: finance step 2
        _W + "GetAccountStatementRequest.account": ACCOUNT,
        _W + "GetAccountStatementRequest.chunk_size": Number(
            0, 10_000, reason="INVALID_CHUNK_SIZE"
        ),
        _W + "ListAccountsRequest.kind": Text(16, 0, _ID, "player, bowl, pot or bank"),
        _W + "ListAccountsRequest.page_size": Number(0, 1000, reason="INVALID_PAGE_SIZE"),
        _W + "ListAccountsRequest.page_token": Text(
            200, 0, _PAGE_TOKEN, "a token from next_page_token", "INVALID_PAGE_TOKEN"
        ),
    }
)
"""Field rules by full proto field name; ``<field>[]`` is the rule of each item."""

REQUEST_BYTES: Final[Mapping[str, int]] = MappingProxyType(
    # ApplyBatches: up to 256 batches of a few postings, within the server's 1 MiB receive cap.
    {
        _W + "ApplyBatchRequest": 512 * 1024,
        _W + "ApplyBatchesRequest": 1024 * 1024,
        _W + "RecordReconciliationRunRequest": 1024 * 1024,
    }
)
"""Request-size limits other than :data:`MAX_REQUEST_BYTES`, by message full name."""


def _refuse(path: str, what: str, reason: str) -> InvalidArgument:
    return InvalidArgument(reason, f"{path}: {what}", {"field": path})


def _check_text(value: str, rule: Text, path: str) -> None:
    if len(value) > rule.max_chars:
        raise _refuse(path, f"must be at most {rule.max_chars} characters", rule.reason)
    if len(value) < rule.min_chars:
        raise _refuse(path, "is required", rule.reason)
    if not value:
        return
    if rule.stream_id:
        match = _STREAM_ID.fullmatch(value)
        if match is None or any(int(part) > MAX_UINT64 for part in match.groups()):
            raise _refuse(path, "must be a stream id like '1700000000000-0'", rule.reason)
    elif rule.pattern is not None and not rule.pattern.fullmatch(value):
        raise _refuse(path, f"must be {rule.format_name}", rule.reason)


def _check_number(value: int, rule: Number, path: str) -> None:
    if rule.zero_ok and value == 0:
        return
    if not rule.low <= value <= rule.high:
        raise _refuse(path, f"must be {rule.describe()}", rule.reason)


def _check_span(value: message.Message, rule: Span, path: str) -> None:
    seconds, nanos = int(getattr(value, "seconds", 0)), int(getattr(value, "nanos", 0))
    valid = abs(nanos) <= _MAX_NANOS and not (seconds > 0 > nanos or seconds < 0 < nanos)
    if not valid:
        raise _refuse(path, "is not a valid Duration", rule.reason)
    if rule.zero_ok and seconds == 0 and nanos == 0:
        return
    if rule.whole_seconds and nanos:
        raise _refuse(path, "must be whole seconds", rule.reason)
    total_ms = seconds * 1000 + nanos // 1_000_000
    if not rule.low_ms <= total_ms <= rule.high_ms:
        raise _refuse(path, f"must be {rule.describe()}", rule.reason)


def _check_scalar(
    value: Any, field: descriptor.FieldDescriptor, rule: Rule | None, path: str
) -> None:
    if field.type == descriptor.FieldDescriptor.TYPE_STRING:
        _check_text(value, rule if isinstance(rule, Text) else Text(), path)
    elif field.enum_type is not None:
        if field.enum_type.values_by_number.get(value) is None:
            reason = rule.reason if rule is not None else "INVALID_FIELD"
            raise _refuse(path, f"is not a {field.enum_type.name} value", reason)
    elif field.type == descriptor.FieldDescriptor.TYPE_BYTES:
        if len(value) > DEFAULT_MAX_CHARS:
            raise _refuse(path, f"must be at most {DEFAULT_MAX_CHARS} bytes", "INVALID_FIELD")
    elif isinstance(rule, Number) and not isinstance(value, bool | float):
        _check_number(int(value), rule, path)


def check_message(msg: message.Message, path: str = "") -> None:
    """Raise ``InvalidArgument`` for the first field of ``msg`` that breaks its rule."""
    for field, value in msg.ListFields():
        name = f"{path}.{field.name}" if path else field.name
        rule = RULES.get(field.full_name)
        if field.is_repeated:
            limit = rule.max_items if isinstance(rule, Items) else DEFAULT_MAX_ITEMS
            if len(value) > limit:
                reason = rule.reason if isinstance(rule, Items) else "INVALID_FIELD"
                raise _refuse(name, f"must have at most {limit} items", reason)
            item_rule = RULES.get(field.full_name + "[]")
            for index, item in enumerate(value):
                item_path = f"{name}[{index}]"
                if field.type == descriptor.FieldDescriptor.TYPE_MESSAGE:
                    check_message(item, item_path)
                else:
                    _check_scalar(item, field, item_rule, item_path)
        elif isinstance(rule, Span):
            _check_span(value, rule, name)
        elif field.type == descriptor.FieldDescriptor.TYPE_MESSAGE:
            check_message(value, name)
        else:
            _check_scalar(value, field, rule, name)
    for unset in _refused_when_unset(msg.DESCRIPTOR):
        # A field left at its default is not listed by ListFields: required ids and numbers
        # whose range excludes 0 are checked here.
        if not msg.HasField(unset.name) if unset.has_presence else not getattr(msg, unset.name):
            rule = RULES[unset.full_name]
            name = f"{path}.{unset.name}" if path else unset.name
            if isinstance(rule, Text):
                raise _refuse(name, "is required", rule.reason)
            raise _refuse(name, f"must be {rule.describe()}", rule.reason)


@functools.cache
def _refused_when_unset(desc: descriptor.Descriptor) -> tuple[descriptor.FieldDescriptor, ...]:
    out = []
    for field in desc.fields:
        rule = RULES.get(field.full_name)
        if field.is_repeated or rule is None:
            continue
        required = isinstance(rule, Text) and rule.min_chars > 0
        nonzero = isinstance(rule, Number) and not rule.zero_ok and not rule.low <= 0 <= rule.high
        if required or nonzero:
            out.append(field)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RequestType:
    """The request message of one RPC and its size limit."""

    message_class: type[message.Message]
    max_bytes: int
    checked: bool


def request_type(method: str) -> RequestType | None:
    """The request type of ``/pkg.Service/Method`` from the descriptor pool (None if unknown)."""
    service_name, _, method_name = method.lstrip("/").partition("/")
    try:
        service = descriptor_pool.Default().FindServiceByName(service_name)
    except KeyError:
        return None
    method_desc = service.methods_by_name.get(method_name)
    if method_desc is None:
        return None
    input_type = method_desc.input_type
    return RequestType(
        message_factory.GetMessageClass(input_type),
        REQUEST_BYTES.get(input_type.full_name, MAX_REQUEST_BYTES),
        checked=service_name.startswith("kishpa."),
    )


class Undecodable:
    """Stands for a request body that could not be decoded (refused before any use case)."""

    __slots__ = ("refusal",)

    def __init__(self, refusal: InvalidArgument) -> None:
        self.refusal = refusal


def safe_deserializer(decode: Callable[[bytes], Any], max_bytes: int) -> Callable[[bytes], Any]:
    """``decode`` that answers :class:`Undecodable` instead of raising (grpc would answer
    ``UNKNOWN`` naming a Python class and log a traceback)."""

    def deserialize(data: bytes) -> Any:
        if len(data) > max_bytes:
            return Undecodable(
                InvalidArgument(
                    "REQUEST_TOO_LARGE", f"the request is larger than {max_bytes} bytes"
                )
            )
        try:
            return decode(data)
        except Exception:  # DecodeError, and bad UTF-8 in a string field
            return Undecodable(
                InvalidArgument(
                    "MALFORMED_REQUEST", "the request is not a valid message of this RPC"
                )
            )

    return deserialize


_log = get_logger(__name__)
_fingerprint: ContextVar[str] = ContextVar("kishpa_request_fingerprint", default="")


def request_fingerprint() -> str:
    """What the current request is (its RPC and exact body), hashed: two requests with the
    same ``request_id`` but different fingerprints are a reused key (``ALREADY_EXISTS``).
    Empty outside an RPC (timers, tests calling use cases directly): nothing to compare."""
    return _fingerprint.get()


def fingerprint_of(method: str, request: message.Message) -> str:
    """The fingerprint of ``request`` sent to ``method``."""
    digest = hashlib.sha256(method.encode())
    digest.update(b"\0")
    digest.update(request.SerializeToString(deterministic=True))
    return digest.hexdigest()[:32]


class ValidationInterceptor(grpc.aio.ServerInterceptor):
    """Decodes safely and checks every request against :data:`RULES` (module docstring)."""

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        method: str = handler_call_details.method
        known = request_type(method)
        max_bytes = known.max_bytes if known is not None else MAX_REQUEST_BYTES
        checked = known is not None and known.checked

        async def check(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            refusal: InvalidArgument | None = None
            if isinstance(request, Undecodable):
                refusal = request.refusal
            elif checked and isinstance(request, message.Message):
                try:
                    check_message(request)
                except InvalidArgument as exc:
                    refusal = exc
                else:
                    _fingerprint.set(fingerprint_of(method, request))
            if refusal is not None:
                _log.info("rpc.invalid_request", method=method, reason=refusal.reason)
                await abort_with(context, refusal)

        return wrap_handler(
            handler,
            method,
            _nothing_around,
            before=check,
            deserializer=safe_deserializer(handler.request_deserializer, max_bytes),
        )


@contextlib.asynccontextmanager
async def _nothing_around(
    method: str, context: grpc.aio.ServicerContext[Any, Any]
) -> AsyncIterator[None]:
    yield


# -- the reference, rendered for docs/api.md ----------------------------------------------


def _kishpa_requests() -> Iterator[descriptor.Descriptor]:
    import kishpa.auth.v1.auth_pb2
    import kishpa.matchmaking.v1.matchmaking_pb2
    import kishpa.table.v1.history_pb2
    import kishpa.table.v1.table_pb2
    import kishpa.wallet.v1.wallet_pb2

    seen: set[str] = set()
    for module in (
        kishpa.auth.v1.auth_pb2,
        kishpa.matchmaking.v1.matchmaking_pb2,
        kishpa.table.v1.table_pb2,
        kishpa.table.v1.history_pb2,
        kishpa.wallet.v1.wallet_pb2,
    ):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                stack = [method.input_type]
                while stack:
                    desc = stack.pop()
                    if desc.full_name in seen:
                        continue
                    seen.add(desc.full_name)
                    yield desc
                    stack.extend(
                        f.message_type
                        for f in desc.fields
                        if f.message_type is not None
                        and f.message_type.full_name.startswith("kishpa.")
                    )


def reference_markdown() -> str:
    """The table of every request field's rule (what docs/api.md shows)."""
    lines = [
        "| field | rule | reason |",
        "|---|---|---|",
    ]
    for desc in sorted(_kishpa_requests(), key=lambda d: d.full_name):
        for field in desc.fields:
            name = f"`{desc.full_name.removeprefix('kishpa.')}.{field.name}`"
            rule = RULES.get(field.full_name)
            item = RULES.get(field.full_name + "[]")
            repeated = field.is_repeated
            parts: list[str] = []
            reason = "INVALID_FIELD"
            if repeated:
                items = rule.max_items if isinstance(rule, Items) else DEFAULT_MAX_ITEMS
                parts.append(f"at most {items} items")
                reason = rule.reason if rule is not None else reason
                rule = item
            if isinstance(rule, Span):
                parts.append(rule.describe())
            elif field.type == descriptor.FieldDescriptor.TYPE_MESSAGE:
                if not repeated:
                    continue
                parts.append("each item checked by its own rules")
            elif field.enum_type is not None:
                parts.append(f"a defined `{field.enum_type.name}` value")
            elif field.type == descriptor.FieldDescriptor.TYPE_STRING:
                parts.append((rule if isinstance(rule, Text) else Text()).describe())
            elif isinstance(rule, Number):
                parts.append(rule.describe())
            else:
                continue
            if rule is not None and (not repeated or reason == "INVALID_FIELD"):
                reason = rule.reason
            lines.append(f"| {name} | {'; '.join(parts)} | `{reason}` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference_markdown())
