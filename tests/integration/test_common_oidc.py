"""Tokens of an external OpenID Connect provider, over a real gRPC server.

The provider is played by the test: it generates RSA and EC keys, serves their public JWK
Set over HTTP on a free port and signs tokens with the private halves. The services fetch
the keys from that URL (``PyJWKClient``), follow a key rotation, and refuse a wrong issuer,
audience, key, algorithm or an expired token.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from prometheus_client import CollectorRegistry

from kishpa.auth.v1 import auth_pb2, auth_pb2_grpc
from sdk import KishpaClient
from services.common.auth import Admin, Player, TokenAuthority, bearer_metadata
from services.common.auth_service import auth_registration
from services.common.errors import Unauthenticated, error_reason
from services.common.metrics import GrpcMetrics
from services.common.oidc import OidcConfig, OidcVerifier, player_id_for
from services.common.server import create_server
from services.common.settings import load_settings

pytestmark = pytest.mark.integration

TOKEN_KEY = "k" * 40
SERVICE_KEY = "s" * 40
AUDIENCE = "kishpa-test"


@dataclass
class Provider:
    """A tiny identity provider: keys, a JWKS endpoint, and token signing."""

    issuer: str = ""
    keys: dict[str, Any] = field(default_factory=dict)
    published: list[str] = field(default_factory=list)
    fetches: int = 0

    def add_rsa(self, kid: str) -> None:
        self.keys[kid] = ("RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def add_ec(self, kid: str) -> None:
        self.keys[kid] = ("ES256", ec.generate_private_key(ec.SECP256R1()))

    def jwks(self) -> dict[str, Any]:
        out = []
        for kid in self.published:
            alg, private = self.keys[kid]
            algo = jwt.algorithms.RSAAlgorithm if alg == "RS256" else jwt.algorithms.ECAlgorithm
            jwk = algo.to_jwk(private.public_key(), as_dict=True)
            out.append({**jwk, "kid": kid, "use": "sig", "alg": alg})
        return {"keys": out}

    def token(self, kid: str, **overrides: Any) -> str:
        alg, private = self.keys[kid]
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": AUDIENCE,
            "sub": "user-1",
            "name": "Dana Doe",
            "iat": now,
            "exp": now + 300,
            **overrides,
        }
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, private, algorithm=alg, headers={"kid": kid})


@pytest.fixture
def provider() -> Iterator[Provider]:
    prov = Provider()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            prov.fetches += 1
            body = json.dumps(prov.jwks()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    prov.issuer = f"http://127.0.0.1:{httpd.server_port}/realm-{uuid.uuid4().hex[:6]}"
    prov.jwks_url = f"http://127.0.0.1:{httpd.server_port}/jwks.json"  # type: ignore[attr-defined]
    prov.add_rsa("rsa-1")
    prov.add_ec("ec-1")
    prov.published = ["rsa-1", "ec-1"]
    try:
        yield prov
    finally:
        httpd.shutdown()
        httpd.server_close()


def verifier(provider: Provider, **extra: Any) -> OidcVerifier:
    config = OidcConfig(
        issuer=provider.issuer,
        audience=AUDIENCE,
        jwks_url=provider.jwks_url,  # type: ignore[attr-defined]
        jwks_cooldown_seconds=0.0,
        **extra,
    )
    return OidcVerifier(config)


@pytest.fixture
async def auth_port(provider: Provider) -> AsyncIterator[int]:
    """A real server with the auth RPCs, guest login off, trusting the test's provider."""
    settings = load_settings("probe", token_secret=TOKEN_KEY)
    authority = TokenAuthority(
        TOKEN_KEY, SERVICE_KEY, token_ttl_seconds=600, external=verifier(provider)
    )
    server = create_server(
        [auth_registration(authority, guest_login=False)],
        settings,
        address="127.0.0.1:0",
        authority=authority,
        metrics=GrpcMetrics(CollectorRegistry()),
    )
    await server.start()
    try:
        yield server.port
    finally:
        await server.stop(None)


