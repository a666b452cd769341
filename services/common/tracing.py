"""OpenTelemetry tracing: off unless configured, then one trace per request across processes.

``configure_tracing`` is called at process start (services in ``serve``, the wallet before it
opens its engine, workers in each worker process). With ``KISHPA_OTLP_ENDPOINT`` unset it
does nothing and every hook below is free: no provider, no interceptor, no patched client.
When set, spans go to that OTLP/gRPC collector in batches, and the maintained
instrumentations are switched on:

* gRPC: the server interceptor (added by ``create_server``) and the client instrumentors
  (``grpc.aio`` channels and blocking channels), so a call carries its trace context;
* Celery: publishing a task injects the context into its headers and the worker continues
  it (enqueue -> task);
* Redis (redis-py, async too) and SQLAlchemy (the wallet's engine, ``instrument_engine``).

So a round's settlement is one trace: the action that ended the phase (a gRPC server span
in the table service), its Redis commit, the Celery publish, the worker's task, the wallet
RPC and the ledger's SQL. The phase record also keeps the W3C ``traceparent`` of the commit
(``current_traceparent``), so a phase the sweeper re-enqueues (a new trace) still names the
trace of the action that produced it. Every log line carries ``trace_id``/``span_id`` when a
span is current (``services.common.logging``).
"""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_lock = threading.Lock()
_provider: TracerProvider | None = None
_instrumentors: list[Any] = []


def tracing_enabled() -> bool:
    """Whether this process exports traces."""
    return _provider is not None


def configure_tracing(
    service: str, otlp_endpoint: str = "", *, exporter: SpanExporter | None = None
) -> TracerProvider | None:
    """Switch tracing on for this process (idempotent); None when it stays off.

    ``otlp_endpoint`` (``KISHPA_OTLP_ENDPOINT``, e.g. ``http://otel-collector:4317``) sends
    spans over OTLP/gRPC in batches; tests pass an ``exporter`` (in memory, synchronous).
    """
    global _provider
    if not otlp_endpoint and exporter is None:
        return None
    with _lock:
        if _provider is not None:
            return _provider
        provider = TracerProvider(resource=Resource.create({"service.name": f"kishpa-{service}"}))
        if exporter is not None:
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        else:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            insecure = otlp_endpoint.startswith("http://")
            provider.add_span_processor(
                BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint, insecure=insecure))
            )
        trace.set_tracer_provider(provider)
        _provider = provider
        _instrument()
        return provider


def _instrument() -> None:
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.grpc import (
        GrpcAioInstrumentorClient,
        GrpcInstrumentorClient,
    )
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    # The instrumentation packages ship no type hints for their constructors.
    kinds: tuple[Any, ...] = (
        GrpcAioInstrumentorClient,
        GrpcInstrumentorClient,
        RedisInstrumentor,
        CeleryInstrumentor,
    )
    for kind in kinds:
        instrumentor = kind()
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=_provider)
            _instrumentors.append(instrumentor)


def shutdown_tracing() -> None:
    """Flush and switch the instrumentations off again (tests; process exit flushes too)."""
    global _provider
    with _lock:
        for instrumentor in _instrumentors:
            instrumentor.uninstrument()
        _instrumentors.clear()
        if _provider is not None:
            _provider.force_flush()
        _provider = None


def server_interceptors() -> list[Any]:
    """The gRPC server interceptor when tracing is on (``create_server`` adds it)."""
    if _provider is None:
        return []
    from opentelemetry.instrumentation import grpc as otel_grpc

    make: Any = otel_grpc.aio_server_interceptor
    return [make(tracer_provider=_provider)]


def instrument_engine(engine: Any) -> None:
    """Trace a SQLAlchemy engine's statements when tracing is on.

    Uses the maintained instrumentation's ``EngineTracer`` on this one engine: its
    ``instrument()`` also patches ``create_async_engine``, which needs greenlet (unused here),
    and declares SQLAlchemy < 2.1 although the engine events it uses are unchanged in 2.1.
    """
    if _provider is None:
        return
    from opentelemetry import metrics
    from opentelemetry.instrumentation.sqlalchemy import engine as otel_engine

    tracer = trace.get_tracer("opentelemetry.instrumentation.sqlalchemy", tracer_provider=_provider)
    usage = metrics.get_meter("opentelemetry.instrumentation.sqlalchemy").create_up_down_counter(
        "db.client.connections.usage", unit="connections"
    )
    make: Any = otel_engine.EngineTracer
    make(tracer, engine, usage)


def current_traceparent() -> str:
    """The W3C ``traceparent`` of the current span ("" when there is none)."""
    span = trace.get_current_span()
    if not span.get_span_context().is_valid:
        return ""
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent", "")


def trace_id_of(traceparent: str) -> str:
    """The trace id (32 hex digits) in a ``traceparent``, or ""."""
    parts = traceparent.split("-")
    return parts[1] if len(parts) == 4 else ""
