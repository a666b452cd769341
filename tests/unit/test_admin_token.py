"""Admin tokens: a caller of its own kind, signed with the service key, refused elsewhere."""

from __future__ import annotations

import pytest

from services.common.auth import (
    Admin,
    Player,
    TokenAuthority,
    acting_as,
    caller_label,
    current_player,
    require_admin,
    require_service,
)
from services.common.errors import PermissionDenied, Unauthenticated

pytestmark = pytest.mark.unit


def authority() -> TokenAuthority:
    return TokenAuthority("t" * 40, "v" * 40, service_token_ttl_seconds=60)


def test_an_admin_token_names_an_admin_who_is_neither_player_nor_service() -> None:
    auth = authority()
    admin = auth.verify(auth.issue_admin_token("ops-ann", "Ann").token)
    assert admin == Admin("ops-ann", "Ann")
    assert caller_label(admin) == "admin:ops-ann"
    with acting_as(admin):
        assert require_admin() == admin
        with pytest.raises(PermissionDenied) as not_player:
            current_player()
        assert not_player.value.reason == "PLAYER_REQUIRED"
        with pytest.raises(PermissionDenied):
            require_service()


def test_players_and_services_are_not_admins() -> None:
    auth = authority()
    for caller in (auth.verify(auth.issue_player_token("p1", "P").token), None):
        with acting_as(caller), pytest.raises((PermissionDenied, Unauthenticated)) as refused:
            require_admin()
        if caller is not None:
            assert isinstance(caller, Player)
            assert refused.value.reason == "ADMIN_REQUIRED"
    with (
        acting_as(auth.verify(auth.issue_service_token("worker").token)),
        pytest.raises(PermissionDenied),
    ):
        require_admin()


def test_an_admin_token_needs_the_service_key() -> None:
    token = TokenAuthority("x" * 40, "y" * 40).issue_admin_token("ops").token
    with pytest.raises(Unauthenticated):
        authority().verify(token)
    with pytest.raises(Unauthenticated):
        TokenAuthority("t" * 40).verify(authority().issue_admin_token("ops").token)
