"""Player tokens and service credentials: issue, verify, refresh, and every way to be refused."""

from __future__ import annotations

import jwt
import pytest

from services.common.auth import (
    ISSUER,
    Player,
    Service,
    ServiceCredentials,
    TokenAuthority,
    acting_as,
    bearer_metadata,
    bearer_token,
    current_caller,
    current_player,
    require_service,
)
from services.common.errors import PermissionDenied, Unauthenticated

pytestmark = pytest.mark.unit

TOKEN_KEY = "t" * 40
SERVICE_KEY = "v" * 40


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def authority(clock: Clock | None = None) -> TokenAuthority:
    return TokenAuthority(
        TOKEN_KEY,
        SERVICE_KEY,
        token_ttl_seconds=600,
        service_token_ttl_seconds=60,
        clock=clock or Clock(),
    )


def test_player_token_round_trip_and_claims() -> None:
    clock = Clock()
    issued = authority(clock).issue_player_token("p-42", "Dana")
    assert issued.expires_at == int(clock.now) + 600
    claims = jwt.decode(issued.token, options={"verify_signature": False})
    assert claims == {
        "sub": "p-42",
        "name": "Dana",
        "typ": "player",
        "iss": ISSUER,
        "iat": int(clock.now),
        "exp": issued.expires_at,
    }
    assert jwt.get_unverified_header(issued.token)["alg"] == "HS256"
    assert authority(clock).verify_player_token(issued.token) == Player("p-42", "Dana")
    assert authority(clock).verify(issued.token) == Player("p-42", "Dana")


def test_expired_token_refused_with_reason() -> None:
    clock = Clock()
    token = authority(clock).issue_player_token("p1", "A").token
    clock.now += 600 + 60
    with pytest.raises(Unauthenticated) as info:
        authority(clock).verify_player_token(token)
    assert info.value.reason == "TOKEN_EXPIRED"


def test_forged_signature_refused() -> None:
    forged = TokenAuthority("f" * 40).issue_player_token("p1", "A").token
    with pytest.raises(Unauthenticated) as info:
        authority().verify(forged)
    assert info.value.reason == "TOKEN_INVALID"


def test_tampered_claims_refused() -> None:
    token = authority().issue_player_token("p1", "A").token
    header, payload, signature = token.split(".")
    other = authority().issue_player_token("p2", "B").token.split(".")[1]
    with pytest.raises(Unauthenticated):
        authority().verify(f"{header}.{other}.{signature}")
    assert payload != other


def test_alg_none_refused() -> None:
    unsigned = jwt.encode(
        {"sub": "p1", "typ": "player", "iss": ISSUER, "iat": 1_800_000_000, "exp": 1_900_000_000},
        key=None,
        algorithm="none",
    )
    with pytest.raises(Unauthenticated):
        authority().verify(unsigned)


def test_garbage_refused() -> None:
    with pytest.raises(Unauthenticated, match="not a valid JWT"):
        authority().verify("not.a.jwt")


def test_wrong_issuer_refused() -> None:
    token = jwt.encode(
        {"sub": "p1", "typ": "player", "iss": "evil", "iat": 1_800_000_000, "exp": 1_800_000_600},
        TOKEN_KEY,
        algorithm="HS256",
    )
    with pytest.raises(Unauthenticated):
        authority().verify(token)


def test_refresh_issues_a_later_token_for_the_same_player() -> None:
    clock = Clock()
    first = authority(clock).issue_player_token("p1", "Avi")
    clock.now += 300
    second = authority(clock).refresh_player_token(first.token)
    assert second.expires_at == first.expires_at + 300
    assert authority(clock).verify_player_token(second.token) == Player("p1", "Avi")


def test_refresh_of_expired_token_refused() -> None:
    clock = Clock()
    first = authority(clock).issue_player_token("p1", "Avi")
    clock.now += 3600
    with pytest.raises(Unauthenticated):
        authority(clock).refresh_player_token(first.token)


def test_service_credential_round_trip() -> None:
    token = authority().issue_service_token("worker").token
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["sub"] == "service:worker"
    assert claims["typ"] == "service"
    assert claims["role"] == "service"
    assert authority().verify(token) == Service("worker")


