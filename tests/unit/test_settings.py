"""Settings: documented defaults, environment overrides, per-service ports, fail-fast secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.settings import (
    DEFAULT_GRPC_PORTS,
    DEFAULT_METRICS_PORTS,
    MIN_SECRET_LENGTH,
    Settings,
    SettingsError,
    environment_variables,
    load_settings,
)

pytestmark = pytest.mark.unit

SECRET = "s" * MIN_SECRET_LENGTH
ENV_VARS = (
    "REDIS_URL",
    "KISHPA_UVLOOP",
    "KISHPA_WORKER_QUEUE",
    "KISHPA_TABLE_TURN_SECONDS",
    "KISHPA_TABLE_NEXT_DEAL_PAUSE_MS",
    "DATABASE_URL",
    "ARCHIVE_DATABASE_URL",
    "ARCHIVE_DATABASE_URL_FILE",
    "KISHPA_ARCHIVE_RETENTION_DAYS",
    "KISHPA_BROKER_URL",
    "KISHPA_TOKEN_SECRET",
    "KISHPA_SERVICE_SECRET",
    "KISHPA_GRPC_HOST",
    "KISHPA_GRPC_PORT",
    "KISHPA_METRICS_PORT",
    "KISHPA_WALLET_ADDR",
    "KISHPA_TABLE_ADDR",
    "KISHPA_MATCHMAKING_ADDR",
    "KISHPA_LOG_FORMAT",
    "KISHPA_LOG_LEVEL",
    "KISHPA_TOKEN_TTL_SECONDS",
    "KISHPA_SERVICE_TOKEN_TTL_SECONDS",
    "KISHPA_SHUTDOWN_GRACE_SECONDS",
    "KISHPA_SERVICE",
    "KISHPA_TOKEN_SECRET_PREVIOUS",
    "KISHPA_SERVICE_SECRET_PREVIOUS",
    "KISHPA_STAKES_KISHPA",
    "KISHPA_STAKES_HAND",
    "KISHPA_GUEST_LOGIN",
    "KISHPA_OIDC_ISSUER",
    "KISHPA_OIDC_AUDIENCE",
    "KISHPA_OIDC_JWKS_URL",
    "KISHPA_OIDC_ALGORITHMS",
    "KISHPA_OIDC_JWKS_CACHE_SECONDS",
    "KISHPA_OIDC_ADMIN_ROLE",
    "KISHPA_OIDC_ROLES_CLAIM",
    "KISHPA_OPERATOR_TOKEN_TTL_SECONDS",
    "KISHPA_PRODUCTION",
    "KISHPA_OTLP_ENDPOINT",
    "KISHPA_RATE_LIMITS",
    "KISHPA_LIMIT_LOGINS_PER_ADDRESS",
    "KISHPA_LIMIT_LOGINS_PER_DEVICE",
    "KISHPA_LIMIT_PLAYER_WRITES",
    "KISHPA_LIMIT_PLAYER_READS",
    "KISHPA_LIMIT_STREAMS_PER_PLAYER",
    "KISHPA_LIMIT_EXEMPT_LOOPBACK",
    "KISHPA_LIMITS_KEY_PREFIX",
    "KISHPA_LIMIT_TRUSTED_PROXIES",
    "KISHPA_WALLET_GROUP_COMMIT",
    "KISHPA_TLS_CERT_FILE",
    "KISHPA_TLS_KEY_FILE",
    "KISHPA_TLS_CA_FILE",
    "KISHPA_TLS_CLIENT_AUTH",
    "KISHPA_TLS_SERVER_NAME",
    "KISHPA_TLS_METRICS",
    "KISHPA_HEALTH_PORT",
    "KISHPA_TOKEN_SECRET_FILE",
    "KISHPA_SERVICE_SECRET_FILE",
    "KISHPA_TOKEN_SECRET_PREVIOUS_FILE",
    "KISHPA_SERVICE_SECRET_PREVIOUS_FILE",
    "DATABASE_URL_FILE",
    "KISHPA_OIDC_ROLE_PREFIX",
    "KISHPA_ADMIN_APPROVAL_THRESHOLD",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def test_documented_defaults() -> None:
    settings = Settings()
    assert settings.redis_url == "redis://127.0.0.1:6379/0"
    assert settings.database_url == "sqlite:///var/kishpa-wallet.sqlite3"
    assert settings.broker_url == settings.redis_url
    assert settings.wallet_addr == "127.0.0.1:50051"
    assert settings.table_addr == "127.0.0.1:50052"
    assert settings.matchmaking_addr == "127.0.0.1:50053"
    assert settings.token_secret is None
    assert settings.service_secret is None


@pytest.mark.parametrize("service", ["wallet", "table", "matchmaking"])
def test_per_service_default_ports(service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KISHPA_TOKEN_SECRET", SECRET)
    monkeypatch.setenv("KISHPA_SERVICE_SECRET", SECRET)
    monkeypatch.setenv("KISHPA_SERVICE_SECRET", SECRET)
    settings = load_settings(service)
    assert settings.grpc_port == DEFAULT_GRPC_PORTS[service]
    assert settings.metrics_port == DEFAULT_METRICS_PORTS[service]
    assert settings.grpc_address == f"[::]:{DEFAULT_GRPC_PORTS[service]}"


def test_docs_port_table() -> None:
    assert dict(DEFAULT_GRPC_PORTS) == {"wallet": 50051, "table": 50052, "matchmaking": 50053}
    assert dict(DEFAULT_METRICS_PORTS) == {
        "wallet": 9151,
        "table": 9152,
        "matchmaking": 9153,
        "worker": 9154,
    }


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KISHPA_TOKEN_SECRET", SECRET)
    monkeypatch.setenv("KISHPA_SERVICE_SECRET", SECRET)
    monkeypatch.setenv("REDIS_URL", "redis://redis.example:6380/3")
    monkeypatch.setenv("KISHPA_GRPC_PORT", "6000")
    monkeypatch.setenv("KISHPA_METRICS_PORT", "6001")
    monkeypatch.setenv("KISHPA_LOG_FORMAT", "console")
    monkeypatch.setenv("KISHPA_TABLE_ADDR", "table:7000")
    settings = load_settings("matchmaking")
    assert settings.redis_url == "redis://redis.example:6380/3"
    assert settings.broker_url == "redis://redis.example:6380/3"
    assert (settings.grpc_port, settings.metrics_port) == (6000, 6001)
    assert settings.log_format == "console"
    assert settings.table_addr == "table:7000"
    assert settings.require_token_secret() == SECRET


def test_broker_url_can_differ_from_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KISHPA_BROKER_URL", "amqp://guest@rabbit//")
    assert Settings().broker_url == "amqp://guest@rabbit//"


def test_overrides_win_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KISHPA_GRPC_PORT", "6000")
    settings = load_settings("cli", grpc_port=0, token_secret=SECRET)
    assert settings.grpc_port == 0


@pytest.mark.parametrize(
    ("service", "missing"),
    [
        ("wallet", "KISHPA_TOKEN_SECRET"),
        ("table", "KISHPA_TOKEN_SECRET"),
        ("matchmaking", "KISHPA_TOKEN_SECRET"),
        ("worker", "KISHPA_SERVICE_SECRET"),
    ],
)
def test_missing_secret_fails_fast_naming_the_variable(service: str, missing: str) -> None:
    with pytest.raises(SettingsError, match=missing):
        load_settings(service)


@pytest.mark.parametrize("service", ["wallet", "matchmaking"])
def test_service_secret_required_by_wallet_and_matchmaking(
    monkeypatch: pytest.MonkeyPatch, service: str
) -> None:
    monkeypatch.setenv("KISHPA_TOKEN_SECRET", SECRET)
    with pytest.raises(SettingsError, match="KISHPA_SERVICE_SECRET"):
        load_settings(service)


def test_short_secret_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KISHPA_TOKEN_SECRET", "short")
    monkeypatch.setenv("KISHPA_SERVICE_SECRET", SECRET)
    with pytest.raises(SettingsError, match="too short"):
        load_settings("matchmaking")


def test_bad_value_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KISHPA_TOKEN_SECRET", SECRET)
    monkeypatch.setenv("KISHPA_SERVICE_SECRET", SECRET)
    monkeypatch.setenv("KISHPA_GRPC_PORT", "not-a-port")
    with pytest.raises(SettingsError, match="KISHPA_GRPC_PORT") as info:
        load_settings("matchmaking")
    assert "default factory" not in str(info.value)


def test_secrets_are_not_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KISHPA_TOKEN_SECRET", SECRET)
    monkeypatch.setenv("KISHPA_SERVICE_SECRET", SECRET)
    settings = load_settings("matchmaking")
    assert SECRET not in repr(settings)
    assert SECRET not in str(settings.model_dump())


def test_environment_variables_cover_the_documented_table() -> None:
    names = environment_variables()
    documented = {
        "REDIS_URL",
        "DATABASE_URL",
        "KISHPA_BROKER_URL",
        "KISHPA_TOKEN_SECRET",
        "KISHPA_SERVICE_SECRET",
        "KISHPA_GRPC_PORT",
        "KISHPA_METRICS_PORT",
        "KISHPA_WALLET_ADDR",
        "KISHPA_TABLE_ADDR",
        "KISHPA_MATCHMAKING_ADDR",
        "KISHPA_LOG_FORMAT",
    }
    assert documented <= set(names)
    assert set(names) == set(ENV_VARS)
    assert names["KISHPA_GRPC_PORT"] == "grpc_port"


def test_stakes_are_offered_per_game_from_a_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().stakes() == {"kishpa": (1, 5, 10, 50, 100), "hand": (1, 5, 10, 50, 100)}
    monkeypatch.setenv("KISHPA_STAKES_HAND", " 100, 5,5 ,20")
    assert Settings().stakes() == {"kishpa": (1, 5, 10, 50, 100), "hand": (5, 20, 100)}
    assert Settings(stakes_kishpa=[10, 1]).stakes_kishpa == (1, 10)


@pytest.mark.parametrize("value", ["0", "5,-1", "", "1,five", "2.5", "5001"])
def test_a_bad_stake_list_fails_fast_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("KISHPA_STAKES_KISHPA", value)
    with pytest.raises(SettingsError, match="KISHPA_STAKES_KISHPA"):
        load_settings("worker", service_secret="x" * 40)


def test_secrets_come_from_files_and_the_variable_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key = tmp_path / "secret"
    key.write_text("f" * 40 + "\n")  # kubectl create secret --from-file keeps a newline
    monkeypatch.setenv("KISHPA_SERVICE_SECRET_FILE", str(key))
    monkeypatch.setenv("DATABASE_URL_FILE", str(key))
    settings = load_settings("beat")
    assert settings.require_service_secret() == "f" * 40
    assert settings.database_url == "f" * 40
    monkeypatch.setenv("KISHPA_SERVICE_SECRET", "e" * 40)
    assert load_settings("beat").require_service_secret() == "e" * 40


def test_an_unreadable_secret_file_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KISHPA_TOKEN_SECRET_FILE", "/nonexistent/kishpa/secret")
    with pytest.raises(SettingsError, match="KISHPA_TOKEN_SECRET_FILE: cannot read"):
        load_settings("table")


def _tls_files(tmp_path: Path) -> dict[str, str]:
    paths = {n: tmp_path / f"{n}.pem" for n in ("cert", "key", "ca")}
    for path in paths.values():
        path.write_text("not read by the settings")
    return {
        "KISHPA_TLS_CERT_FILE": str(paths["cert"]),
        "KISHPA_TLS_KEY_FILE": str(paths["key"]),
        "KISHPA_TLS_CA_FILE": str(paths["ca"]),
    }


def test_under_mutual_tls_a_workload_needs_no_service_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KISHPA_TOKEN_SECRET", SECRET)
    for name, value in _tls_files(tmp_path).items():
        monkeypatch.setenv(name, value)
    settings = load_settings("table")
    assert settings.certificate_identity
    assert load_settings("worker").certificate_identity
    # Server-only TLS cannot tell workloads apart: the shared key is needed again.
    monkeypatch.setenv("KISHPA_TLS_CLIENT_AUTH", "0")
    with pytest.raises(SettingsError, match="KISHPA_SERVICE_SECRET"):
        load_settings("table")


def test_production_refuses_a_shared_key_server_only_tls_and_the_dev_issuer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KISHPA_TOKEN_SECRET", SECRET)
    monkeypatch.setenv("KISHPA_PRODUCTION", "1")
    with pytest.raises(SettingsError, match="KISHPA_TLS_CERT_FILE"):
        load_settings("table")
    for name, value in _tls_files(tmp_path).items():
        monkeypatch.setenv(name, value)
    assert load_settings("table").certificate_identity
    monkeypatch.setenv("KISHPA_SERVICE_SECRET_FILE", str(tmp_path / "cert.pem"))
    with pytest.raises(SettingsError, match="no shared service key"):
        load_settings("table")
    monkeypatch.delenv("KISHPA_SERVICE_SECRET_FILE")
    monkeypatch.setenv("KISHPA_TLS_CLIENT_AUTH", "0")
    with pytest.raises(SettingsError, match="mutual TLS is required"):
        load_settings("wallet")
    monkeypatch.delenv("KISHPA_TLS_CLIENT_AUTH")
    monkeypatch.setenv("KISHPA_OIDC_ISSUER", "urn:kishpa:dev-issuer")
    with pytest.raises(SettingsError, match="development issuer"):
        load_settings("wallet")
