"""Wrap a gRPC method handler's behaviour in an async context manager, for any RPC kind.

Server interceptors (auth, error mapping, metrics) all need "run this around the call",
including around the whole life of a streaming response; this does it once for the four
kinds of handler, keeping serializers and the streaming style (async generator or
``context.write``) of the original.

A streaming response passes every message through each wrapper: with one generator per
interceptor, five interceptors cost five generator steps per message. So the wrappers of a
streaming handler are merged as they are added: each interceptor adds its ``around`` and
``before`` to one list, entered in the same order (outermost first), and one generator
runs the original behaviour inside all of them. A unary call keeps one small coroutine per
interceptor (merging those measured slower; docs/BENCHMARKS.md).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import grpc

Around = Callable[[str, "grpc.aio.ServicerContext[Any, Any]"], AbstractAsyncContextManager[None]]
"""``around(method, context)``: entered before the behaviour runs, exited after it ends."""
Before = Callable[[Any, "grpc.aio.ServicerContext[Any, Any]"], Awaitable[None]]
"""``before(request, context)``: awaited inside ``around`` before the behaviour (it may abort)."""


def _unary_response(
    behaviour: Callable[..., Any], method: str, around: Around, before: Before | None
) -> Any:
    async def wrapped(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        async with around(method, context):
            if before is not None:
                await before(request, context)
            result = behaviour(request, context)
            if inspect.isawaitable(result):
                result = await result
            return result

    return wrapped


@dataclass(frozen=True, slots=True)
class _Layer:
    """One interceptor's part of a merged streaming wrapper."""

    around: Around
    before: Before | None


_MERGED = "_kishpa_merged_layers"
"""The attribute a merged streaming behaviour carries: ``(original behaviour, layers)``."""

MERGE_STREAM_LAYERS = True
"""Merge the wrappers of a streaming handler into one generator (False: one per interceptor,
the former way; ``benchmarks/bench_common_rpc.py`` measures both in one run)."""


async def _enter(
    stack: contextlib.AsyncExitStack,
    layers: tuple[_Layer, ...],
    method: str,
    request: Any,
    context: grpc.aio.ServicerContext[Any, Any],
) -> None:
    """Enter every layer, outermost first, each ``around`` then its ``before``."""
    for layer in layers:
        await stack.enter_async_context(layer.around(method, context))
        if layer.before is not None:
            await layer.before(request, context)


def _merged_stream(behaviour: Callable[..., Any], method: str, layers: tuple[_Layer, ...]) -> Any:
    """One wrapper running ``behaviour`` inside every layer (outermost first)."""
    merged: Any
    if inspect.isasyncgenfunction(behaviour):

        async def merged_gen(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            async with contextlib.AsyncExitStack() as stack:
                await _enter(stack, layers, method, request, context)
                async for item in behaviour(request, context):
                    yield item

        merged = merged_gen
    else:
        # A behaviour that writes with ``context.write`` must stay a coroutine: grpc refuses
        # writes from a handler that is an async generator.
        async def merged_coro(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            async with contextlib.AsyncExitStack() as stack:
                await _enter(stack, layers, method, request, context)
                result = behaviour(request, context)
                if inspect.isawaitable(result):
                    result = await result
                elif hasattr(result, "__aiter__"):
                    async for item in result:
                        await context.write(item)
                    result = None
                return result

        merged = merged_coro
    setattr(merged, _MERGED, (behaviour, layers))
    return merged


def _stream_response(
    behaviour: Callable[..., Any], method: str, around: Around, before: Before | None
) -> Any:
    if MERGE_STREAM_LAYERS:
        inner, layers = getattr(behaviour, _MERGED, (behaviour, ()))
        return _merged_stream(inner, method, (_Layer(around, before), *layers))
    return _layered_stream(behaviour, method, around, before)


def _layered_stream(
    behaviour: Callable[..., Any], method: str, around: Around, before: Before | None
) -> Any:
    if inspect.isasyncgenfunction(behaviour):

        async def wrapped_gen(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            async with around(method, context):
                if before is not None:
                    await before(request, context)
                async for item in behaviour(request, context):
                    yield item

        return wrapped_gen

    # A behaviour that writes with ``context.write`` must stay a coroutine: grpc refuses
    # writes from a handler that is an async generator.
    async def wrapped_coro(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        async with around(method, context):
            if before is not None:
                await before(request, context)
            result = behaviour(request, context)
            if inspect.isawaitable(result):
                result = await result
            elif hasattr(result, "__aiter__"):
                async for item in result:
                    await context.write(item)
                result = None
            return result

    return wrapped_coro


def wrap_handler(
    handler: grpc.RpcMethodHandler[Any, Any],
    method: str,
    around: Around,
    *,
    before: Before | None = None,
    deserializer: Callable[[bytes], Any] | None = None,
) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler like ``handler`` whose behaviour runs inside ``around(method, context)``.

    ``before`` sees each request of a unary-request RPC first; ``deserializer`` replaces the
    handler's request deserializer (grpc decodes the body before any interceptor code runs).
    """
    decode = deserializer or handler.request_deserializer
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _unary_response(handler.unary_unary, method, around, before),
            request_deserializer=decode,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            _stream_response(handler.unary_stream, method, around, before),
            request_deserializer=decode,
            response_serializer=handler.response_serializer,
        )
    # Client-streaming requests arrive one by one inside the behaviour: no ``before``.
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(
            _unary_response(handler.stream_unary, method, around, None),
            request_deserializer=decode,
            response_serializer=handler.response_serializer,
        )
    if handler.stream_stream is not None:
        return grpc.stream_stream_rpc_method_handler(
            _stream_response(handler.stream_stream, method, around, None),
            request_deserializer=decode,
            response_serializer=handler.response_serializer,
        )
    return handler
