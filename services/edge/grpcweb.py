"""The gRPC-Web wire format (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-WEB.md).

gRPC-Web frames messages exactly as gRPC does (one flag byte, a 4-byte big-endian length,
the message) and carries the trailers as one last frame whose flag has the high bit set,
so a browser needs no HTTP trailers. The ``-text`` variant base64-encodes the body; a
client may send it as several separately padded base64 chunks.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Iterable, Sequence

import grpc

CONTENT_TYPES = {
    "application/grpc-web": False,
    "application/grpc-web+proto": False,
    "application/grpc-web-text": True,
    "application/grpc-web-text+proto": True,
}
"""Accepted request content types and whether each is the base64 ``-text`` variant."""

DATA_FLAG = 0x00
TRAILER_FLAG = 0x80
COMPRESSED_FLAG = 0x01
_HEADER = struct.Struct(">BI")
_TIMEOUT = re.compile(r"(\d{1,8})([HMSmun])")
_UNIT_SECONDS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


class ProtocolError(ValueError):
    """A request that is not valid gRPC-Web (answered with INVALID_ARGUMENT or HTTP 4xx)."""


def is_text(content_type: str) -> bool | None:
    """Whether a content type is gRPC-Web text (True), binary (False) or not gRPC-Web (None)."""
    base = content_type.split(";", 1)[0].strip().lower()
    return CONTENT_TYPES.get(base)


def decode_text(body: bytes) -> bytes:
    """Decode a ``-text`` body, which may be several separately padded base64 chunks."""
    compact = b"".join(body.split())
    if len(compact) % 4:
        raise ProtocolError("malformed base64 body: its length is not a multiple of 4")
    out = bytearray()
    start = 0
    try:
        # Every chunk is whole 4-character quanta; a padded quantum ends a chunk.
        for end in range(4, len(compact) + 1, 4):
            if compact[end - 1 : end] == b"=" or end == len(compact):
                out += base64.b64decode(compact[start:end], validate=True)
                start = end
    except binascii.Error as exc:
        raise ProtocolError(f"malformed base64 body: {exc}") from None
    return bytes(out)


def encode_text(chunk: bytes) -> bytes:
    """One response chunk in the ``-text`` variant (padded; clients decode chunk by chunk)."""
    return base64.b64encode(chunk)


def frame(message: bytes) -> bytes:
    """A data frame holding one serialized message."""
    return _HEADER.pack(DATA_FLAG, len(message)) + message


def single_message(body: bytes) -> bytes:
    """The one request message of a unary or server-streaming call."""
    if len(body) < _HEADER.size:
        raise ProtocolError("the request body holds no gRPC-Web frame")
    flags, length = _HEADER.unpack_from(body)
    if flags & COMPRESSED_FLAG:
        raise ProtocolError("compressed request messages are not accepted")
    if flags & TRAILER_FLAG:
        raise ProtocolError("a request may not carry a trailer frame")
    if len(body) != _HEADER.size + length:
        raise ProtocolError("the request body must hold exactly one complete message")
    return body[_HEADER.size :]


def trailer_frame(
    code: grpc.StatusCode, message: str, metadata: Iterable[tuple[str, str | bytes]] = ()
) -> bytes:
    """The final frame: ``grpc-status``, ``grpc-message`` and the trailing metadata."""
    lines = [f"grpc-status: {code.value[0]}"]
    if message:
        lines.append(f"grpc-message: {percent_encode(message)}")
    for key, value in header_pairs(metadata):
        lines.append(f"{key}: {value}")
    block = ("\r\n".join(lines) + "\r\n").encode("ascii")
    return _HEADER.pack(TRAILER_FLAG, len(block)) + block


def percent_encode(message: str) -> str:
    """``grpc-message`` encoding: printable ASCII except ``%`` as is, the rest %-escaped."""
    out = []
    for byte in message.encode("utf-8"):
        out.append(chr(byte) if 0x20 <= byte <= 0x7E and byte != 0x25 else f"%{byte:02X}")
    return "".join(out)


def header_pairs(metadata: Iterable[tuple[str, str | bytes]]) -> list[tuple[str, str]]:
    """gRPC metadata as HTTP header pairs: ``-bin`` values base64, reserved keys dropped."""
    pairs = []
    for key, value in metadata:
        name = key.lower()
        if name.startswith(("grpc-", ":")) and name != "grpc-status-details-bin":
            continue
        if isinstance(value, bytes):
            text = base64.b64encode(value).decode("ascii").rstrip("=")
        else:
            text = value
        pairs.append((name, text))
    return pairs


def parse_timeout(value: str) -> float:
    """Seconds of a ``grpc-timeout`` header (``100m``, ``5S``)."""
    match = _TIMEOUT.fullmatch(value.strip())
    if match is None:
        raise ProtocolError(f"malformed grpc-timeout {value!r}")
    return int(match[1]) * _UNIT_SECONDS[match[2]]


def metadata_from_headers(
    headers: Sequence[tuple[bytes, bytes]], passed: frozenset[str]
) -> list[tuple[str, str | bytes]]:
    """Request headers to forward as gRPC metadata: the listed names and every ``-bin`` one
    among them decoded from base64."""
    out: list[tuple[str, str | bytes]] = []
    for raw_key, raw_value in headers:
        key = raw_key.decode("latin-1").lower()
        if key not in passed:
            continue
        value = raw_value.decode("latin-1")
        if key.endswith("-bin"):
            try:
                out.append((key, base64.b64decode(value + "=" * (-len(value) % 4))))
            except binascii.Error:
                raise ProtocolError(f"malformed base64 in header {key}") from None
        else:
            out.append((key, value))
    return out