def test_player_key_cannot_mint_a_service_credential() -> None:
    # A token claiming typ=service but signed with the player key must not pass.
    forged = jwt.encode(
        {
            "sub": "service:worker",
            "typ": "service",
            "role": "service",
            "iss": ISSUER,
            "iat": 1_800_000_000,
            "exp": 1_800_000_060,
        },
        TOKEN_KEY,
        algorithm="HS256",
    )
    with pytest.raises(Unauthenticated):
        authority().verify(forged)


def test_service_credential_is_not_a_player_token() -> None:
    token = authority().issue_service_token("worker").token
    with pytest.raises(Unauthenticated):
        authority().verify_player_token(token)


def test_service_without_service_key_refuses_credentials() -> None:
    token = authority().issue_service_token("worker").token
    with pytest.raises(Unauthenticated):
        TokenAuthority(TOKEN_KEY, None, clock=Clock()).verify(token)


def test_service_credentials_are_cached_then_renewed() -> None:
    creds = ServiceCredentials(TokenAuthority(TOKEN_KEY, SERVICE_KEY), "table")
    first = creds.token()
    assert creds.token() == first
    assert creds.metadata() == (("authorization", f"Bearer {first}"),)


def test_bearer_metadata_parsing() -> None:
    assert bearer_token(bearer_metadata("abc")) == "abc"
    assert bearer_token([("x-other", "1")]) is None
    assert bearer_token(None) is None
    with pytest.raises(Unauthenticated):
        bearer_token([("authorization", "Basic dXNlcg==")])


def test_current_player_and_require_service() -> None:
    assert current_caller() is None
    with pytest.raises(Unauthenticated):
        current_player()
    with acting_as(Player("p1", "A")):
        assert current_player() == Player("p1", "A")
        with pytest.raises(PermissionDenied):
            require_service()
    with acting_as(Service("worker")):
        assert require_service("worker") == Service("worker")
        with pytest.raises(PermissionDenied):
            require_service("table")
        with pytest.raises(PermissionDenied):
            current_player()
    assert current_caller() is None


def test_cached_verification_still_expires() -> None:
    clock = Clock()
    auth = authority(clock)
    token = auth.issue_player_token("p1", "A").token
    assert auth.verify(token) == Player("p1", "A")
    assert auth.verify(token) == Player("p1", "A")  # answered from the cache
    clock.now += 600 + 60
    with pytest.raises(Unauthenticated) as info:
        auth.verify(token)
    assert info.value.reason == "TOKEN_EXPIRED"


def test_verified_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("services.common.auth.tokens.VERIFIED_CACHE_SIZE", 3)
    clock = Clock()
    auth = authority(clock)
    tokens = [auth.issue_player_token(f"p{i}", "A").token for i in range(5)]
    for token in tokens:
        auth.verify(token)
    assert len(auth._verified) == 3
    assert auth.verify(tokens[0]) == Player("p0", "A")  # evicted, verified again


def test_key_rotation_verifies_tokens_of_the_previous_key_and_signs_with_the_new() -> None:
    clock = Clock()
    old = TokenAuthority("o" * 40, "w" * 40, clock=clock)
    rotated = TokenAuthority(
        TOKEN_KEY,
        SERVICE_KEY,
        clock=clock,
        previous_token_secret="o" * 40,
        previous_service_secret="w" * 40,
    )
    player_token = old.issue_player_token("p1", "A").token
    service_token = old.issue_service_token("workers").token
    assert rotated.verify_player_token(player_token).player_id == "p1"
    assert isinstance(rotated.verify(service_token), Service)
    fresh = rotated.issue_player_token("p1", "A").token
    assert rotated.verify_player_token(fresh).player_id == "p1"
    with pytest.raises(Unauthenticated):
        old.verify(fresh)  # signed with the new key only
    # Once the previous key is dropped, its tokens are refused.
    with pytest.raises(Unauthenticated, match="signature"):
        TokenAuthority(TOKEN_KEY, SERVICE_KEY, clock=clock).verify(player_token)
    # The previous player key never verifies a service credential.
    forged = TokenAuthority(TOKEN_KEY, "o" * 40, clock=clock).issue_service_token("x").token
    with pytest.raises(Unauthenticated):
        rotated.verify(forged)


