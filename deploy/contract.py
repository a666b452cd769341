"""What the manifests must agree with: the processes, their ports, health names and secrets.

Ports, required secrets and environment variable names come from the code that reads them
(``services.common.settings``), so a change there that the manifests miss fails the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cli.configuration
import services.edge.server
import services.edge.settings
from services.common.settings import (
    DEFAULT_GRPC_PORTS,
    DEFAULT_METRICS_PORTS,
    REQUIRED_SECRETS,
    SERVICE_SECRET_ENV,
    TOKEN_SECRET_ENV,
    Settings,
)

DATABASE_URL_ENV = "DATABASE_URL"
ARCHIVE_URL_ENV = "ARCHIVE_DATABASE_URL"


@dataclass(frozen=True)
class Secret:
    """A Kubernetes Secret the operators create by hand (never committed)."""

    name: str
    key: str


# Each secret environment variable and the Secret/key it is read from in every manifest.
SECRETS: dict[str, Secret] = {
    TOKEN_SECRET_ENV: Secret("kishpa-token-key", "secret"),
    SERVICE_SECRET_ENV: Secret("kishpa-service-key", "secret"),
    DATABASE_URL_ENV: Secret("kishpa-database", "url"),
    # The round archive's role: its own tables only (docs/operations.md).
    ARCHIVE_URL_ENV: Secret("kishpa-archive-database", "url"),
}


@dataclass(frozen=True)
class Workload:
    """One process the image runs: its ``kishpa`` arguments and what it needs."""

    name: str
    args: tuple[str, ...]
    grpc_port: int | None
    metrics_port: int | None
    health_service: str | None
    secrets: frozenset[str]
    kind: str = "Deployment"
    # Secrets this workload reads from another Secret than SECRETS says (a narrower grant).
    secret_sources: dict[str, Secret] = field(default_factory=dict)
    # An HTTP server (the browser edge): its port, the variable setting it, and the paths of
    # its readiness and liveness probes.
    http_port: int | None = None
    http_port_env: str = ""
    http_probes: tuple[str, str] = ("", "")

    def secret_source(self, env: str) -> Secret:
        """The Secret and key ``env`` must come from for this workload."""
        return self.secret_sources.get(env, SECRETS[env])


def _grpc(name: str, health_service: str) -> Workload:
    return Workload(
        name=name,
        args=("serve", name),
        grpc_port=DEFAULT_GRPC_PORTS[name],
        metrics_port=DEFAULT_METRICS_PORTS[name],
        health_service=health_service,
        secrets=frozenset(REQUIRED_SECRETS[name]) | _database(name),
    )


def _database(name: str) -> frozenset[str]:
    # docs/DEVELOPING.md: DATABASE_URL is used by the wallet and the migrations (and the
    # reconciliation, which reads the same ledger); ARCHIVE_DATABASE_URL by the workers that
    # write the round archive and the table service that reads it.
    if name in ("wallet", "migrate", "reconcile"):
        return frozenset({DATABASE_URL_ENV})
    if name in ("table", "worker", "drift"):
        return frozenset({ARCHIVE_URL_ENV})
    return frozenset()


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        _grpc("wallet", "kishpa.wallet.v1.WalletService"),
        _grpc("table", "kishpa.table.v1.TableService"),
        _grpc("matchmaking", "kishpa.matchmaking.v1.MatchmakingService"),
        Workload(
            "worker",
            ("worker",),
            None,
            DEFAULT_METRICS_PORTS["worker"],
            None,
            frozenset(REQUIRED_SECRETS["worker"]) | _database("worker"),
        ),
        Workload("beat", ("beat",), None, None, None, frozenset(REQUIRED_SECRETS["beat"])),
        Workload(
            "edge",
            ("serve", "edge"),
            None,
            None,
            None,
            frozenset(),
            http_port=services.edge.settings.DEFAULT_PORT,
            http_port_env="KISHPA_EDGE_PORT",
            http_probes=services.edge.server.PROBES,
        ),
        Workload("migrate", ("migrate",), None, None, None, _database("migrate"), kind="Job"),
        Workload(
            "reconcile",
            (
                "wallet",
                "reconcile",
                "--json",
                "--full-every-days",
                "7",
                "--source",
                "cronjob",
                "--record-to",
                "wallet",
            ),
            None,
            None,
            None,
            # It stores its run record through the wallet, with the service credential.
            _database("reconcile") | {SERVICE_SECRET_ENV},
            kind="CronJob",
            # Reconciliation only reads: its URL is meant for a read-only database role.
            secret_sources={DATABASE_URL_ENV: Secret("kishpa-database-readonly", "url")},
        ),
        # The round archive's retention: reads the ledger (read-only role), prunes the
        # archive (its own role).
        Workload(
            "history-prune",
            ("history", "prune"),
            None,
            None,
            None,
            frozenset({DATABASE_URL_ENV, ARCHIVE_URL_ENV}),
            kind="CronJob",
            secret_sources={DATABASE_URL_ENV: Secret("kishpa-database-readonly", "url")},
        ),
        # The drift check: Redis, the table service, the wallet and the round archive (its
        # watermark); never the ledger's database.
        Workload(
            "drift",
            ("wallet", "drift", "--json", "--source", "cronjob"),
            None,
            None,
            None,
            frozenset({SERVICE_SECRET_ENV}) | _database("drift"),
            kind="CronJob",
        ),
    )
}

# Who may reach which datastore or port; everything else must be refused by the policies.
# EXTERNAL is any client outside the namespace (players, through the gateway).
EXTERNAL = "<outside the namespace>"
REACHABILITY: dict[tuple[str, int], frozenset[str]] = {
    ("postgres", 5432): frozenset(
        {"wallet", "migrate", "reconcile", "worker", "table", "history-prune", "drift"}
    ),
    ("redis", 6379): frozenset({"table", "matchmaking", "worker", "beat", "drift"}),
    # Workers settle rounds; matchmaking's login opens the player's wallet; the table
    # service reads seated players' balances; the browser edge forwards a player's own
    # balance and history reads; the reconciliation and drift jobs record their runs (and the
    # drift check reads the ledger's side of each table).
    ("wallet", DEFAULT_GRPC_PORTS["wallet"]): frozenset(
        {"worker", "matchmaking", "table", "edge", "reconcile", "drift"}
    ),
    # ... and the wallet's AdminService closes a stuck table (TableService.CloseTable).
    # ... and the drift check reads each table's bowl and pot (GetTable).
    ("table", DEFAULT_GRPC_PORTS["table"]): frozenset(
        {"matchmaking", "wallet", "edge", "drift", EXTERNAL}
    ),
    ("matchmaking", DEFAULT_GRPC_PORTS["matchmaking"]): frozenset({"edge", EXTERNAL}),
    ("edge", services.edge.settings.DEFAULT_PORT): frozenset({EXTERNAL}),
}


def settings_env_vars() -> frozenset[str]:
    """Every environment variable the processes read: the fields of every settings class
    (docs/configuration.md)."""
    return cli.configuration.variables()


def default_shutdown_grace_seconds() -> float:
    """How long a service waits for in-flight calls after SIGTERM, unless configured."""
    default = Settings.model_fields["shutdown_grace_seconds"].default
    return float(default)
