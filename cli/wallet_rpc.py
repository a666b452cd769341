"""What the command groups that call the wallet share (``kishpa wallet`` finance commands,
``kishpa admin``): a token or a clear refusal, a channel to ``KISHPA_WALLET_ADDR`` (TLS from
the environment), and an RPC error printed with its reason and turned into the exit code
(2: no answer or not signed in; 1: refused)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

DEFAULT_WALLET_ADDR = "127.0.0.1:50051"


def wallet_address() -> str:
    """Where the wallet listens (``KISHPA_WALLET_ADDR``)."""
    return os.environ.get("KISHPA_WALLET_ADDR", DEFAULT_WALLET_ADDR)


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying ``token`` (none for "": the client certificate speaks)."""
    return (("authorization", "Bearer " + token),) if token else ()


def signed_in(
    prog: str,
    token: Callable[[argparse.Namespace], str],
    run: Callable[[argparse.Namespace, str], Coroutine[Any, Any, int]],
) -> Callable[[argparse.Namespace], int]:
    """A command handler: the token (``LookupError``: exit 2 with its message), then ``run``."""

    def handle(args: argparse.Namespace) -> int:
        try:
            value = token(args)
        except LookupError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
        return asyncio.run(run(args, value))

    return handle


@asynccontextmanager
async def wallet_channel() -> AsyncIterator[Any]:
    """An asyncio gRPC channel to the wallet."""
    from shared.tls import aio_channel, client_tls_from_env

    async with aio_channel(wallet_address(), client_tls_from_env()) as channel:
        yield channel


def refused(prog: str, exc: Any, *, as_json: bool = False) -> int:
    """Print a failed call (``grpc.aio.AioRpcError``) with its reason; the exit code."""
    import grpc

    from services.common.errors import error_reason

    reason = error_reason(exc) or exc.code().name
    if as_json:
        print(json.dumps({"error": exc.details(), "reason": reason}))
    else:
        print(f"{prog}: {exc.details()} ({reason})", file=sys.stderr)
    no_answer = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED)
    return 2 if exc.code() in no_answer else 1
