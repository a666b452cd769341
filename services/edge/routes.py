"""Which RPCs the edge exposes to browsers, and where each one goes.

An allowlist: a method not named here is answered ``UNIMPLEMENTED`` by the edge and never
reaches a service, so service-only RPCs (``WalletService.ApplyBatch``, ``OpenWallet`` for
another player, admin RPCs) cannot be called from a browser even with a stolen service
token. A new player-facing RPC is exposed by adding it here (tests/unit/test_edge_routes.py
fails until every RPC of the public services is either listed here or in ``SERVICE_ONLY``).
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.descriptor import FileDescriptor

from kishpa.auth.v1 import auth_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2
from kishpa.table.v1 import history_pb2, table_pb2
from kishpa.wallet.v1 import wallet_pb2


@dataclass(frozen=True, slots=True)
class Route:
    """One exposed method: the upstream it goes to and whether it streams responses."""

    path: str
    upstream: str
    server_streaming: bool


PUBLIC: dict[tuple[FileDescriptor, str], tuple[str, tuple[str, ...]]] = {
    (auth_pb2.DESCRIPTOR, "AuthService"): ("matchmaking", ("Login", "RefreshToken")),
    (matchmaking_pb2.DESCRIPTOR, "MatchmakingService"): (
        "matchmaking",
        (
            "JoinQueue",
            "CancelQueue",
            "WatchQueue",
            "CreatePrivateTable",
            "JoinByCode",
            "GetMyTable",
            "ListOffers",
        ),
    ),
    (table_pb2.DESCRIPTOR, "TableService"): (
        "table",
        (
            "CreateTable",
            "JoinTable",
            "LeaveTable",
            "StartGame",
            "GetTable",
            "Draw",
            "Discard",
            "Win",
            "RevealKishpa",
            "DeclineReveal",
            "PressLastRound",
            "SetRackOrder",
            "GetHint",
            "WatchTable",
            "LayMelds",
            "LayOff",
            "ReleaseJoker",
            "UndoTurn",
            "GetRoundRecord",
            "Contribute",
            "Ready",
            "PlayAgain",
        ),
    ),
    # The round archive: a player's own games and the rounds of tables he played at.
    (history_pb2.DESCRIPTOR, "HistoryService"): ("table", ("ListPlayerGames", "ListTableRounds")),
    # The player's own wallet, read only (the wallet refuses other accounts to a player).
    (wallet_pb2.DESCRIPTOR, "WalletService"): ("wallet", ("GetBalance", "ListTransfers")),
}

SERVICE_ONLY: dict[str, frozenset[str]] = {
    "kishpa.wallet.v1.WalletService": frozenset(
        {"ApplyBatch", "ApplyBatches", "OpenWallet", "LoadTokens"}
        # Finance: services and finance operators, never a browser.
        | {
            "ExportTransfers",
            "GetReasonTotals",
            "GetBalancesAsOf",
            "GetPeriodSummary",
            "GetTableLedger",
            "ListTableAccounts",
            "ListReconciliationRuns",
            "RecordReconciliationRun",
            # Finance step 2.
            "GetAccountStatement",
            "ListAccounts",
            "ListClosedPeriods",
        }
    ),
    # Admin only (the audited close of a stuck table; kishpa.admin.v1 is not exposed at all).
    "kishpa.table.v1.TableService": frozenset({"CloseTable"}),
}
"""RPCs of the public services deliberately not exposed: money-moving and service calls
(``LoadTokens`` is a mutation of the wallet; the web client only reads it)."""


def public_routes() -> dict[str, Route]:
    """Every exposed method by its HTTP path (``/kishpa.table.v1.TableService/Draw``)."""
    routes: dict[str, Route] = {}
    for (file, service_name), (upstream, methods) in PUBLIC.items():
        service = file.services_by_name[service_name]
        for name in methods:
            method = service.methods_by_name[name]
            if method.client_streaming:
                raise ValueError(f"{service.full_name}/{name}: client streaming is not offered")
            path = f"/{service.full_name}/{name}"
            routes[path] = Route(path, upstream, method.server_streaming)
    return routes
