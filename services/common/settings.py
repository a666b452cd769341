"""Configuration of every process, read from environment variables (docs/configuration.md,
written from these classes by ``python -m cli.configuration``).

One ``Settings`` type for what every process shares (each deployable's own knobs are a
:class:`SectionSettings` beside it); :func:`load_settings` picks the per-service default
ports and fails fast, naming the variable, when a secret the service needs is missing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from games.registry import GAMES
from games.table import DEFAULT_NEXT_DEAL_PAUSE_MS, DEFAULT_TURN_SECONDS, TableSettings
from shared.tasks import DEFAULT_QUEUE, QUEUE_ENV

LogFormat = Literal["console", "json"]

DEFAULT_GRPC_PORTS: Mapping[str, int] = {"wallet": 50051, "table": 50052, "matchmaking": 50053}
DEFAULT_METRICS_PORTS: Mapping[str, int] = {
    "wallet": 9151,
    "table": 9152,
    "matchmaking": 9153,
    "worker": 9154,
}

TOKEN_SECRET_ENV = "KISHPA_TOKEN_SECRET"  # noqa: S105 - the variable's name, not a secret
SERVICE_SECRET_ENV = "KISHPA_SERVICE_SECRET"  # noqa: S105 - the variable's name

# Which secrets each process cannot start without (docs/configuration.md).
REQUIRED_SECRETS: Mapping[str, tuple[str, ...]] = {
    "wallet": (TOKEN_SECRET_ENV, SERVICE_SECRET_ENV),
    "table": (TOKEN_SECRET_ENV, SERVICE_SECRET_ENV),
    "matchmaking": (TOKEN_SECRET_ENV, SERVICE_SECRET_ENV),
    "worker": (SERVICE_SECRET_ENV,),
    "beat": (SERVICE_SECRET_ENV,),
}

DEFAULT_STAKES: tuple[int, ...] = (1, 5, 10, 50, 100)
"""Stake levels a table may be played at, per game, unless configured otherwise."""
MAX_STAKE = 5_000
"""The highest stake a setting may offer. A Kishpa player owes at most 13 units in one phase
(an end phase: a win of 6, two jokers, two 1s at 2 each, the kishpa), so four players with
nothing left need at most 4 x 13 x 5000 / 50 = 5,200 bank loads in one batch, within the
wallet's 10,000 (services/wallet/batch.py MAX_LOADS_PER_BATCH)."""


def parse_stakes(value: object) -> tuple[int, ...]:
    """``"1,5,10"`` (or a sequence of ints) -> ``(1, 5, 10)``; every stake 1..MAX_STAKE."""
    items: list[object]
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ValueError("a comma-separated list of stakes, e.g. 1,5,10,50,100")
    stakes: set[int] = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise ValueError(f"a stake is a whole number of tokens, not {item!r}")
        try:
            stake = int(item)
        except ValueError:
            raise ValueError(f"a stake is a whole number of tokens, not {item!r}") from None
        if not 1 <= stake <= MAX_STAKE:
            raise ValueError(f"a stake is 1-{MAX_STAKE} tokens, not {stake}")
        stakes.add(stake)
    if not stakes:
        raise ValueError("at least one stake must be offered")
    return tuple(sorted(stakes))


Stakes = Annotated[tuple[int, ...], NoDecode, BeforeValidator(parse_stakes)]
"""A list of allowed stakes: ``"1,5,10,50,100"`` in the environment, sorted and distinct.
One field ``stakes_<game>`` (``KISHPA_STAKES_<GAME>``) per registered game
(``games.registry``; a unit test checks every game has one)."""
# The processes that cannot run without the Celery broker (the table service checks it
# when it enqueues settlements).
BROKER_USERS = frozenset({"worker", "beat"})

# HS256 keys shorter than the hash output weaken the signature (RFC 7518 section 3.2).
MIN_SECRET_LENGTH = 32

DEV_ISSUER = "urn:kishpa:dev-issuer"
"""The development operator issuer of ``kishpa run --tls`` (an OpenID Connect issuer whose
key lives in the run's directory): production refuses to trust it."""


