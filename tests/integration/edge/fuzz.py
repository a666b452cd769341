"""The fuzz harness: every RPC of every Kishpa service, enumerated from the servers'
descriptors, gets a seeded corpus of bad bodies, bad fields and bad credentials.

``run_corpus`` returns findings (never raises for a bad answer), so the suite can assert there
are none and a test of the test can assert a crippled validation layer is caught.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
from google.protobuf import descriptor, descriptor_pool, message, message_factory

from services.common.auth import bearer_metadata
from services.common.errors import MAX_MESSAGE_CHARS, error_reason
from services.common.validation import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_ITEMS,
    RULES,
    Items,
    Number,
    Span,
    Text,
)

DEADLINE_S = 5.0
PUBLIC = frozenset({"/kishpa.auth.v1.AuthService/Login"})

CORRUPT_BODIES: dict[str, bytes] = {
    "truncated varint": b"\x08\xff\xff\xff",
    "bad wire type": b"\x0f\x01",
    "length past the end": b"\x0a\x10abc",
    "deep garbage": bytes(range(256)) * 4,
}


@dataclass(frozen=True, slots=True)
class Rpc:
    """One method of a hosted service."""

    path: str
    server: str
    input_type: descriptor.Descriptor
    streaming: bool


@dataclass(frozen=True, slots=True)
class Case:
    """One bad request: what it is, its body, its metadata and the codes it may get."""

    rpc: Rpc
    what: str
    body: bytes
    metadata: tuple[tuple[str, str], ...]
    expected: frozenset[grpc.StatusCode]


@dataclass(frozen=True, slots=True)
class Finding:
    """A wrong answer."""

    case: str
    problem: str


def rpcs_of(servers: dict[str, tuple[str, ...]]) -> list[Rpc]:
    """Every RPC of every ``kishpa.*`` service each server hosts (from the descriptors)."""
    pool = descriptor_pool.Default()
    out = []
    for server, names in servers.items():
        for name in names:
            if not name.startswith("kishpa."):
                continue
            service = pool.FindServiceByName(name)
            for method in service.methods:
                out.append(
                    Rpc(
                        f"/{name}/{method.name}",
                        server,
                        method.input_type,
                        method.server_streaming,
                    )
                )
    return out


def _bad_values(field: descriptor.FieldDescriptor) -> Iterator[tuple[str, object]]:
    """Values the field's rule (or the defaults) must refuse."""
    rule = RULES.get(field.full_name)
    if field.is_repeated:
        limit = rule.max_items if isinstance(rule, Items) else DEFAULT_MAX_ITEMS
        yield f"{limit + 1} items", limit + 1
        return
    if isinstance(rule, Span):
        yield "duration too long", ("span", rule.high_ms // 1000 + 10)
        yield "negative nanos", ("nanos", -1)
        return
    if field.type == descriptor.FieldDescriptor.TYPE_STRING:
        limit = rule.max_chars if isinstance(rule, Text) else DEFAULT_MAX_CHARS
        yield f"{limit + 1} characters", "x" * (limit + 1)
        yield "100 KB", "y" * 100_000
        return
    if field.enum_type is not None:
        unused = max(v.number for v in field.enum_type.values) + 17
        yield "undefined enum value", unused
        return
    if isinstance(rule, Number):
        bits = 31 if field.cpp_type == descriptor.FieldDescriptor.CPPTYPE_INT32 else 63
        if rule.high < 2**bits - 1:
            yield "above the range", rule.high + 1
        below = rule.low - 1
        if below >= -(2**bits) and not (below == 0 and rule.zero_ok):
            yield "below the range", below


def _with(
    msg_class: type[message.Message], field: descriptor.FieldDescriptor, value: object
) -> bytes:
    msg = msg_class()
    if field.is_repeated:
        target = getattr(msg, field.name)
        for _ in range(int(value)):  # type: ignore[call-overload]
            if field.type == descriptor.FieldDescriptor.TYPE_MESSAGE:
                target.add()
            elif field.type == descriptor.FieldDescriptor.TYPE_STRING:
                target.append("a")
            else:
                target.append(1)
        return msg.SerializeToString()
    if isinstance(value, tuple):
        kind, number = value
        duration = getattr(msg, field.name)
        if kind == "span":
            duration.seconds = number
        else:
            duration.seconds, duration.nanos = 1, number
        return msg.SerializeToString()
    setattr(msg, field.name, value)
    return msg.SerializeToString()


def corpus(
    rpcs: list[Rpc], player_md: tuple[tuple[str, str], ...], bad_tokens: dict[str, str], seed: int
) -> list[Case]:
    """The seeded corpus: every RPC gets the corrupt bodies, a bad value for each of its
    fields (and the fields of the messages inside it), and the bad credentials."""
    rng = random.Random(seed)
    invalid = frozenset({grpc.StatusCode.INVALID_ARGUMENT})
    out: list[Case] = []
    for rpc in rpcs:
        msg_class = message_factory.GetMessageClass(rpc.input_type)
        for what, body in CORRUPT_BODIES.items():
            out.append(Case(rpc, f"body: {what}", body, player_md, invalid))
        for field in rpc.input_type.fields:
            if field.type == descriptor.FieldDescriptor.TYPE_STRING and not field.is_repeated:
                # Bad UTF-8 where a string is declared (unknown fields are legal and kept).
                tag = bytes([field.number << 3 | 2]) if field.number < 16 else None
                if tag is not None:
                    body = tag + b"\x02\xff\xfe"
                    out.append(Case(rpc, f"{field.name}: bad utf-8", body, player_md, invalid))
                break
        for field in rpc.input_type.fields:
            for what, value in _bad_values(field):
                out.append(
                    Case(
                        rpc,
                        f"{field.name}: {what}",
                        _with(msg_class, field, value),
                        player_md,
                        invalid,
                    )
                )
            if field.message_type is not None and field.message_type.full_name.startswith(
                "kishpa."
            ):
                nested = message_factory.GetMessageClass(field.message_type)
                for inner in field.message_type.fields:
                    for what, value in _bad_values(inner):
                        outer = msg_class()
                        target = getattr(outer, field.name)
                        item = target.add() if field.is_repeated else target
                        item.ParseFromString(_with(nested, inner, value))
                        out.append(
                            Case(
                                rpc,
                                f"{field.name}.{inner.name}: {what}",
                                outer.SerializeToString(),
                                player_md,
                                invalid,
                            )
                        )
        # Bad credentials on an empty body: a refusal before anything else (Login is public).
        creds = rng.sample(sorted(bad_tokens), k=min(3, len(bad_tokens)))
        for name in creds:
            md = (("authorization", bad_tokens[name]),) if bad_tokens[name] else ()
            expected = (
                invalid if rpc.path in PUBLIC else frozenset({grpc.StatusCode.UNAUTHENTICATED})
            )
            out.append(Case(rpc, f"credentials: {name}", b"", md, expected))
    return out


async def call(channel: grpc.aio.Channel, case: Case) -> grpc.aio.AioRpcError | None:
    """Send the raw body; the error, or None if the call was accepted."""
    if case.rpc.streaming:
        stream = channel.unary_stream(case.rpc.path)(
            case.body, metadata=case.metadata, timeout=DEADLINE_S
        )
        try:
            await stream.read()
        except grpc.aio.AioRpcError as exc:
            return exc
        stream.cancel()
        return None
    try:
        await channel.unary_unary(case.rpc.path)(
            case.body, metadata=case.metadata, timeout=DEADLINE_S
        )
    except grpc.aio.AioRpcError as exc:
        return exc
    return None


def judge(case: Case, error: grpc.aio.AioRpcError | None) -> list[Finding]:
    """What is wrong with the answer to ``case`` (nothing, ideally)."""
    name = f"{case.rpc.path} [{case.what}]"
    if error is None:
        return [Finding(name, "wrongly accepted")]
    code = error.code()
    out = []
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        out.append(Finding(name, "hung (5 s deadline)"))
    elif code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
        out.append(Finding(name, f"{code.name}: {(error.details() or '')[:120]}"))
    elif code not in case.expected:
        wanted = sorted(c.name for c in case.expected)
        out.append(Finding(name, f"{code.name} ({error_reason(error)}), expected {wanted}"))
    message_text = error.details() or ""
    if not 0 < len(message_text) <= MAX_MESSAGE_CHARS:
        out.append(Finding(name, f"message of {len(message_text)} characters"))
    if "<class" in message_text or "Traceback" in message_text:
        out.append(Finding(name, "message names Python internals"))
    if code not in (grpc.StatusCode.DEADLINE_EXCEEDED,) and error_reason(error) is None:
        out.append(Finding(name, "no ErrorInfo reason"))
    return out


async def run_corpus(
    channels: dict[str, grpc.aio.Channel], cases: list[Case], concurrency: int = 8
) -> list[Finding]:
    """Every case against the running servers, a few at a time; the findings."""
    findings: list[Finding] = []
    gate = asyncio.Semaphore(concurrency)

    async def one(case: Case) -> None:
        async with gate:
            error = await call(channels[case.rpc.server], case)
        findings.extend(judge(case, error))

    await asyncio.gather(*(one(c) for c in cases))
    return findings


def bad_tokens(good_key: str, issue_player_token: object) -> dict[str, str]:
    """Authorization values that must all be refused (UNAUTHENTICATED)."""
    import jwt

    now = 1_800_000_000
    wrong_key = jwt.encode(
        {"sub": "p", "typ": "player", "iss": "kishpa", "iat": now, "exp": now + 60},
        "k" * 48,
        algorithm="HS256",
    )
    expired = jwt.encode(
        {"sub": "p", "typ": "player", "iss": "kishpa", "iat": 1000, "exp": 1060},
        good_key,
        algorithm="HS256",
    )
    eternal = jwt.encode(
        {"sub": "p", "typ": "player", "iss": "kishpa", "iat": 1000, "exp": 10**10},
        good_key,
        algorithm="HS256",
    )
    return {
        "none": "",
        "garbage": "Bearer not-a-jwt",
        "basic scheme": "Basic dXNlcjpwYXNz",
        "bearer without token": "Bearer ",
        "wrong key": "Bearer " + wrong_key,
        "expired": "Bearer " + expired,
        "exp far away": "Bearer " + eternal,
        "alg none": "Bearer " + jwt.encode({"sub": "p", "typ": "player"}, None, algorithm="none"),  # type: ignore[arg-type]
        "oversized": "Bearer " + "a" * 6000,
    }


__all__ = [
    "Case",
    "Finding",
    "Rpc",
    "bad_tokens",
    "bearer_metadata",
    "corpus",
    "rpcs_of",
    "run_corpus",
]
