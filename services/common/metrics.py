"""Prometheus metrics of gRPC servers: calls by method and status code, and their latency."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from services.common.handlers import wrap_handler

# Game RPCs answer in milliseconds; streams (WatchTable) may live for hours.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60)


class GrpcMetrics:
    """The metric families of a gRPC server, registered once in ``registry``."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        labels = ("grpc_service", "grpc_method")
        self.started = Counter(
            "kishpa_grpc_server_started", "RPCs started.", labels, registry=registry
        )
        self.handled = Counter(
            "kishpa_grpc_server_handled",
            "RPCs completed, by status code.",
            (*labels, "grpc_code"),
            registry=registry,
        )
        self.in_flight = Gauge(
            "kishpa_grpc_server_in_flight",
            "RPCs running now (open WatchTable streams included).",
            labels,
            registry=registry,
        )
        self.handling_seconds = Histogram(
            "kishpa_grpc_server_handling_seconds",
            "Time from the start of an RPC to its end.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )


_default: GrpcMetrics | None = None


def default_metrics() -> GrpcMetrics:
    """The process-wide metrics on the default registry (what ``/metrics`` serves)."""
    global _default  # one set of families per process registry
    if _default is None:
        _default = GrpcMetrics()
    return _default


def split_method(method: str) -> tuple[str, str]:
    """``/pkg.Service/Method`` -> (``pkg.Service``, ``Method``)."""
    service, _, name = method.lstrip("/").rpartition("/")
    return service or "unknown", name or "unknown"


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    """Counts every RPC and its final status code and times it; put it first (outermost)."""

    def __init__(self, metrics: GrpcMetrics | None = None) -> None:
        self._metrics = metrics or default_metrics()

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        return wrap_handler(handler, handler_call_details.method, self._measured)

    @contextlib.asynccontextmanager
    async def _measured(
        self, method: str, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[None]:
        service, name = split_method(method)
        self._metrics.started.labels(service, name).inc()
        in_flight = self._metrics.in_flight.labels(service, name)
        in_flight.inc()
        began = time.perf_counter()
        code: grpc.StatusCode | None = None
        try:
            yield
        except grpc.aio.AbortError:
            code = context.code()
            raise
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
            raise
        except Exception:
            code = grpc.StatusCode.UNKNOWN
            raise
        else:
            code = context.code()
        finally:
            in_flight.dec()
            self._metrics.handled.labels(service, name, _code_name(code)).inc()
            self._metrics.handling_seconds.labels(service, name).observe(
                time.perf_counter() - began
            )


def _code_name(code: Any) -> str:
    # The aio context reports None for a call that never set a code (= OK); some grpc
    # versions report the raw integer instead of a StatusCode.
    if code is None:
        return "OK"
    if isinstance(code, grpc.StatusCode):
        return code.name
    for candidate in grpc.StatusCode:
        if candidate.value[0] == code:
            return candidate.name
    return "UNKNOWN"
