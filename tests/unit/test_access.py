"""The access table: complete for the contract, equal to docs/api.md, refusals by kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from kishpa.admin.v1 import admin_pb2
from kishpa.auth.v1 import auth_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2
from kishpa.table.v1 import history_pb2, table_pb2
from kishpa.wallet.v1 import wallet_pb2
from services.common.access import ACCESS, WORKLOADS, allowed, markdown_table, refusal

pytestmark = pytest.mark.unit

DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"
BEGIN = "<!-- access-table:begin (generated from services/common/access.py) -->\n"
END = "<!-- access-table:end -->"


def contract_methods() -> set[str]:
    methods = set()
    for module in (admin_pb2, auth_pb2, matchmaking_pb2, table_pb2, history_pb2, wallet_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            methods.update(f"/{service.full_name}/{m.name}" for m in service.methods)
    return methods


def test_every_rpc_of_the_contract_is_declared_and_nothing_else() -> None:
    declared = {m for m in ACCESS if m.startswith("/kishpa.")}
    assert contract_methods() == declared


def test_the_docs_table_is_the_generated_one() -> None:
    text = DOCS.read_text()
    assert BEGIN in text, "docs/api.md lost its access-table markers"
    assert END in text, "docs/api.md lost its access-table markers"
    documented = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert documented == markdown_table(), (
        "docs/api.md's access table differs from the code: paste "
        "`python -m services.common.access` between the markers"
    )


def test_least_privilege_where_the_issue_asks_for_it() -> None:
    apply = "/kishpa.wallet.v1.WalletService/ApplyBatch"
    assert ACCESS[apply] == {"service:worker"}
    seat = "/kishpa.table.v1.TableService/JoinTable"
    assert {i for i in ACCESS[seat] if i.startswith("service:")} == {"service:matchmaking"}
    for method, who in ACCESS.items():
        if not ({"player", "anyone"} & who):
            assert not allowed(method, {"player"}), method


@pytest.mark.parametrize(
    ("method", "who", "reason"),
    [
        ("/kishpa.wallet.v1.WalletService/ApplyBatch", {"player"}, "SERVICE_REQUIRED"),
        (
            "/kishpa.wallet.v1.WalletService/ApplyBatch",
            {"service:matchmaking"},
            "SERVICE_NOT_ALLOWED",
        ),
        ("/kishpa.wallet.v1.WalletService/LoadTokens", {"service:worker"}, "PLAYER_REQUIRED"),
        ("/kishpa.admin.v1.AdminService/CreditPlayer", {"player"}, "ADMIN_REQUIRED"),
        ("/kishpa.admin.v1.AdminService/CreditPlayer", {"admin:support"}, "ROLE_REQUIRED"),
        ("/kishpa.admin.v1.AdminService/CloseTable", {"admin:finance"}, "ROLE_REQUIRED"),
        ("/kishpa.table.v1.TableService/Draw", {"admin:ops"}, "PLAYER_REQUIRED"),
        ("/kishpa.table.v1.TableService/Nope", {"player"}, "METHOD_NOT_DECLARED"),
        # Issue 32: each kind of caller hears the reason the docs name for his kind.
        ("/kishpa.wallet.v1.WalletService/ApplyBatch", {"admin:finance"}, "SERVICE_REQUIRED"),
        ("/kishpa.table.v1.TableService/CloseTable", {"admin:ops"}, "SERVICE_REQUIRED"),
        ("/kishpa.wallet.v1.WalletService/GetBalance", {"admin:support"}, "PLAYER_REQUIRED"),
        ("/kishpa.admin.v1.AdminService/CreditPlayer", {"service:table"}, "ADMIN_REQUIRED"),
        ("/kishpa.wallet.v1.WalletService/ExportTransfers", {"player"}, "SERVICE_REQUIRED"),
        ("/kishpa.wallet.v1.WalletService/ExportTransfers", {"admin:ops"}, "ROLE_REQUIRED"),
        (
            "/kishpa.wallet.v1.WalletService/ExportTransfers",
            {"service:table"},
            "SERVICE_NOT_ALLOWED",
        ),
        ("/kishpa.table.v1.TableService/Draw", {"service:matchmaking"}, "PLAYER_REQUIRED"),
    ],
)
def test_refusals_say_what_was_missing(method: str, who: set[str], reason: str) -> None:
    assert allowed(method, who) is False
    assert refusal(method, frozenset(who))[0] == reason


def test_a_service_outside_the_contract_is_left_to_the_token() -> None:
    assert allowed("/kishpa.test.v1.ProbeService/Whoami", {"player"}) is None


KIND_REASONS = {
    # docs/api.md, "Who may call what": the reasons each kind of caller may hear.
    "player": {"SERVICE_REQUIRED", "ADMIN_REQUIRED"},
    "service": {"SERVICE_NOT_ALLOWED", "PLAYER_REQUIRED", "ADMIN_REQUIRED"},
    "operator": {"ROLE_REQUIRED", "PLAYER_REQUIRED", "SERVICE_REQUIRED"},
}


def test_no_caller_hears_a_reason_meant_for_another_kind() -> None:
    callers = {
        "player": [frozenset({"player"})],
        "service": [frozenset({f"service:{w}"}) for w in WORKLOADS],
        "operator": [frozenset({r}) for r in ("admin:support", "admin:finance", "admin:ops")],
    }
    for method in (m for m in ACCESS if m.startswith("/kishpa.")):
        for kind, identities in callers.items():
            for who in identities:
                if allowed(method, who):
                    continue
                reason = refusal(method, who)[0]
                assert reason in KIND_REASONS[kind], (method, sorted(who), reason)
