"""Who a call counts as for the per-address limits (no Redis needed)."""

from __future__ import annotations

import pytest
from limits import parse

from services.common.limits import (
    LimitConfig,
    caller_address,
    client_address,
    device_key,
    is_loopback,
)
from services.common.settings import SettingsError, load_settings

pytestmark = pytest.mark.unit


def config(proxies: str = "", exempt: bool = True) -> LimitConfig:
    settings = load_settings(
        "matchmaking",
        token_secret="t" * 40,
        service_secret="s" * 40,
        limit_trusted_proxies=proxies,
        limit_exempt_loopback=exempt,
    )
    return LimitConfig.from_settings(settings)


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:10.1.2.3:5555", "10.1.2.3"),
        ("ipv6:[2001:db8::1]:443", "2001:db8::1"),
        ("ipv6:[::1]:50000", "::1"),
        ("unix:/tmp/sock", "unix:/tmp/sock"),
    ],
)
def test_client_address_of_a_grpc_peer(peer: str, address: str) -> None:
    assert client_address(peer) == address


def test_loopback_is_exempt_only_when_configured() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert not is_loopback("10.0.0.1")
    assert device_key("", "127.0.0.1", config()) is None
    assert device_key("", "127.0.0.1", config(exempt=False)) == "address:127.0.0.1"
    assert device_key("phone-1", "127.0.0.1", config()) == "device:phone-1"


def test_forwarded_for_counts_only_from_a_trusted_proxy() -> None:
    edge = "ipv4:10.0.0.5:4000"
    md = (("x-forwarded-for", "203.0.113.9, 10.0.0.7"),)
    # Untrusted peer: the header is ignored (a client cannot pick its own address).
    assert caller_address(edge, md, config()) == "10.0.0.5"
    # Trusted edge and load balancer: the nearest untrusted hop is the client.
    assert caller_address(edge, md, config("10.0.0.0/24")) == "203.0.113.9"
    # No header, or a malformed one: the proxy itself is counted.
    assert caller_address(edge, (), config("10.0.0.0/24")) == "10.0.0.5"
    bad = (("x-forwarded-for", "not-an-ip"),)
    assert caller_address(edge, bad, config("10.0.0.0/24")) == "10.0.0.5"


def test_settings_refuse_bad_rates_and_cidrs() -> None:
    with pytest.raises(SettingsError):
        load_settings("matchmaking", limit_player_writes="lots")
    with pytest.raises(SettingsError):
        load_settings("matchmaking", limit_trusted_proxies="10.0.0.0/99")
    assert parse("60/second").amount == 60
