"""Matchmaking's own settings (the shared ones are :class:`services.common.settings.Settings`)."""

from __future__ import annotations

from pydantic import Field

from services.common.settings import SectionSettings
from services.matchmaking.keys import DEFAULT_PREFIX


class MatchmakingSettings(SectionSettings):
    """Read by matchmaking only."""

    key_prefix: str = Field(
        default=DEFAULT_PREFIX, min_length=1, validation_alias="KISHPA_MATCHMAKING_KEY_PREFIX"
    )
    """Matchmaking's Redis key prefix (no hash tag in it: the keys carry one per queue and
    per player; test stacks sharing a Redis give each their own)."""