# -- hardening (issue 11): numeric claims, lifetime, scheme, alg, size -----------------------


def _signed(claims: dict[str, object], key: str = TOKEN_KEY, alg: str = "HS256") -> str:
    return jwt.encode(claims, key, algorithm=alg)


def _claims(clock: Clock, **overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "sub": "p-1",
        "typ": "player",
        "iss": ISSUER,
        "iat": int(clock.now),
        "exp": int(clock.now) + 300,
    }
    return {**base, **overrides}


def _raw_token(payload_json: str, key: str = TOKEN_KEY) -> str:
    """A correctly signed HS256 JWT whose payload is the exact JSON text given."""
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(b'{"alg":"HS256","typ":"JWT"}')
    body = b64(payload_json.encode())
    sig = hmac.new(key.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


@pytest.mark.parametrize("field", ["exp", "iat"])
@pytest.mark.parametrize("number", ["1e400", "-1e400", "1e30", "-5", "true", '"soon"', "null"])
def test_out_of_range_numeric_claims_are_token_invalid(field: str, number: str) -> None:
    clock = Clock()
    other = "iat" if field == "exp" else "exp"
    other_value = int(clock.now) + (300 if other == "exp" else 0)
    payload = (
        f'{{"sub":"p-1","typ":"player","iss":"{ISSUER}",'
        f'"{other}":{other_value},"{field}":{number}}}'
    )
    with pytest.raises(Unauthenticated) as info:
        authority(clock).verify(_raw_token(payload))
    assert info.value.reason == "TOKEN_INVALID"


def test_token_with_exp_far_in_the_future_is_refused() -> None:
    clock = Clock()
    token = _signed(_claims(clock, exp=10**10))  # year 2286: a valid date, too far
    with pytest.raises(Unauthenticated) as info:
        authority(clock).verify(token)
    assert info.value.reason == "TOKEN_INVALID"
    exp_1e30 = "1" + "0" * 30  # the issue's example: exp = 10^30, an exact integer
    payload = f'{{"sub":"p-1","typ":"player","iss":"{ISSUER}","iat":{int(clock.now)},'
    with pytest.raises(Unauthenticated):
        authority(clock).verify(_raw_token(payload + f'"exp":{exp_1e30}}}'))


def test_token_lifetime_is_bounded_by_the_configured_ttl() -> None:
    clock = Clock()
    # The authority issues 600 s player tokens; one of 601 + leeway is refused.
    ok = _signed(_claims(clock, exp=int(clock.now) + 600))
    assert authority(clock).verify(ok) == Player("p-1", "")
    too_long = _signed(_claims(clock, iat=int(clock.now) - 10, exp=int(clock.now) + 600))
    with pytest.raises(Unauthenticated):
        authority(clock).verify(too_long)


def test_bearer_scheme_is_case_insensitive() -> None:
    for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
        assert bearer_token([("authorization", f"{scheme} abc.def.ghi")]) == "abc.def.ghi"
    with pytest.raises(Unauthenticated):
        bearer_token([("authorization", "Bearer")])
    with pytest.raises(Unauthenticated):
        bearer_token([("authorization", "Bearerabc")])


def test_lower_case_bearer_token_verifies() -> None:
    clock = Clock()
    issued = authority(clock).issue_player_token("p-9", "Ana")
    token = bearer_token([("authorization", "bearer " + issued.token)])
    assert token is not None
    assert authority(clock).verify(token) == Player("p-9", "Ana")


def test_alg_is_pinned_even_with_the_right_key() -> None:
    clock = Clock()
    for alg in ("HS384", "HS512"):
        token = _signed(_claims(clock), alg=alg)
        with pytest.raises(Unauthenticated) as info:
            authority(clock).verify(token)
        assert info.value.reason == "TOKEN_INVALID"


def test_oversized_token_refused_before_decoding() -> None:
    huge = "a" * 100_000
    with pytest.raises(Unauthenticated) as info:
        bearer_token([("authorization", "Bearer " + huge)])
    assert info.value.reason == "TOKEN_TOO_LARGE"
    with pytest.raises(Unauthenticated) as info:
        authority().verify(huge)
    assert info.value.reason == "TOKEN_TOO_LARGE"
