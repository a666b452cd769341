"""Alembic environment of the ledger: online, against the configured URL."""

from __future__ import annotations

from alembic import context

from services.wallet.migrate import LEDGER
from services.wallet.schema import metadata
from shared.migrations import run_online

run_online(context, LEDGER, metadata)
