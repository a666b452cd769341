"""Who may call which RPC: the one declaration every server enforces.

A caller has one or more *identities*: ``player``; ``service:<workload>`` for a workload
(under mutual TLS, the one its client certificate names; in development, a service credential,
which on a TLS port must match that certificate);
``admin:<role>`` for each role of an operator (``support`` reads, ``finance`` credits and
debits and approves, ``ops`` closes tables). :data:`ACCESS` maps every RPC of the Kishpa
contract to the identities that may call it; ``anyone`` marks the public ones (health,
reflection, guest login). :class:`~services.common.auth.AuthInterceptor` refuses every
other caller with ``PERMISSION_DENIED`` before a servicer runs, and an RPC of a ``kishpa.``
service missing here is refused to all (deny by default; a unit test keeps the table
complete). ``docs/api.md`` (*Who may call what*) is generated from this table by
:func:`markdown_table` and a test keeps the two equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

ANYONE: Final = "anyone"
PLAYER: Final = "player"
SUPPORT: Final = "admin:support"
FINANCE: Final = "admin:finance"
OPS: Final = "admin:ops"

OPERATOR_ROLES: Final = ("support", "finance", "ops")
"""The operator roles, least privileged first."""

WORKLOADS: Final = ("wallet", "table", "matchmaking", "worker", "beat", "edge")
"""Every workload with an identity of its own (a certificate, docs/operations.md)."""

PROXIES: Final = frozenset({"edge"})
"""Workloads that only forward other callers' calls (with their tokens): a call over their
certificate without a token is nobody (``TOKEN_MISSING``), so a browser that lost its token
hears it must sign in again, not that the edge may not call."""


def service(name: str) -> str:
    """The identity of workload ``name`` calling with its service credential."""
    return f"service:{name}"


WALLET, TABLE, MATCHMAKING, WORKER = (
    service("wallet"),
    service("table"),
    service("matchmaking"),
    service("worker"),
)
OPERATORS: Final = frozenset({SUPPORT, FINANCE, OPS})


def _all(methods: Iterable[str], *identities: str) -> dict[str, frozenset[str]]:
    return {m: frozenset(identities) for m in methods}


_AUTH = "/kishpa.auth.v1.AuthService/"
_MM = "/kishpa.matchmaking.v1.MatchmakingService/"
_TABLE = "/kishpa.table.v1.TableService/"
_HISTORY = "/kishpa.table.v1.HistoryService/"
_WALLET = "/kishpa.wallet.v1.WalletService/"
_ADMIN = "/kishpa.admin.v1.AdminService/"

ACCESS: Final[Mapping[str, frozenset[str]]] = {
    # Probes and tools: no token at all.
    "/grpc.health.v1.Health/Check": frozenset({ANYONE}),
    "/grpc.health.v1.Health/Watch": frozenset({ANYONE}),
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": frozenset({ANYONE}),
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": frozenset({ANYONE}),
    _AUTH + "Login": frozenset({ANYONE}),
    _AUTH + "RefreshToken": frozenset({PLAYER}),
    **_all(
        (
            _MM + m
            for m in (
                "JoinQueue",
                "CancelQueue",
                "WatchQueue",
                "CreatePrivateTable",
                "JoinByCode",
                "GetMyTable",
                "ListOffers",
            )
        ),
        PLAYER,
    ),
    # Matchmaking seats players through its service path; nobody else may seat others.
    _TABLE + "CreateTable": frozenset({PLAYER, MATCHMAKING}),
    _TABLE + "JoinTable": frozenset({PLAYER, MATCHMAKING}),
    # The drift check (workers' credential) reads each table's bowl and pot as a spectator.
    _TABLE + "GetTable": frozenset({PLAYER, MATCHMAKING, WORKER}),
    **_all(
        (
            _TABLE + m
            for m in (
                "LeaveTable",
                "StartGame",
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
            )
        ),
        PLAYER,
    ),
    # The round archive (issue 31): a player reads his own games and the rounds he sat in;
    # support reads any player's history, the wallet's finance tools follow a round.
    _HISTORY + "ListPlayerGames": frozenset({PLAYER, SUPPORT, WALLET}),
    _HISTORY + "ListTableRounds": frozenset({PLAYER, SUPPORT, WALLET}),
    # The admin service's own path: closing a table for an operator.
    _TABLE + "CloseTable": frozenset({WALLET}),
    _WALLET + "OpenWallet": frozenset({PLAYER, MATCHMAKING, WORKER}),
    _WALLET + "GetBalance": frozenset({PLAYER, TABLE, MATCHMAKING, WORKER}),
    _WALLET + "LoadTokens": frozenset({PLAYER}),
    _WALLET + "ListTransfers": frozenset({PLAYER, WORKER}),
    # Only the settlement worker moves tokens by batch (operators: AdminService).
    _WALLET + "ApplyBatch": frozenset({WORKER}),
    _WALLET + "ApplyBatches": frozenset({WORKER}),
    # Finance reads (issue 24): finance operators, and the reconciliation and drift jobs,
    # which run with the workers' credential (the beat task, the CronJobs).
    **_all(
        (
            _WALLET + m
            for m in (
                "ExportTransfers",
                "GetReasonTotals",
                "GetBalancesAsOf",
                "GetPeriodSummary",
                "GetTableLedger",
                "ListTableAccounts",
                "ListReconciliationRuns",
                "GetAccountStatement",
                "ListAccounts",
                "ListClosedPeriods",
            )
        ),
        FINANCE,
        WORKER,
    ),
    # Only the jobs store a run (the wallet stores its own ledger runs directly).
    _WALLET + "RecordReconciliationRun": frozenset({WORKER}),
    _ADMIN + "CreditPlayer": frozenset({FINANCE}),
    _ADMIN + "DebitPlayer": frozenset({FINANCE}),
    _ADMIN + "ApproveAdjustment": frozenset({FINANCE}),
    # Finance step 2: closing a month is a finance operator's act, audited.
    _ADMIN + "ClosePeriod": frozenset({FINANCE}),
    _ADMIN + "CloseTable": frozenset({OPS}),
    _ADMIN + "ListPlayerTables": OPERATORS,
    _ADMIN + "ListPlayerTransfers": OPERATORS,
    _ADMIN + "ListAuditEntries": OPERATORS,
}
"""Full method name -> the identities that may call it."""

DECLARED_PREFIX: Final = "/kishpa."
"""The contract's services: every RPC of theirs is in the table below."""