class SettingsError(RuntimeError):
    """The environment does not configure the process correctly; the message says how to fix it."""


def _default_log_format() -> LogFormat:
    return "console" if sys.stderr.isatty() else "json"


def _default_grpc_port(data: dict[str, Any]) -> int:
    return DEFAULT_GRPC_PORTS.get(str(data.get("service", "")), 0)


def _default_metrics_port(data: dict[str, Any]) -> int:
    return DEFAULT_METRICS_PORTS.get(str(data.get("service", "")), 0)


def _default_broker_url(data: dict[str, Any]) -> str:
    return str(data["redis_url"])


SECRET_FILE_SUFFIX = "_FILE"  # noqa: S105 - a suffix of variable names, not a secret
SECRET_FIELDS: Mapping[str, str] = {
    "token_secret": TOKEN_SECRET_ENV,
    "service_secret": SERVICE_SECRET_ENV,
    "token_secret_previous": TOKEN_SECRET_ENV + "_PREVIOUS",
    "service_secret_previous": SERVICE_SECRET_ENV + "_PREVIOUS",
    "database_url": "DATABASE_URL",
    "archive_database_url": "ARCHIVE_DATABASE_URL",
}
"""Settings that are secrets: each may come from a file, ``<VARIABLE>_FILE`` (a mounted
Secret in Kubernetes), instead of the environment variable itself."""


