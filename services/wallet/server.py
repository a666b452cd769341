"""The wallet's gRPC server: ``create_wallet_server`` for tests, ``main`` for ``kishpa serve
wallet``."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from kishpa.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from services.common.auth import TokenAuthority
from services.common.server import KishpaServer, ServiceRegistration, create_server, run
from services.common.settings import Settings, SettingsError, load_settings
from services.common.tls import client_tls_from_settings
from services.common.tracing import configure_tracing
from services.wallet.admin import Administration
from services.wallet.admin_servicer import AdminServicer, admin_registration
from services.wallet.database import create_wallet_engine
from services.wallet.group_commit import GroupCommitter
from services.wallet.ledger import Ledger
from services.wallet.migrate import current_revision, head_revision, upgrade
from services.wallet.servicer import WalletServicer

SERVICE_NAME = wallet_pb2.DESCRIPTOR.services_by_name["WalletService"].full_name
# Threads that run ledger transactions; PostgreSQL gets as many pooled connections.
POSTGRES_WORKERS = 16
SQLITE_WORKERS = 4
# Shared transactions in flight at once on PostgreSQL (each holds one pooled connection).
GROUP_COMMIT_THREADS = 4


@dataclass
class WalletServer:
    """A created wallet server with the engine and threads it owns."""

    server: KishpaServer
    engine: Engine
    executor: ThreadPoolExecutor
    admin: AdminServicer | None = None
    committer: GroupCommitter | None = None

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.server.port

    async def start(self) -> None:
        """Start serving."""
        await self.server.start()

    async def stop(self, grace: float | None = None) -> None:
        """Stop serving (health NOT_SERVING first), then release threads and connections."""
        await self.server.stop(grace)
        if self.admin is not None:
            await self.admin.aclose()
        self.close()

    def close(self) -> None:
        """Release the threads and database connections."""
        if self.committer is not None:
            self.committer.close()
        self.executor.shutdown(wait=True)
        self.engine.dispose()


def _is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def prepare_database(url: str) -> None:
    """Migrate an embedded SQLite ledger; refuse to serve a PostgreSQL one not at head."""
    if _is_sqlite(url):
        upgrade(url)
        return
    current, head = current_revision(url), head_revision()
    if current != head:
        raise SettingsError(
            f"the wallet database is at revision {current}, this code needs {head}: "
            "run `kishpa migrate` first"
        )


def wallet_registration(
    ledger: Ledger, executor: ThreadPoolExecutor, committer: GroupCommitter | None = None
) -> ServiceRegistration:
    """The wallet servicer, ready for ``create_server``."""
    return ServiceRegistration(
        SERVICE_NAME,
        WalletServicer(ledger, executor, committer),
        wallet_pb2_grpc.add_WalletServiceServicer_to_server,
    )


def admin_servicer(
    settings: Settings, ledger: Ledger, executor: ThreadPoolExecutor
) -> AdminServicer:
    """The audited admin RPCs over this ledger (they reach the table service to close one)."""
    return AdminServicer(
        Administration(ledger, approval_threshold=settings.admin_approval_threshold),
        executor,
        TokenAuthority.from_settings(settings),
        settings.table_addr,
        tls=client_tls_from_settings(settings),
    )


def group_committer(settings: Settings, ledger: Ledger) -> GroupCommitter | None:
    """Group commit as configured (``KISHPA_WALLET_GROUP_COMMIT``; 0: off)."""
    if settings.wallet_group_commit == 0:
        return None
    # SQLite has one writer at a time: one committer thread; PostgreSQL overlaps a few.
    threads = 1 if _is_sqlite(settings.database_url) else GROUP_COMMIT_THREADS
    return GroupCommitter(ledger, threads=threads, max_group=settings.wallet_group_commit)


def create_wallet_server(
    settings: Settings, *, address: str | None = None, migrate: bool = False
) -> WalletServer:
    """A wallet server on ``settings.database_url`` (``address`` e.g. ``127.0.0.1:0``).

    With ``migrate`` the database is first upgraded to the newest schema.
    """
    if migrate:
        upgrade(settings.database_url)
    workers = SQLITE_WORKERS if _is_sqlite(settings.database_url) else POSTGRES_WORKERS
    engine = create_wallet_engine(settings.database_url, pool_size=workers + GROUP_COMMIT_THREADS)
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ledger")
    ledger = Ledger(engine)
    admin = admin_servicer(settings, ledger, executor)
    committer = group_committer(settings, ledger)
    server = create_server(
        [wallet_registration(ledger, executor, committer), admin_registration(admin)],
        settings,
        address=address,
        on_refusal=admin.refused,
    )
    return WalletServer(server, engine, executor, admin, committer)


def main() -> int:
    """``kishpa serve wallet``: serve until SIGTERM/SIGINT."""
    try:
        settings = load_settings("wallet")
        prepare_database(settings.database_url)
        configure_tracing(settings.service, settings.otlp_endpoint)  # before the engine
    except SettingsError as exc:
        print(f"kishpa serve wallet: {exc}", file=sys.stderr)
        return 2
    workers = SQLITE_WORKERS if _is_sqlite(settings.database_url) else POSTGRES_WORKERS
    engine = create_wallet_engine(settings.database_url, pool_size=workers + GROUP_COMMIT_THREADS)
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ledger")

    ledger = Ledger(engine)
    admin = admin_servicer(settings, ledger, executor)
    committer = group_committer(settings, ledger)

    async def cleanup() -> None:
        await admin.aclose()
        if committer is not None:
            committer.close()
        executor.shutdown(wait=True)
        engine.dispose()

    registrations = [
        wallet_registration(ledger, executor, committer),
        admin_registration(admin),
    ]
    return run(settings, registrations, cleanup=cleanup, on_refusal=admin.refused)


if __name__ == "__main__":
    sys.exit(main())