CONTRACT_SERVICES: Final = frozenset(m.rsplit("/", 1)[0] for m in ACCESS)
"""Services whose RPCs are declared here: an RPC of theirs missing from :data:`ACCESS` is
refused to everyone (deny by default)."""


def allowed(method: str, identities: Iterable[str]) -> bool | None:
    """Whether a caller with ``identities`` may call ``method``; None for a method of a
    service outside the contract (a test's own), where a valid token is enough."""
    declared = ACCESS.get(method)
    if declared is None:
        return False if method.rsplit("/", 1)[0] in CONTRACT_SERVICES else None
    return ANYONE in declared or not declared.isdisjoint(identities)


def caller_kind(identities: Iterable[str]) -> str:
    """``player``, ``service`` or ``operator``: the kind of caller ``identities`` make."""
    who = set(identities)
    if PLAYER in who:
        return "player"
    if any(i.startswith("admin:") for i in who):
        return "operator"
    return "service"


def refusal(method: str, identities: frozenset[str]) -> tuple[str, str]:
    """The reason and message of refusing ``identities`` on ``method``.

    One rule for every kind of caller (docs/api.md, *Who may call what*): a caller of the
    right kind who lacks the grant hears what he lacks (an operator ``ROLE_REQUIRED``, a
    service ``SERVICE_NOT_ALLOWED``); a caller of the wrong kind hears which kind may call
    (``PLAYER_REQUIRED`` before ``SERVICE_REQUIRED`` before ``ADMIN_REQUIRED``).
    """
    declared = ACCESS.get(method, frozenset())
    name = method.rsplit("/", 1)[-1]
    services = sorted(d.removeprefix("service:") for d in declared if d.startswith("service:"))
    roles = sorted(d.removeprefix("admin:") for d in declared & OPERATORS)
    if not declared:
        return "METHOD_NOT_DECLARED", f"{name} is not open to any caller"
    kind = caller_kind(identities)
    if kind == "operator" and roles:
        return "ROLE_REQUIRED", f"{name} needs the operator role {', '.join(roles)}"
    if kind == "service" and services:
        return "SERVICE_NOT_ALLOWED", f"{name} may be called only by {', '.join(services)}"
    if PLAYER in declared:
        return "PLAYER_REQUIRED", f"{name} must be called by a player"
    if services:
        also = " (or an operator with its role)" if roles else ""
        return "SERVICE_REQUIRED", f"only an internal service{also} may call {name}"
    return "ADMIN_REQUIRED", f"only an operator may call {name}"


def markdown_table(access: Mapping[str, frozenset[str]] = ACCESS) -> str:
    """The table of ``docs/api.md`` (*Who may call what*), one row per RPC."""
    columns = [PLAYER, *(service(w) for w in WORKLOADS), SUPPORT, FINANCE, OPS]
    header = "| RPC | " + " | ".join(f"`{c}`" for c in columns) + " |"
    rule = "|---|" + "---|" * len(columns)
    rows = [header, rule]
    for method in sorted(m for m in access if m.startswith(DECLARED_PREFIX)):
        declared = access[method]
        short = method.removeprefix("/kishpa.").replace(".v1.", ".", 1)
        if ANYONE in declared:
            cells = ["anyone"] * len(columns)
        else:
            cells = ["yes" if c in declared else "" for c in columns]
        rows.append(f"| `{short}` | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"