@pytest.fixture
async def stub(auth_port: int) -> AsyncIterator[auth_pb2_grpc.AuthServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{auth_port}") as channel:
        yield auth_pb2_grpc.AuthServiceStub(channel)


async def test_the_sdk_signs_in_with_a_provider_token(auth_port: int, provider: Provider) -> None:
    address = f"127.0.0.1:{auth_port}"
    async with KishpaClient(address, address) as client:
        session = await client.sign_in_with_provider_token(provider.token("ec-1", sub="sdk-user"))
        assert session.player_id == player_id_for(provider.issuer, "sdk-user")
        assert session.display_name == "Dana Doe"
        refreshed = await client.refresh_token()
        assert refreshed.player_id == session.player_id


async def _exchange(stub: auth_pb2_grpc.AuthServiceStub, token: str) -> str:
    reply = await stub.RefreshToken(auth_pb2.RefreshTokenRequest(), metadata=bearer_metadata(token))
    return reply.token


async def _refused(stub: auth_pb2_grpc.AuthServiceStub, token: str) -> tuple[Any, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _exchange(stub, token)
    return caught.value.code(), error_reason(caught.value)


async def test_a_provider_token_is_exchanged_for_a_kishpa_token_of_the_mapped_player(
    stub: auth_pb2_grpc.AuthServiceStub, provider: Provider
) -> None:
    for kid in ("rsa-1", "ec-1"):  # RS256 and ES256
        ours = await _exchange(stub, provider.token(kid))
        player = TokenAuthority(TOKEN_KEY).verify(ours)
        assert player == Player(player_id_for(provider.issuer, "user-1"), "Dana Doe")
    other = TokenAuthority(TOKEN_KEY).verify(
        await _exchange(stub, provider.token("rsa-1", sub="user-2"))
    )
    assert isinstance(other, Player)
    assert other.player_id != player_id_for(provider.issuer, "user-1")
    assert other.player_id.startswith("o")
    assert len(other.player_id) == 21


async def test_guest_login_can_be_switched_off(stub: auth_pb2_grpc.AuthServiceStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Login(auth_pb2.LoginRequest(display_name="Guest"))
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error_reason(caught.value) == "GUEST_LOGIN_DISABLED"


async def test_wrong_issuer_audience_key_algorithm_or_expired_tokens_are_refused(
    stub: auth_pb2_grpc.AuthServiceStub, provider: Provider
) -> None:
    unauth = grpc.StatusCode.UNAUTHENTICATED
    now = int(time.time())
    assert await _refused(stub, provider.token("rsa-1", iss="https://evil.example")) == (
        unauth,
        "TOKEN_INVALID",
    )
    assert await _refused(stub, provider.token("rsa-1", aud="someone-else")) == (
        unauth,
        "TOKEN_INVALID",
    )
    assert await _refused(stub, provider.token("rsa-1", exp=now - 60, iat=now - 400)) == (
        unauth,
        "TOKEN_EXPIRED",
    )
    assert await _refused(stub, provider.token("rsa-1", aud=None)) == (unauth, "TOKEN_INVALID")
    # A key the provider never published, claiming a published key id.
    provider.add_rsa("rogue")
    rogue = provider.token("rogue")
    forged = jwt.encode(
        jwt.decode(rogue, options={"verify_signature": False}),
        provider.keys["rogue"][1],
        algorithm="RS256",
        headers={"kid": "rsa-1"},
    )
    assert await _refused(stub, forged) == (unauth, "TOKEN_INVALID")
    assert await _refused(stub, rogue) == (unauth, "TOKEN_INVALID")  # unknown key id
    # Algorithm confusion: HS256 "signed" with the provider's public key text.
    claims = jwt.decode(provider.token("rsa-1"), options={"verify_signature": False})
    hs = jwt.encode(claims, "not-a-real-key-but-long-enough-0123456789", algorithm="HS256")
    assert await _refused(stub, hs) == (unauth, "TOKEN_INVALID")
    # Nothing was let through along the way: a good token still works.
    assert await _exchange(stub, provider.token("ec-1"))


async def test_a_key_rotation_is_followed(
    stub: auth_pb2_grpc.AuthServiceStub, provider: Provider
) -> None:
    assert await _exchange(stub, provider.token("rsa-1"))
    fetches = provider.fetches
    # The provider rotates: a new key appears, the old one is withdrawn.
    provider.add_rsa("rsa-2")
    provider.published = ["rsa-2", "ec-1"]
    assert await _exchange(stub, provider.token("rsa-2")), "a new key id is fetched at once"
    assert provider.fetches == fetches + 1
    assert await _exchange(stub, provider.token("rsa-2"))
    assert provider.fetches == fetches + 1, "the refreshed set is cached"


def test_a_withdrawn_key_stops_verifying_when_the_cached_set_expires(provider: Provider) -> None:
    check = verifier(provider, jwks_cache_seconds=0.5)
    assert check.verify(provider.token("rsa-1")).subject == "user-1"
    provider.published = ["ec-1"]
    deadline = time.monotonic() + 30
    refused: Unauthenticated | None = None
    while refused is None:
        try:
            check.verify(provider.token("rsa-1"))
        except Unauthenticated as exc:
            refused = exc
        assert time.monotonic() < deadline, "a withdrawn key was still accepted"
        time.sleep(0.05)
    assert refused.reason == "TOKEN_INVALID"


def test_the_admin_role_makes_an_admin_caller_not_a_player(provider: Provider) -> None:
    authority = TokenAuthority(TOKEN_KEY, SERVICE_KEY, external=verifier(provider))
    caller = authority.verify(provider.token("rsa-1", roles=["kishpa-admin"], sub="ops-7"))
    assert caller == Admin("oidc:ops-7", "Dana Doe")
    plain = authority.verify(provider.token("rsa-1", roles=["reader"]))
    assert isinstance(plain, Player)


async def test_an_algorithm_that_does_not_fit_the_named_key_is_token_invalid(
    stub: auth_pb2_grpc.AuthServiceStub, provider: Provider
) -> None:
    """ES256 naming the provider's RSA key id (and the reverse): UNAUTHENTICATED with a
    reason, not UNKNOWN with a traceback."""
    claims = jwt.decode(provider.token("ec-1"), options={"verify_signature": False})
    for signer, named in (("ec-1", "rsa-1"), ("rsa-1", "ec-1")):
        alg, private = provider.keys[signer]
        mismatched = jwt.encode(claims, private, algorithm=alg, headers={"kid": named})
        assert await _refused(stub, mismatched) == (
            grpc.StatusCode.UNAUTHENTICATED,
            "TOKEN_INVALID",
        )
    assert await _exchange(stub, provider.token("rsa-1"))


def test_the_roles_claim_is_configurable_down_to_a_nested_path(provider: Provider) -> None:
    authority = TokenAuthority(
        TOKEN_KEY, None, external=verifier(provider, roles_claim="realm_access.roles")
    )
    nested = provider.token(
        "rsa-1", sub="fin-1", realm_access={"roles": ["kishpa-finance", "other"]}
    )
    assert authority.verify(nested) == Admin("oidc:fin-1", "Dana Doe", frozenset({"finance"}))
    # The top-level claim is not read any more: a player.
    flat = provider.token("rsa-1", sub="fin-2", roles=["kishpa-finance"])
    assert isinstance(authority.verify(flat), Player)


def _raw(header: dict[str, Any], payload: Any) -> str:
    """A JWT whose parts are exactly these (JSON of anything), signature bytes arbitrary."""
    import base64

    def part(value: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part(header)}.{part(payload)}.c2lnbmF0dXJl"


def _malformed(provider: Provider) -> dict[str, str]:
    """Tokens a client might send wrong, aimed at the provider's path and at ours."""
    now = int(time.time())
    good = jwt.decode(provider.token("ec-1"), options={"verify_signature": False})
    alg, ec_key = provider.keys["ec-1"]

    def signed(claims: dict[str, Any], **header: Any) -> str:
        return jwt.encode(claims, ec_key, algorithm=alg, headers={"kid": "ec-1", **header})

    return {
        "kid a list": _raw({"alg": "ES256", "kid": ["ec-1"]}, good),
        "kid an object": _raw({"alg": "ES256", "kid": {"a": 1}}, good),
        "alg a list": _raw({"alg": ["ES256"], "kid": "ec-1"}, good),
        "alg none": _raw({"alg": "none", "kid": "ec-1"}, good),
        "header not an object": "WzEsMl0." + provider.token("ec-1").split(".", 1)[1],
        "payload a list": _raw({"alg": "ES256", "kid": "ec-1"}, [1, 2]),
        "payload a string": _raw({"alg": "ES256", "kid": "ec-1"}, "hi"),
        "sub a number": _raw({"alg": "ES256", "kid": "ec-1"}, {**good, "sub": 7}),
        "sub empty": signed({**good, "sub": ""}),
        "iat a string": signed({**good, "iat": "yesterday"}),
        "exp huge": signed({**good, "exp": 10**30}),
        "exp infinite": _raw({"alg": "ES256", "kid": "ec-1"}, {**good, "exp": 1e400}),
        "aud a number": signed({**good, "aud": 5}),
        "roles an object": signed({**good, "roles": {"kishpa-finance": True}}),
        "iss a list": _raw({"alg": "ES256", "kid": "ec-1"}, {**good, "iss": [provider.issuer]}),
        "not base64": "e30.%%%.x",
        "two parts": "eyJhbGciOiJFUzI1NiJ9.e30",
        "empty parts": "..",
        "ours, iat a string": jwt.encode(
            {"sub": "p1", "typ": "player", "iss": "kishpa", "iat": "x", "exp": now + 60},
            TOKEN_KEY,
            algorithm="HS256",
        ),
        "ours, payload a list": _raw({"alg": "HS256"}, [1]),
    }


async def test_malformed_tokens_are_unauthenticated_with_a_reason(
    stub: auth_pb2_grpc.AuthServiceStub, provider: Provider
) -> None:
    outcomes = {}
    for label, token in _malformed(provider).items():
        try:
            await _exchange(stub, token)
            outcomes[label] = ("OK", "")
        except grpc.aio.AioRpcError as exc:
            outcomes[label] = (exc.code().name, error_reason(exc) or "")
    wrong = {
        label: outcome
        for label, outcome in outcomes.items()
        # "roles an object" is a valid token whose roles claim grants nothing: a player.
        if outcome[0] != "UNAUTHENTICATED" and label != "roles an object"
    }
    assert wrong == {}
    assert {reason for code, reason in outcomes.values() if code != "OK"} <= {
        "TOKEN_INVALID",
        "TOKEN_EXPIRED",
    }
    assert outcomes["roles an object"] == ("OK", "")
