"""Tracing is off unless configured; log lines carry the current span's trace id."""

from __future__ import annotations

import json
import logging

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider

from services.common.logging import configure_logging
from services.common.tracing import (
    configure_tracing,
    current_traceparent,
    server_interceptors,
    trace_id_of,
    tracing_enabled,
)
from shared.phase_record import PhaseRecord, parse_phase_record

pytestmark = pytest.mark.unit


def test_without_an_endpoint_tracing_stays_off_and_costs_nothing() -> None:
    assert configure_tracing("test", "") is None
    assert not tracing_enabled()
    assert server_interceptors() == []
    assert current_traceparent() == ""


def test_every_log_line_inside_a_span_names_its_trace(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", "INFO", service="test")
    try:
        tracer = TracerProvider().get_tracer("test")
        with tracer.start_as_current_span("action") as span:
            structlog.get_logger("t").info("inside")
            logging.getLogger("stdlib").warning("also inside")
            parent = current_traceparent()
        structlog.get_logger("t").info("outside")
        lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    finally:
        logging.getLogger().handlers.clear()
    trace_id = format(span.get_span_context().trace_id, "032x")
    assert [line.get("trace_id") for line in lines] == [trace_id, trace_id, None]
    assert trace_id_of(parent) == trace_id


def test_the_phase_record_keeps_its_trace_and_reads_old_records() -> None:
    parent = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    record = PhaseRecord("t1", "kishpa", 1, "start", {"x": 1}, 5, parent)
    assert parse_phase_record(record.to_json()) == record
    old = PhaseRecord("t1", "kishpa", 1, "start", {"x": 1}, 5)
    assert "trace" not in json.loads(old.to_json())
    assert parse_phase_record(old.to_json()).trace == ""
