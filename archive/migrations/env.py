"""Alembic environment of the round archive: online, against the configured URL."""

from __future__ import annotations

from alembic import context

from archive.migrate import ARCHIVE
from archive.schema import metadata
from shared.migrations import run_online

run_online(context, ARCHIVE, metadata)