class _SecretFiles(PydanticBaseSettingsSource):
    """Reads ``<VARIABLE>_FILE`` for each secret setting: the file's content, trailing
    newline removed. The variable itself, when set, wins."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, env in SECRET_FIELDS.items():
            path = os.environ.get(env + SECRET_FILE_SUFFIX, "")
            if not path or os.environ.get(env):
                continue
            try:
                values[name] = Path(path).read_text().rstrip("\r\n")
            except OSError as exc:
                raise SettingsError(
                    f"{env}{SECRET_FILE_SUFFIX}: cannot read {path}: {exc.strerror}"
                ) from None
        return values


class Settings(BaseSettings):
    """The settings every process reads (each uses those it needs): the environment variable
    is each field's alias, its docstring its description in docs/configuration.md."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Arguments, then the environment, then secret files (``*_FILE``), then defaults.
        return (init_settings, env_settings, _SecretFiles(settings_cls), dotenv_settings)

    model_config = SettingsConfigDict(
        env_prefix="KISHPA_",
        extra="ignore",
        frozen=True,
        populate_by_name=True,
        # The docstring under each field is its description, and the configuration
        # reference (docs/configuration.md) is written from them.
        use_attribute_docstrings=True,
    )

    # Declared first: the port defaults below are computed from it.
    service: str = Field(default="kishpa", description="Name of this process (wallet, table...)")
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", validation_alias="REDIS_URL")
    """Redis of the live state (table, matchmaking, workers). ``kishpa run`` starts an
    embedded server instead when it is unset."""
    database_url: str = Field(
        default="sqlite:///var/kishpa-wallet.sqlite3", validation_alias="DATABASE_URL"
    )
    """The wallet's database (wallet, ``kishpa migrate``)."""
    archive_database_url: str = Field(default="", validation_alias="ARCHIVE_DATABASE_URL")
    """The round archive's database (docs/architecture.md "The round archive"): the workers
    write it, the table service and ``kishpa history`` read it; unset: ``DATABASE_URL``."""
    archive_retention_days: int = Field(
        default=400, gt=0, validation_alias="KISHPA_ARCHIVE_RETENTION_DAYS"
    )
    """``kishpa history prune``: archived rounds older than this many days may be removed
    (docs/operations.md "Round archive retention")."""
    broker_url: str = Field(
        default_factory=_default_broker_url,
        validation_alias="KISHPA_BROKER_URL",
        json_schema_extra={"shown_default": "`REDIS_URL`"},
    )
    """The Celery broker (workers, beat, and the table service's enqueue); a standalone
    Redis or RabbitMQ (``amqp://...``), never a Redis Cluster."""
    token_secret: SecretStr | None = Field(default=None, validation_alias=TOKEN_SECRET_ENV)
    """HS256 key of player tokens; required by every service (``kishpa run`` generates
    one)."""
    service_secret: SecretStr | None = Field(default=None, validation_alias=SERVICE_SECRET_ENV)
    """HS256 key of development service credentials and operator tokens; required unless
    the process has a certificate, key and CA under mutual TLS; refused by
    ``KISHPA_PRODUCTION=1``."""
    token_secret_previous: SecretStr | None = Field(
        default=None, validation_alias=TOKEN_SECRET_ENV + "_PREVIOUS"
    )
    """Key rotation: tokens signed with the previous player-token key still verify until
    they expire (docs/operations.md)."""
    service_secret_previous: SecretStr | None = Field(
        default=None, validation_alias=SERVICE_SECRET_ENV + "_PREVIOUS"
    )
    """Key rotation: the previous service key, still accepted for verification."""
    grpc_host: str = Field(default="[::]", validation_alias="KISHPA_GRPC_HOST")
    """Each service: the address its gRPC server binds."""
    grpc_port: int = Field(
        default_factory=_default_grpc_port,
        ge=0,
        le=65535,
        validation_alias="KISHPA_GRPC_PORT",
        json_schema_extra={"shown_default": "wallet 50051, table 50052, matchmaking 50053"},
    )
    """Each service: its gRPC port."""
    metrics_port: int = Field(
        default_factory=_default_metrics_port,
        ge=0,
        le=65535,
        validation_alias="KISHPA_METRICS_PORT",
        json_schema_extra={
            "shown_default": "wallet 9151, table 9152, matchmaking 9153, worker 9154"
        },
    )
    """Each process: the port of its Prometheus ``/metrics``."""
    wallet_addr: str = Field(default="127.0.0.1:50051", validation_alias="KISHPA_WALLET_ADDR")
    """Where the clients of the wallet (table, workers, edge, ``kishpa wallet``) reach it."""
    table_addr: str = Field(default="127.0.0.1:50052", validation_alias="KISHPA_TABLE_ADDR")
    """Where the clients of the table service (matchmaking, edge, workers' drift check, the
    SDK) reach it."""
    matchmaking_addr: str = Field(
        default="127.0.0.1:50053", validation_alias="KISHPA_MATCHMAKING_ADDR"
    )
    """Where the clients of matchmaking (edge, the SDK) reach it."""
    log_format: LogFormat = Field(
        default_factory=_default_log_format,
        validation_alias="KISHPA_LOG_FORMAT",
        json_schema_extra={"shown_default": "`console` on a terminal, else `json`"},
    )
    """Every process: ``console`` or ``json`` log lines."""
    log_level: str = Field(default="INFO", validation_alias="KISHPA_LOG_LEVEL")
    """Every process: the lowest level logged."""
    token_ttl_seconds: int = Field(default=3600, gt=0, validation_alias="KISHPA_TOKEN_TTL_SECONDS")
    """Lifetime of a player token (clients refresh it before it ends)."""
    service_token_ttl_seconds: int = Field(
        default=300, gt=0, validation_alias="KISHPA_SERVICE_TOKEN_TTL_SECONDS"
    )
    """Lifetime of a minted development service credential."""
    shutdown_grace_seconds: float = Field(
        default=10.0, ge=0, validation_alias="KISHPA_SHUTDOWN_GRACE_SECONDS"
    )
    """On SIGTERM health goes NOT_SERVING and in-flight calls get this long to finish."""
    uvloop: bool = Field(default=True, validation_alias="KISHPA_UVLOOP")
    """Table service and edge: ``0`` runs on the standard asyncio loop instead of uvloop."""
    worker_queue: str = Field(default=DEFAULT_QUEUE, min_length=1, validation_alias=QUEUE_ENV)
    """The queue settlement tasks travel on: the table service enqueues there, the workers
    consume it (``kishpa worker --queue`` overrides it)."""
    oidc_issuer: str = Field(default="", validation_alias="KISHPA_OIDC_ISSUER")
    """Every service: an external OpenID Connect provider whose tokens are accepted
    (services/common/oidc.py, docs/api.md); unset: OIDC off."""
    oidc_audience: str = Field(default="", validation_alias="KISHPA_OIDC_AUDIENCE")
    """The audience the provider's tokens must name."""
    oidc_jwks_url: str = Field(default="", validation_alias="KISHPA_OIDC_JWKS_URL")
    """Where the provider's signing keys are read."""
    oidc_algorithms: str = Field(default="RS256,ES256", validation_alias="KISHPA_OIDC_ALGORITHMS")
    """Comma-separated signature algorithms accepted from the provider."""
    oidc_jwks_cache_seconds: float = Field(
        default=300.0, gt=0, validation_alias="KISHPA_OIDC_JWKS_CACHE_SECONDS"
    )
    """How long the provider's keys are cached."""
    oidc_admin_role: str = Field(default="kishpa-admin", validation_alias="KISHPA_OIDC_ADMIN_ROLE")
    """The provider's role that makes an administrator."""
    oidc_roles_claim: str = Field(default="roles", validation_alias="KISHPA_OIDC_ROLES_CLAIM")
    """The claim holding the provider's roles; a dotted path reaches into an object
    (Keycloak: ``realm_access.roles``)."""
    operator_token_ttl_seconds: int = Field(
        default=3600, gt=0, le=86_400, validation_alias="KISHPA_OPERATOR_TOKEN_TTL_SECONDS"
    )
    """The longest an operator token (the provider's or the development issuer's) may live,
    from iat to exp; a longer one is refused (``TOKEN_LIFETIME_TOO_LONG``)."""
    production: bool = Field(default=False, validation_alias="KISHPA_PRODUCTION")
    """Every process: ``1`` refuses to start without mutual TLS and the workload's
    certificate, with a shared service key, or trusting a development operator issuer
    (docs/operations.md "Production identity")."""
    oidc_role_prefix: str = Field(default="kishpa-", validation_alias="KISHPA_OIDC_ROLE_PREFIX")
    """The provider's roles ``<prefix>support``, ``finance``, ``ops`` grant the operator
    roles (docs/api.md "Administration")."""
    admin_approval_threshold: int = Field(
        default=10_000, ge=0, validation_alias="KISHPA_ADMIN_APPROVAL_THRESHOLD"
    )
    """Wallet: credits and debits above this many tokens wait for a second operator."""
    otlp_endpoint: str = Field(default="", validation_alias="KISHPA_OTLP_ENDPOINT")
    """Every service and worker: OpenTelemetry traces over OTLP/gRPC
    (services/common/tracing.py, docs/operations.md "Traces"); unset: tracing off."""
    tls_cert_file: str = Field(default="", validation_alias="KISHPA_TLS_CERT_FILE")
    """The process's certificate chain (PEM): with it every listener speaks TLS. Re-read
    when it changes (rotation); docs/operations.md "TLS and workload identities"."""
    tls_key_file: str = Field(default="", validation_alias="KISHPA_TLS_KEY_FILE")
    """The key of ``KISHPA_TLS_CERT_FILE`` (PEM)."""
    tls_ca_file: str = Field(default="", validation_alias="KISHPA_TLS_CA_FILE")
    """The CA that signs every workload: clients verify servers against it, servers verify
    client certificates."""
    tls_client_auth: bool = Field(default=True, validation_alias="KISHPA_TLS_CLIENT_AUTH")
    """Mutual TLS: gRPC listeners refuse clients without a certificate signed by the CA;
    ``0`` is refused by ``KISHPA_PRODUCTION=1``."""
    tls_server_name: str = Field(default="", validation_alias="KISHPA_TLS_SERVER_NAME")
    """The name expected in servers' certificates when it differs from the dialled host."""
    health_port: int = Field(default=0, ge=0, le=65535, validation_alias="KISHPA_HEALTH_PORT")
    """With TLS: a plaintext port answering only gRPC health checks (kubelet probes cannot
    speak TLS); 0: none."""
    tls_metrics: bool = Field(default=True, validation_alias="KISHPA_TLS_METRICS")
    """``/metrics`` over TLS too; ``0`` for a scraper on localhost."""
    guest_login: bool = Field(default=True, validation_alias="KISHPA_GUEST_LOGIN")
    """Matchmaking: the development login (AuthService.Login mints guests); ``0`` in
    production."""

    wallet_group_commit: int = Field(
        default=64, ge=0, le=1000, validation_alias="KISHPA_WALLET_GROUP_COMMIT"
    )
    """Wallet group commit (services/wallet/group_commit.py, docs/wallet.md): at most this
    many concurrent ``ApplyBatch`` calls share one transaction; 0 applies each in its own."""

    table_turn_seconds: int = Field(
        default=DEFAULT_TURN_SECONDS, ge=1, le=600, validation_alias="KISHPA_TABLE_TURN_SECONDS"
    )
    """Table service and matchmaking (both must read the same value): a turn's time at
    tables created without one; the lobby reads it from ``ListOffers``, the rules pages
    state it (games/table.py)."""
    table_next_deal_pause_ms: int = Field(
        default=DEFAULT_NEXT_DEAL_PAUSE_MS,
        ge=0,
        le=60_000,
        validation_alias="KISHPA_TABLE_NEXT_DEAL_PAUSE_MS",
    )
    """Table service and matchmaking: the longest pause between two deals at tables created
    without one; it ends sooner once every human seat said ``Ready``."""

    stakes_kishpa: Stakes = Field(default=DEFAULT_STAKES, validation_alias="KISHPA_STAKES_KISHPA")
    """Table service and matchmaking (both must read the same list): the stakes Kishpa
    tables may be played at, comma-separated."""
    stakes_hand: Stakes = Field(default=DEFAULT_STAKES, validation_alias="KISHPA_STAKES_HAND")
    """The stakes Hand tables may be played at, like ``KISHPA_STAKES_KISHPA``."""

    def table_defaults(self) -> TableSettings:
        """The table settings a CreateTable gets for the timers it leaves unset."""
        return TableSettings(
            turn_seconds=self.table_turn_seconds,
            next_round_pause_ms=self.table_next_deal_pause_ms,
        )

    def stakes(self) -> dict[str, tuple[int, ...]]:
        """The allowed stakes of each game, by the game's name."""
        return {g.name: tuple(getattr(self, f"stakes_{g.name}")) for g in GAMES}

    # Abuse limits (services.common.limits), counted in the service's Redis.
    rate_limits: bool = Field(default=True, validation_alias="KISHPA_RATE_LIMITS")
    """Table and matchmaking: ``0`` turns the abuse limits off (docs/api.md "Rate
    limits")."""
    limit_logins_per_address: str = Field(
        default="60/minute", validation_alias="KISHPA_LIMIT_LOGINS_PER_ADDRESS"
    )
    """Matchmaking: guest logins per client address."""
    limit_logins_per_device: str = Field(
        default="10/hour", validation_alias="KISHPA_LIMIT_LOGINS_PER_DEVICE"
    )
    """Matchmaking: guest logins per device id."""
    limit_player_writes: str = Field(
        default="60/second", validation_alias="KISHPA_LIMIT_PLAYER_WRITES"
    )
    """Table and matchmaking: mutations per player per service."""
    limit_player_reads: str = Field(
        default="120/second", validation_alias="KISHPA_LIMIT_PLAYER_READS"
    )
    """Table and matchmaking: reads per player per service."""
    limit_streams_per_player: int = Field(
        default=16, gt=0, validation_alias="KISHPA_LIMIT_STREAMS_PER_PLAYER"
    )
    """Table and matchmaking: open ``WatchTable``/``WatchQueue`` streams per player."""
    limit_exempt_loopback: bool = Field(
        default=True, validation_alias="KISHPA_LIMIT_EXEMPT_LOOPBACK"
    )
    """Clients on this host (tools, tests, ``kishpa run``) are not limited per address, and
    a login from there without a device id gets the starting tokens every time; ``0`` if a
    proxy on the same host forwards remote clients."""
    limit_trusted_proxies: str = Field(default="", validation_alias="KISHPA_LIMIT_TRUSTED_PROXIES")
    """Matchmaking: comma-separated CIDRs of proxies (the gRPC-Web edge, a load balancer)
    whose ``x-forwarded-for`` names the real client for the per-address login limit."""
    limits_key_prefix: str = Field(
        default="kishpa:limits", validation_alias="KISHPA_LIMITS_KEY_PREFIX"
    )
    """Table and matchmaking: Redis key prefix of the limits' counters (test stacks sharing
    a Redis give each their own)."""

    @field_validator(
        "limit_logins_per_address",
        "limit_logins_per_device",
        "limit_player_writes",
        "limit_player_reads",
    )
    @classmethod
    def _rate(cls, value: str) -> str:
        from limits import parse

        try:
            parse(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a rate such as '20/second'") from None
        return value

    @field_validator("limit_trusted_proxies")
    @classmethod
    def _proxies(cls, value: str) -> str:
        import ipaddress

        for cidr in (c.strip() for c in value.split(",")):
            if cidr:
                try:
                    ipaddress.ip_network(cidr, strict=False)
                except ValueError:
                    raise ValueError(f"{cidr!r} is not an address or CIDR") from None
        return value

    @property
    def archive_url(self) -> str:
        """The round archive's database: ``ARCHIVE_DATABASE_URL``, else the wallet's."""
        return self.archive_database_url or self.database_url

    @property
    def grpc_address(self) -> str:
        """Where the gRPC server listens (``host:port``)."""
        return f"{self.grpc_host}:{self.grpc_port}"

    def require_token_secret(self) -> str:
        """The player-token key; raises :class:`SettingsError` if it is not configured."""
        return _reveal(self.token_secret, TOKEN_SECRET_ENV)

    def require_broker_url(self) -> str:
        """The Celery broker URL; raises :class:`SettingsError` for a Redis Cluster URL."""
        if urlsplit(self.broker_url).scheme.endswith("+cluster"):
            raise SettingsError(
                "KISHPA_BROKER_URL names a Redis Cluster (it defaults to REDIS_URL): Celery's "
                "Redis broker does not support Cluster; set KISHPA_BROKER_URL to a standalone "
                "Redis or RabbitMQ URL"
            )
        return self.broker_url

    def require_service_secret(self) -> str:
        """The service-credential key; raises :class:`SettingsError` if it is not configured."""
        return _reveal(self.service_secret, SERVICE_SECRET_ENV)

    @property
    def client_certificate(self) -> bool:
        """Whether this process presents a certificate of the CA to the services it calls."""
        return bool(self.tls_ca_file and self.tls_cert_file and self.tls_key_file)

    @property
    def certificate_identity(self) -> bool:
        """Whether workloads are known by their certificates alone (mutual TLS, no shared
        service key): no service credential is sent, and none is needed."""
        return (
            self.client_certificate
            and self.tls_client_auth
            and (self.production or not self.service_secret)
        )

    def require_workload_identity(self) -> None:
        """Raise :class:`SettingsError` unless this process can say which workload it is to
        the services it calls: its client certificate, or (development) the shared key."""
        if self.certificate_identity:
            return
        if self.production:
            raise SettingsError(
                "KISHPA_PRODUCTION=1: the workload needs its certificate (KISHPA_TLS_CERT_FILE, "
                "KISHPA_TLS_KEY_FILE, KISHPA_TLS_CA_FILE)"
            )
        self.require_service_secret()

    def check_production(self) -> None:
        """Raise :class:`SettingsError` naming what a production process must not have."""
        problems = []
        if not self.client_certificate:
            problems.append(
                "set KISHPA_TLS_CERT_FILE, KISHPA_TLS_KEY_FILE and KISHPA_TLS_CA_FILE (a "
                "workload is who its certificate says)"
            )
        if not self.tls_client_auth:
            problems.append("remove KISHPA_TLS_CLIENT_AUTH=0 (mutual TLS is required)")
        if self.service_secret or self.service_secret_previous:
            problems.append(
                f"remove {SERVICE_SECRET_ENV} (and its _FILE/_PREVIOUS): no shared service key "
                "is accepted in production"
            )
        if self.oidc_issuer == DEV_ISSUER or urlsplit(self.oidc_jwks_url).scheme == "file":
            problems.append(
                f"KISHPA_OIDC_ISSUER is the development issuer ({DEV_ISSUER}, or keys from a "
                "file://): trust your identity provider instead"
            )
        if problems:
            raise SettingsError("KISHPA_PRODUCTION=1: " + "; ".join(problems))


def environment_variables() -> dict[str, str]:
    """Every environment variable :class:`Settings` reads, mapped to its field name.

    For deployment checks: a variable set in a manifest but missing here is a typo.
    """
    names = environment_variables_of(Settings)
    names.update({env + SECRET_FILE_SUFFIX: name for name, env in SECRET_FIELDS.items()})
    return names


def _reveal(secret: SecretStr | None, env: str) -> str:
    if secret is None or not secret.get_secret_value():
        raise SettingsError(
            f"{env} is not set: export a random secret of at least {MIN_SECRET_LENGTH} "
            f"characters (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(48))'`)"
        )
    value = secret.get_secret_value()
    if len(value) < MIN_SECRET_LENGTH:
        raise SettingsError(f"{env} is too short: use at least {MIN_SECRET_LENGTH} characters")
    return value


def _problems(exc: ValidationError) -> str:
    """Each error as ``VARIABLE: what is wrong`` (a field's location is its variable)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
        for err in exc.errors()
        # A default computed from a field that failed is noise next to that field's error.
        if err["type"] != "default_factory_not_called"
    )


class SectionSettings(BaseSettings):
    """The settings only one deployable reads (the table service's, the workers'...), beside
    the shared :class:`Settings`: each field's variable is its alias, its docstring its
    description in docs/configuration.md. An empty variable counts as unset."""

    model_config = SettingsConfigDict(
        extra="ignore",
        frozen=True,
        populate_by_name=True,
        use_attribute_docstrings=True,
        env_ignore_empty=True,
    )


SettingsT = TypeVar("SettingsT", bound=BaseSettings)


def load_section(cls: type[SettingsT], **overrides: Any) -> SettingsT:
    """Read ``cls`` from the environment (``overrides``, by field name, win); raises
    :class:`SettingsError` naming each offending variable."""
    try:
        return cls(**overrides)
    except ValidationError as exc:
        raise SettingsError(f"invalid configuration: {_problems(exc)}") from None


def environment_variables_of(cls: type[BaseSettings]) -> dict[str, str]:
    """The environment variables ``cls`` reads, mapped to their field names."""
    prefix = cls.model_config.get("env_prefix", "")
    return {
        (field.validation_alias if isinstance(field.validation_alias, str) else "")
        or f"{prefix}{name.upper()}": name
        for name, field in cls.model_fields.items()
    }


def load_settings(service: str, **overrides: Any) -> Settings:
    """Read the environment for ``service`` and check that its required secrets are present.

    ``overrides`` (field names, e.g. ``grpc_port=0``) win over the environment; tests use them.
    Raises :class:`SettingsError` with a message naming the offending variable.
    """
    try:
        settings = Settings(service=service, **overrides)
    except ValidationError as exc:
        raise SettingsError(f"invalid configuration for {service}: {_problems(exc)}") from None
    if service in BROKER_USERS:
        settings.require_broker_url()
    if settings.production:
        settings.check_production()
    for env in REQUIRED_SECRETS.get(service, ()):
        if env == TOKEN_SECRET_ENV:
            settings.require_token_secret()
        else:
            # Under mutual TLS the certificate says which workload calls: no shared key.
            settings.require_workload_identity()
    return settings
