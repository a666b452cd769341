"""Shared test configuration: addresses of the real servers the integration tests use.

PostgreSQL, Redis and RabbitMQ run on this machine (and in CI); the URLs can be overridden
with TEST_DATABASE_URL, TEST_REDIS_URL and TEST_RABBITMQ_URL.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci")

TEST_DATABASE_URL = os.environ.get(
    "TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
TEST_RABBITMQ_URL = os.environ.get("TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")


@pytest.fixture(scope="session")
def database_url() -> str:
    return TEST_DATABASE_URL


@pytest.fixture(scope="session")
def redis_url() -> str:
    return TEST_REDIS_URL


@pytest.fixture(scope="session", autouse=True)
def _session_file(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`kishpa play` saves its token for `kishpa verify`: in tests, never in the real home."""
    if not os.environ.get("KISHPA_SESSION_FILE"):
        path = tmp_path_factory.mktemp("session") / "session.json"
        os.environ["KISHPA_SESSION_FILE"] = str(path)
