"""The table service's own settings (the shared ones: services.common.settings.Settings).

Read at start by ``kishpa serve table`` (a bad value stops it, naming the variable) and again
where a value is used, so a test may change one with ``monkeypatch.setenv``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from services.common.settings import SectionSettings

DurabilityMode = Literal["auto", "required", "off"]

FINISHED_TABLE_TTL_S = 24 * 3600
"""How long a closed table's keys are kept once every phase is settled, unless configured."""


class TableServiceSettings(SectionSettings):
    """Read by the table service only."""

    enqueue: bool = Field(default=True, validation_alias="KISHPA_TABLE_ENQUEUE")
    """``0`` writes each phase to the outbox without enqueueing its settlement (the workers'
    sweeper still finds it)."""
    await_lone_creator: bool = Field(default=True, validation_alias="KISHPA_AWAIT_LONE_CREATOR")
    """A creator alone with house bots is awaited for his table's first deal even without
    declaring that his client contributes (up to the contribution deadline, once per table);
    ``0``: only declared seats are (docs/fairness.md)."""
    finished_table_ttl_s: int = Field(
        default=FINISHED_TABLE_TTL_S, ge=1, validation_alias="KISHPA_FINISHED_TABLE_TTL_S"
    )
    """Seconds a closed table's keys are kept once every phase is settled (the soak
    benchmark shortens it to reach a steady state)."""
    phase_durability: DurabilityMode = Field(
        default="auto", validation_alias="KISHPA_PHASE_DURABILITY"
    )
    """``auto``: probe Redis and use what it offers, warn if nothing; ``required``: refuse to
    start, and refuse round starts and ends, while Redis cannot make them durable before
    they are answered; ``off``: no probe, no barrier (docs/operations.md)."""
    durable_replicas: int = Field(
        default=0, ge=0, le=100, validation_alias="KISHPA_REDIS_DURABLE_REPLICAS"
    )
    """Replicas that must hold a round's start or end before it is answered."""
    durability_timeout_ms: int = Field(
        default=2000, ge=1, le=60_000, validation_alias="KISHPA_DURABILITY_TIMEOUT_MS"
    )
    """How long the durability barrier may wait before the action answers UNAVAILABLE (keep
    it below the clients' 5 s)."""
    durability_probe_s: float = Field(
        default=2.0, ge=0, le=3600, validation_alias="KISHPA_DURABILITY_PROBE_S"
    )
    """Seconds between two probes of what Redis can promise (a live ``CONFIG SET
    appendfsync`` is seen within that); ``0``: only on new connections and refusals."""
