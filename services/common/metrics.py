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
        self._children: dict[str, _MethodMetrics] = {}

    def of(self, method: str) -> _MethodMetrics:
        """The metrics of one method (``/pkg.Service/Method``), looked up once: ``labels()``
        checks and hashes its values on every call, a dict lookup does not."""
        children = self._children.get(method)
        if children is None:
            children = self._children[method] = _MethodMetrics(self, *split_method(method))
        return children


class _MethodMetrics:
    """One method's children of the :class:`GrpcMetrics` families."""

    __slots__ = ("_handled", "_labels", "_metrics", "handling_seconds", "in_flight", "started")

    def __init__(self, metrics: GrpcMetrics, service: str, name: str) -> None:
        self._metrics = metrics
        self._labels = (service, name)
        self.started = metrics.started.labels(service, name)
        self.in_flight = metrics.in_flight.labels(service, name)
        self.handling_seconds = metrics.handling_seconds.labels(service, name)
        self._handled: dict[str, Counter] = {}

    def handled(self, code: str) -> Counter:
        """The completed-calls counter of a status code."""
        child = self._handled.get(code)
        if child is None:
            child = self._handled[code] = self._metrics.handled.labels(*self._labels, code)
        return child


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
        metrics = self._metrics.of(method)
        metrics.started.inc()
        in_flight = metrics.in_flight
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
            metrics.handled(_code_name(code)).inc()
            metrics.handling_seconds.observe(time.perf_counter() - began)


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
