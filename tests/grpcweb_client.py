"""A small gRPC-Web client for tests, written from the protocol document independently of
the edge's own codec: frames a request, reads data and trailer frames back."""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field
from typing import TypeVar

import httpx
from google.protobuf.message import Message

M = TypeVar("M", bound=Message)


@dataclass
class Reply:
    """What one gRPC-Web call answered."""

    http_status: int
    headers: httpx.Headers
    http_version: str = ""
    messages: list[bytes] = field(default_factory=list)
    trailers: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> int:
        return int(self.trailers.get("grpc-status", "-1"))

    @property
    def message(self) -> str:
        return self.trailers.get("grpc-message", "")

    def parsed(self, kind: type[M]) -> list[M]:
        out = []
        for raw in self.messages:
            msg = kind()
            msg.ParseFromString(raw)
            out.append(msg)
        return out


def request_body(message: Message, *, text: bool) -> bytes:
    payload = message.SerializeToString()
    framed = b"\x00" + struct.pack(">I", len(payload)) + payload
    return base64.b64encode(framed) if text else framed


def headers(*, text: bool, token: str = "", timeout: str = "") -> dict[str, str]:
    out = {
        "content-type": "application/grpc-web-text" if text else "application/grpc-web+proto",
        "x-grpc-web": "1",
    }
    if token:
        out["authorization"] = f"Bearer {token}"
    if timeout:
        out["grpc-timeout"] = timeout
    return out


class FrameReader:
    """Feeds response bytes (decoding base64 4 characters at a time for -text)."""

    def __init__(self, *, text: bool) -> None:
        self.text = text
        self._pending_text = b""
        self._buffer = b""
        self.messages: list[bytes] = []
        self.trailers: dict[str, str] | None = None

    def feed(self, chunk: bytes) -> None:
        if self.text:
            self._pending_text += chunk
            usable = len(self._pending_text) - len(self._pending_text) % 4
            quanta, self._pending_text = (
                self._pending_text[:usable],
                self._pending_text[usable:],
            )
            for i in range(0, len(quanta), 4):
                self._buffer += base64.b64decode(quanta[i : i + 4])
        else:
            self._buffer += chunk
        while len(self._buffer) >= 5:
            flag, length = struct.unpack(">BI", self._buffer[:5])
            if len(self._buffer) < 5 + length:
                return
            body, self._buffer = self._buffer[5 : 5 + length], self._buffer[5 + length :]
            if flag & 0x80:
                self.trailers = {}
                for line in body.decode().split("\r\n"):
                    if line:
                        key, _, value = line.partition(":")
                        self.trailers[key.strip().lower()] = value.strip()
            else:
                self.messages.append(body)


async def call(
    client: httpx.AsyncClient,
    base: str,
    path: str,
    message: Message,
    *,
    text: bool = False,
    token: str = "",
    grpc_timeout: str = "",
) -> Reply:
    response = await client.post(
        base + path,
        content=request_body(message, text=text),
        headers=headers(text=text, token=token, timeout=grpc_timeout),
    )
    reader = FrameReader(text=text)
    reader.feed(response.content)
    return Reply(
        response.status_code,
        response.headers,
        response.http_version,
        reader.messages,
        reader.trailers or {},
    )
