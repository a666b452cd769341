"""Alembic migrations of the ledger (``shared.migrations``; version table ``alembic_version``)."""

from __future__ import annotations

from pathlib import Path

from services.wallet.database import create_wallet_engine
from shared.migrations import Migrations

LEDGER = Migrations(Path(__file__).resolve().parent / "migrations", create_wallet_engine)

upgrade = LEDGER.upgrade
downgrade = LEDGER.downgrade
current_revision = LEDGER.current_revision
head_revision = LEDGER.head_revision
