"""Who calls: player tokens, workload certificates, operators, and the interceptor.

Under mutual TLS a *workload* is who its verified client certificate says (a call without a
token over the ``table`` certificate is the table service): no secret is shared between
workloads, and production (``KISHPA_PRODUCTION=1``) holds none. *Operators* are who the
identity provider says (``services.common.oidc``). What follows about service credentials
and admin tokens is the development model (plain ``make run``), refused where no shared key
is configured.

Tokens are HS256 JWTs. A *player token* (signed with ``KISHPA_TOKEN_SECRET``) names the
player: ``sub`` is the player id, ``name`` the display name, ``typ`` is ``"player"``. A
*service credential* (signed with ``KISHPA_SERVICE_SECRET``, a different key, so a leaked
player key cannot mint one) has ``sub = "service:<name>"``, ``typ`` and ``role`` ``"service"``.
Both carry ``iss = "kishpa"``, ``iat`` and ``exp``. An *admin token* (also signed with
``KISHPA_SERVICE_SECRET``; ``typ`` and ``role`` ``"admin"``, ``sub = "admin:<operator>"``)
makes an :class:`Admin` caller, separate from players and services: the *development
operator issuer*, accepted only where the shared key is. Tokens of an external
OpenID Connect provider (``services.common.oidc``, when configured) are accepted too: they
name a player, or an admin when they carry the admin role.

Servicers never read the player from a request body: the interceptor verifies the
``authorization: Bearer <jwt>`` metadata and stores the caller for the duration of the call;
servicers ask :func:`current_player` or :func:`require_service`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterator,
    Mapping,
    Sequence,
)
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Protocol

import grpc
import jwt
import structlog
from pydantic import SecretStr

from services.common.access import OPERATOR_ROLES, PROXIES, WORKLOADS, allowed, refusal
from services.common.errors import PermissionDenied, Unauthenticated, Unavailable, abort_with
from services.common.handlers import wrap_handler
from services.common.oidc import OidcVerifier, oidc_verifier_from_settings
from services.common.settings import Settings
from services.common.tls import peer_identity

ISSUER: Final = "kishpa"
ALGORITHM: Final = "HS256"
PLAYER_TYP: Final = "player"
SERVICE_TYP: Final = "service"
SERVICE_SUBJECT_PREFIX: Final = "service:"
ADMIN_TYP: Final = "admin"
ADMIN_SUBJECT_PREFIX: Final = "admin:"
AUTHORIZATION_KEY: Final = "authorization"
BEARER_PREFIX: Final = "Bearer "
# Tolerated clock difference between the machines that mint and check tokens.
LEEWAY_SECONDS: Final = 5
MAX_TOKEN_CHARS: Final = 4096
"""A bearer token longer than this is refused before it is decoded (ours are ~250)."""
MAX_NUMERIC_DATE: Final = 10**11
"""``iat``/``exp``/``nbf`` beyond this (year 5138) are malformed, not merely far away."""
MAX_NAME_LENGTH: Final = 64
VERIFIED_CACHE_SIZE: Final = 10_000
ADMIN_OIDC_PREFIX: Final = "oidc:"
DEV_OPERATOR_TOKEN_SECONDS: Final = 900
"""How long a token of the development operator issuer (``kishpa admin``) lives."""
KEY_FETCH_THREADS: Final = 4
"""Threads that verify identity-provider tokens (and so may wait on its key endpoint)."""

_key_fetchers = ThreadPoolExecutor(KEY_FETCH_THREADS, thread_name_prefix="kishpa-oidc")
"""Verification that may fetch the provider's keys runs here, never on the event loop: a
slow key endpoint delays only calls carrying a provider token not seen before."""

DEFAULT_PUBLIC_METHODS: Final[frozenset[str]] = frozenset(
    {
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "/kishpa.auth.v1.AuthService/Login",
    }
)
"""Methods callable without a token: health probes, reflection, and logging in."""


@dataclass(frozen=True, slots=True)
class Player:
    """A caller identified by a player token."""

    player_id: str
    name: str


@dataclass(frozen=True, slots=True)
class Service:
    """A caller identified by a service credential (``name`` is e.g. ``worker``)."""

    name: str


@dataclass(frozen=True, slots=True)
class Admin:
    """An operator: may call the audited admin RPCs his roles allow, never play.

    ``roles`` are among ``support`` (read), ``finance`` (credit, debit, approve) and ``ops``
    (close tables); a token that names none is read-only (``support``).
    """

    admin_id: str
    name: str = ""
    roles: frozenset[str] = frozenset({"support"})


Caller = Player | Service | Admin


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A freshly signed token and when it expires (Unix seconds)."""

    token: str
    expires_at: int


def _revealed(secret: SecretStr | None) -> str | None:
    return secret.get_secret_value() if secret else None


class TokenAuthority:
    """Signs and verifies player tokens and service credentials with the configured keys."""

    def __init__(
        self,
        token_secret: str | None,
        service_secret: str | None = None,
        *,
        token_ttl_seconds: int = 3600,
        service_token_ttl_seconds: int = 300,
        clock: Callable[[], float] = time.time,
        previous_token_secret: str | None = None,
        previous_service_secret: str | None = None,
        external: OidcVerifier | None = None,
        operator_token_ttl_seconds: int = 3600,
    ) -> None:
        self._external = external
        self.operator_token_ttl_seconds = operator_token_ttl_seconds
        self._token_secret = token_secret
        self._service_secret = service_secret
        # Verification-only keys during a rotation; new tokens are always signed with the
        # current key.
        self._previous: dict[str | None, str | None] = {
            token_secret: previous_token_secret,
            service_secret: previous_service_secret,
        }
        self.token_ttl_seconds = token_ttl_seconds
        self.service_token_ttl_seconds = service_token_ttl_seconds
        self._clock = clock
        self._verified: dict[str, tuple[Caller, int]] = {}
        self._verified_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenAuthority:
        """The authority for this process; keys it has no use for may be absent.

        In production (``KISHPA_PRODUCTION=1``) the shared service key is never used, even if
        one is configured (the settings refuse to start with one): workloads are who their
        certificates say, operators who the identity provider says.
        """
        shared = None if settings.production else settings.service_secret
        previous = None if settings.production else settings.service_secret_previous
        return cls(
            settings.token_secret.get_secret_value() if settings.token_secret else None,
            shared.get_secret_value() if shared else None,
            token_ttl_seconds=settings.token_ttl_seconds,
            service_token_ttl_seconds=settings.service_token_ttl_seconds,
            previous_token_secret=_revealed(settings.token_secret_previous),
            previous_service_secret=_revealed(previous),
            external=oidc_verifier_from_settings(settings),
            operator_token_ttl_seconds=settings.operator_token_ttl_seconds,
        )

    @property
    def shared_service_key(self) -> bool:
        """Whether this authority signs and accepts service credentials (the shared key)."""
        return bool(self._service_secret)

    # -- player tokens -------------------------------------------------------------------

    def issue_player_token(self, player_id: str, name: str) -> IssuedToken:
        """Sign a player token for ``player_id`` with display ``name``."""
        if not player_id:
            raise ValueError("player id must not be empty")
        return self._sign(
            {"sub": player_id, "name": name[:MAX_NAME_LENGTH], "typ": PLAYER_TYP},
            self._key(self._token_secret, "player tokens"),
            self.token_ttl_seconds,
        )

    def verify_player_token(self, token: str) -> Player:
        """The player a valid token names; raises :class:`Unauthenticated` otherwise."""
        return self._player(token)[0]

    def _player(self, token: str) -> tuple[Player, int]:
        claims = self._decode(
            token,
            self._key(self._token_secret, "player tokens"),
            PLAYER_TYP,
            self.token_ttl_seconds,
        )
        player = Player(player_id=str(claims["sub"]), name=str(claims.get("name", "")))
        return player, int(claims["exp"])

    def refresh_player_token(self, token: str) -> IssuedToken:
        """A new token for the player a still-valid token names (an expired one is refused)."""
        player = self.verify_player_token(token)
        return self.issue_player_token(player.player_id, player.name)

    # -- service credentials -------------------------------------------------------------

    def issue_service_token(self, service_name: str) -> IssuedToken:
        """Sign a short-lived service credential for the process ``service_name``."""
        if not service_name:
            raise ValueError("service name must not be empty")
        return self._sign(
            {
                "sub": SERVICE_SUBJECT_PREFIX + service_name,
                "typ": SERVICE_TYP,
                "role": SERVICE_TYP,
            },
            self._key(self._service_secret, "service credentials"),
            self.service_token_ttl_seconds,
        )

    def verify_service_token(self, token: str) -> Service:
        """The service a valid credential names; raises :class:`Unauthenticated` otherwise."""
        return self._service(token)[0]

    def _service(self, token: str) -> tuple[Service, int]:
        claims = self._decode(
            token,
            self._key(self._service_secret, "service credentials"),
            SERVICE_TYP,
            self.service_token_ttl_seconds,
        )
        subject = str(claims["sub"])
        if not subject.startswith(SERVICE_SUBJECT_PREFIX) or claims.get("role") != SERVICE_TYP:
            raise Unauthenticated("TOKEN_INVALID", "the service credential is malformed")
        return Service(name=subject.removeprefix(SERVICE_SUBJECT_PREFIX)), int(claims["exp"])

    # -- admin tokens --------------------------------------------------------------------

    def issue_admin_token(
        self,
        admin_id: str,
        name: str = "",
        *,
        roles: Collection[str] = ("support",),
        ttl_seconds: int = DEV_OPERATOR_TOKEN_SECONDS,
    ) -> IssuedToken:
        """Sign a short-lived admin token for the operator ``admin_id`` with his ``roles``.

        This is the *development operator issuer*: the shared service key signs it, so only
        a process holding that key accepts it, and production never does.
        """
        if not admin_id:
            raise ValueError("admin id must not be empty")
        unknown = set(roles) - set(OPERATOR_ROLES)
        if unknown or not roles:
            raise ValueError(f"operator roles are among {', '.join(OPERATOR_ROLES)}")
        return self._sign(
            {
                "sub": ADMIN_SUBJECT_PREFIX + admin_id,
                "name": name[:MAX_NAME_LENGTH],
                "typ": ADMIN_TYP,
                "role": ADMIN_TYP,
                "roles": sorted(set(roles)),
            },
            self._key(self._service_secret, "admin tokens"),
            min(ttl_seconds, self.operator_token_ttl_seconds),
        )

    def _admin(self, token: str) -> tuple[Admin, int]:
        claims = self._decode(
            token,
            self._key(self._service_secret, "admin tokens"),
            ADMIN_TYP,
            self.operator_token_ttl_seconds,
        )
        subject = str(claims["sub"])
        if not subject.startswith(ADMIN_SUBJECT_PREFIX) or claims.get("role") != ADMIN_TYP:
            raise Unauthenticated("TOKEN_INVALID", "the admin token is malformed")
        roles = claims.get("roles", ["support"])
        if not isinstance(roles, list) or not roles or not set(roles) <= set(OPERATOR_ROLES):
            raise Unauthenticated("TOKEN_INVALID", "the admin token's roles are malformed")
        admin = Admin(
            subject.removeprefix(ADMIN_SUBJECT_PREFIX),
            str(claims.get("name", "")),
            frozenset(str(r) for r in roles),
        )
        return admin, int(claims["exp"])

    def _external_caller(self, token: str) -> tuple[Caller, int]:
        assert self._external is not None
        who = self._external.verify(token)
        if who.roles:
            # An operator's token is bounded like ours: a provider misconfigured to hand out
            # day-long tokens must not give an operator a day-long session here.
            if who.lifetime > self.operator_token_ttl_seconds + LEEWAY_SECONDS:
                raise Unauthenticated(
                    "TOKEN_LIFETIME_TOO_LONG",
                    f"an operator token may live at most {self.operator_token_ttl_seconds} s "
                    "from iat to exp",
                )
            return Admin(ADMIN_OIDC_PREFIX + who.subject, who.name, who.roles), who.expires_at
        return Player(player_id=who.player_id, name=who.name), who.expires_at

    def _cached(self, token: str) -> Caller | None:
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthenticated(
                "TOKEN_TOO_LARGE", f"the token is over {MAX_TOKEN_CHARS} characters"
            )
        hit = self._verified.get(token)
        if hit is not None and self._clock() - LEEWAY_SECONDS < hit[1]:
            return hit[0]
        return None

    def _is_external(self, token: str) -> bool:
        """Whether ``token`` claims (unverified) to come from the identity provider."""
        if self._external is None:
            return False
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except (jwt.PyJWTError, ValueError, OverflowError, TypeError):
            return False
        return isinstance(unverified, dict) and unverified.get("iss") == self._external.issuer

    async def verify_async(self, token: str) -> Caller:
        """:meth:`verify` for the event loop: a provider token not verified before is
        checked in a thread of its own, since its keys may have to be fetched (up to the
        fetch timeout); our own HS256 tokens and cached ones are answered at once."""
        hit = self._cached(token)
        if hit is not None:
            return hit
        if self._is_external(token):
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(_key_fetchers, self.verify, token)
        return self.verify(token)

    def verify(self, token: str) -> Caller:
        """Verify a token of either kind, choosing the key by its (then verified) ``typ``.

        A token verified before is answered from a bounded cache until it expires: the same
        string carries the same signature, and re-verifying it costs more than the RPC.
        """
        hit = self._cached(token)
        if hit is not None:
            return hit
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except (jwt.PyJWTError, ValueError, OverflowError, TypeError):
            raise Unauthenticated("TOKEN_INVALID", "the token is not a valid JWT") from None
        if not isinstance(unverified, dict) or not isinstance(header, dict):
            raise Unauthenticated("TOKEN_INVALID", "the token is not a valid JWT")
        # The claim only selects the key; the chosen key then verifies signature and typ.
        caller: Caller
        kind = unverified.get("typ")
        if self._external is not None and unverified.get("iss") == self._external.issuer:
            caller, expires_at = self._external_caller(token)  # pins its own algorithms
        elif header.get("alg") != ALGORITHM:
            # Pinned: never let the token choose how it is verified.
            raise Unauthenticated("TOKEN_INVALID", f"only {ALGORITHM} tokens are accepted")
        elif kind == SERVICE_TYP and not self._service_secret:
            raise Unauthenticated(
                "SERVICE_TOKEN_NOT_ACCEPTED",
                "this service knows workloads by their client certificate only: call with "
                "your workload's certificate and no service token",
            )
        elif kind == ADMIN_TYP and not self._service_secret:
            raise Unauthenticated(
                "OPERATOR_TOKEN_NOT_ACCEPTED",
                "tokens of the development operator issuer are not accepted here: sign in "
                "with the identity provider",
            )
        elif kind == SERVICE_TYP:
            caller, expires_at = self._service(token)
        elif kind == ADMIN_TYP:
            caller, expires_at = self._admin(token)
        else:
            caller, expires_at = self._player(token)
        with self._verified_lock:  # servicers may verify from worker threads too
            if len(self._verified) >= VERIFIED_CACHE_SIZE:
                self._verified.pop(next(iter(self._verified)))  # the oldest entry
            self._verified[token] = (caller, expires_at)
        return caller

    # -- internals -----------------------------------------------------------------------

    @staticmethod
    def _key(secret: str | None, what: str) -> str:
        if not secret:
            raise Unauthenticated("AUTH_NOT_CONFIGURED", f"this service does not accept {what}")
        return secret

    def _sign(self, claims: dict[str, Any], key: str, ttl_seconds: int) -> IssuedToken:
        now = int(self._clock())
        expires_at = now + ttl_seconds
        payload = {**claims, "iss": ISSUER, "iat": now, "exp": expires_at}
        return IssuedToken(jwt.encode(payload, key, algorithm=ALGORITHM), expires_at)

    def _decode(self, token: str, key: str, typ: str, ttl_seconds: int) -> dict[str, Any]:
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthenticated(
                "TOKEN_TOO_LARGE", f"the token is over {MAX_TOKEN_CHARS} characters"
            )
        keys = [key] + [k for k in (self._previous.get(key),) if k]
        claims: dict[str, Any] | None = None
        for candidate in keys:
            try:
                claims = jwt.decode(
                    token,
                    candidate,
                    algorithms=[ALGORITHM],
                    issuer=ISSUER,
                    # Times are checked below against the injectable clock.
                    options={
                        "require": ["exp", "iat", "iss", "sub"],
                        "verify_exp": False,
                        "verify_iat": False,
                    },
                )
                break
            except jwt.InvalidSignatureError:
                continue  # during a key rotation, try the previous key
            except (jwt.PyJWTError, ValueError, OverflowError) as exc:
                # PyJWT's own messages name the failed check, never the token.
                text = str(exc) if isinstance(exc, jwt.PyJWTError) else "malformed"
                raise Unauthenticated("TOKEN_INVALID", f"the token is invalid: {text}") from None
        if claims is None:
            raise Unauthenticated("TOKEN_INVALID", "the token's signature is invalid")
        if claims.get("typ") != typ:
            raise Unauthenticated("TOKEN_INVALID", f"a {typ} token is required here")
        expires_at = _numeric_date(claims, "exp")
        issued_at = _numeric_date(claims, "iat")
        if "nbf" in claims:
            _numeric_date(claims, "nbf")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise Unauthenticated("TOKEN_INVALID", "the token's subject is malformed")
        now = self._clock()
        if now - LEEWAY_SECONDS >= expires_at:
            raise Unauthenticated("TOKEN_EXPIRED", "the token has expired: log in again")
        if now + LEEWAY_SECONDS < issued_at:
            raise Unauthenticated("TOKEN_INVALID", "the token was issued in the future")
        # Bounded lifetime: a token signed with the right key but living longer than this
        # process would ever issue is refused (a leaked key must not mint eternal tokens).
        if expires_at - issued_at > ttl_seconds + LEEWAY_SECONDS:
            raise Unauthenticated("TOKEN_INVALID", "the token's lifetime is longer than allowed")
        if expires_at > now + ttl_seconds + LEEWAY_SECONDS:
            raise Unauthenticated("TOKEN_INVALID", "the token expires too far in the future")
        return claims


# -- the caller of the current RPC ---------------------------------------------------------

_caller: ContextVar[Caller | None] = ContextVar("kishpa_caller", default=None)


def caller_label(caller: Caller | None) -> str:
    """How logs name a caller: the player id, ``service:<name>``, or ``anonymous``."""
    if caller is None:
        return "anonymous"
    if isinstance(caller, Player):
        return caller.player_id
    if isinstance(caller, Admin):
        return ADMIN_SUBJECT_PREFIX + caller.admin_id
    return SERVICE_SUBJECT_PREFIX + caller.name


def identities(caller: Caller | None) -> frozenset[str]:
    """The identities of :mod:`services.common.access` a caller has."""
    if caller is None:
        return frozenset()
    if isinstance(caller, Player):
        return frozenset({"player"})
    if isinstance(caller, Admin):
        return frozenset(f"admin:{role}" for role in caller.roles)
    return frozenset({f"service:{caller.name}"})


def current_caller() -> Caller | None:
    """Who is calling the current RPC (``None`` on a public method without a token)."""
    return _caller.get()


def current_player() -> Player:
    """The player calling the current RPC; a service or anonymous caller is refused."""
    caller = _caller.get()
    if caller is None:
        raise Unauthenticated("TOKEN_MISSING", "this call needs a player token")
    if not isinstance(caller, Player):
        raise PermissionDenied("PLAYER_REQUIRED", "this call must be made by a player")
    return caller


def require_service(*allowed: str) -> Service:
    """The service calling the current RPC; players (and services not in ``allowed``) refused."""
    caller = _caller.get()
    if caller is None:
        raise Unauthenticated("TOKEN_MISSING", "this call needs a service credential")
    if not isinstance(caller, Service):
        raise PermissionDenied("SERVICE_REQUIRED", "only an internal service may call this")
    if allowed and caller.name not in allowed:
        raise PermissionDenied("SERVICE_NOT_ALLOWED", f"service {caller.name} may not call this")
    return caller


def require_admin() -> Admin:
    """The operator calling the current RPC; players and services are refused."""
    caller = _caller.get()
    if caller is None:
        raise Unauthenticated("TOKEN_MISSING", "this call needs an admin token")
    if not isinstance(caller, Admin):
        raise PermissionDenied(
            "ADMIN_REQUIRED", "only an operator with the admin role may call this"
        )
    return caller


@contextlib.contextmanager
def acting_as(caller: Caller | None) -> Iterator[Caller | None]:
    """Run a block as ``caller`` (for code that calls servicer logic outside an RPC)."""
    reset = _caller.set(caller)
    try:
        yield caller
    finally:
        _caller.reset(reset)


def _numeric_date(claims: Mapping[str, Any], name: str) -> int:
    """A NumericDate claim as whole seconds; anything but a sane number is TOKEN_INVALID."""
    value = claims.get(name)
    # bool is an int to Python; 1e400 arrives as float('inf'); both are malformed here.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Unauthenticated("TOKEN_INVALID", f"the token's {name} is not a number")
    if not (math.isfinite(value) and 0 <= value <= MAX_NUMERIC_DATE):
        raise Unauthenticated("TOKEN_INVALID", f"the token's {name} is out of range")
    return int(value)


def bearer_token(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The token in an ``authorization: Bearer <jwt>`` entry, or ``None`` if there is none.

    The scheme is case-insensitive (RFC 6750, RFC 9110 section 11.1); a value over
    :data:`MAX_TOKEN_CHARS` is refused before anything else looks at it.
    """
    for key, value in metadata or ():
        if key.lower() == AUTHORIZATION_KEY:
            if len(value) > MAX_TOKEN_CHARS + len(BEARER_PREFIX) + 16:
                raise Unauthenticated(
                    "TOKEN_TOO_LARGE", f"the token is over {MAX_TOKEN_CHARS} characters"
                )
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            scheme, _, token = text.strip().partition(" ")
            if scheme.lower() != BEARER_PREFIX.strip().lower() or not token.strip():
                raise Unauthenticated(
                    "TOKEN_INVALID", "the authorization metadata must be 'Bearer <token>'"
                )
            return token.strip()
    return None


class CallerVerifier(Protocol):
    """What the interceptor needs: a bearer token in, the caller out (or Unauthenticated).

    :class:`TokenAuthority` is one; another identity source (an OIDC verifier) plugs in here
    by wrapping it, e.g. trying its own issuer first and falling back to ours. A verifier
    with an awaitable ``verify_async`` is awaited instead (work that may block, such as
    fetching a provider's keys, must not hold up the event loop).
    """

    def verify(self, token: str) -> Caller:
        """The caller ``token`` names; raises :class:`Unauthenticated` otherwise."""
        ...


RefusalHook = Callable[[str, Caller, PermissionDenied], Awaitable[None]]
"""Called with (method, caller, refusal) when the access table refuses a caller."""


async def _verified_caller(authority: CallerVerifier, token: str) -> Caller:
    verify_async = getattr(authority, "verify_async", None)
    if verify_async is not None:
        caller: Caller = await verify_async(token)
        return caller
    return authority.verify(token)


def certified_workload(context: Any) -> Service | None:
    """The workload a call's verified client certificate names, if it names one.

    Only a workload of :data:`services.common.access.WORKLOADS` is anybody here: a
    certificate of the same CA issued to a person's tool (an operator's CLI) names no
    workload and so grants nothing by itself; nor does a proxy's (the edge's), which always
    carries its caller's token.
    """
    peer = peer_identity(context)
    return Service(peer) if peer in WORKLOADS and peer not in PROXIES else None


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Finds who calls (the bearer token, else the workload certificate), checks him against
    :data:`services.common.access.ACCESS`, and sets the caller for the servicer.

    A call without a token over a connection whose verified client certificate names a
    workload is that workload (mutual TLS: the certificate is the credential). With
    ``require_service_certificate`` (any TLS listener) a service *token* is accepted only
    with a client certificate naming the same workload: the shared service key alone never
    makes anyone the settlement worker, and a server-only TLS port refuses service tokens.
    """

    def __init__(
        self,
        authority: CallerVerifier,
        public_methods: Collection[str] = DEFAULT_PUBLIC_METHODS,
        *,
        require_service_certificate: bool = False,
        on_refusal: RefusalHook | None = None,
    ) -> None:
        self._authority = authority
        self._public = frozenset(public_methods)
        self._require_certificate = require_service_certificate
        self._on_refusal = on_refusal

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or method in self._public:
            return handler
        metadata = handler_call_details.invocation_metadata
        authority = self._authority
        require_certificate = self._require_certificate
        on_refusal = self._on_refusal

        @contextlib.asynccontextmanager
        async def authenticated(
            _: str, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[None]:
            try:
                token = bearer_token(metadata)
                caller: Caller | None
                if token is None:
                    caller = certified_workload(context)
                    if caller is None:
                        raise Unauthenticated(
                            "TOKEN_MISSING", "missing 'authorization: Bearer <token>' metadata"
                        )
                else:
                    caller = await _verified_caller(authority, token)
            except (Unauthenticated, Unavailable) as exc:
                # Unavailable: an identity provider whose keys cannot be fetched now.
                await abort_with(context, exc)
                raise  # abort_with always raises; this tells the type checker so
            try:
                _check_access(method, caller, context, require_certificate, token is not None)
            except PermissionDenied as exc:
                if on_refusal is not None:
                    await on_refusal(method, caller, exc)
                await abort_with(context, exc)
                raise
            _caller.set(caller)
            # Every log line of the call names its caller (ids only, never the token).
            structlog.contextvars.bind_contextvars(caller=caller_label(caller))
            try:
                yield
            finally:
                # Not ContextVar.reset(): a cancelled stream's generator may be closed from
                # another context, where a reset token raises. Each call runs in a context of
                # its own, so clearing is enough.
                _caller.set(None)
                structlog.contextvars.unbind_contextvars("caller")

        return wrap_handler(handler, method, authenticated)


def _check_access(
    method: str, caller: Caller, context: Any, require_certificate: bool, by_token: bool
) -> None:
    """Refuse ``caller`` on ``method`` unless the access table and his certificate allow it."""
    if isinstance(caller, Service) and by_token:
        peer = peer_identity(context)
        if peer is None and require_certificate:
            raise PermissionDenied(
                "PEER_CERTIFICATE_REQUIRED",
                "a service credential is accepted only with its workload's client certificate",
            )
        if peer is not None and peer != caller.name:
            raise PermissionDenied(
                "PEER_IDENTITY_MISMATCH",
                f"the credential names {caller.name} but the certificate names {peer}",
            )
    who = identities(caller)
    verdict = allowed(method, who)
    if verdict is None:
        return  # not an RPC of the contract (a test's own service): a valid token suffices
    if not verdict:
        reason, message = refusal(method, who)
        raise PermissionDenied(reason, message)


# -- client side --------------------------------------------------------------------------


def bearer_metadata(token: str) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying ``token``: ``stub.Method(req, metadata=bearer_metadata(t))``."""
    return ((AUTHORIZATION_KEY, BEARER_PREFIX + token),)


class ServiceCredentials:
    """A workload's credential for outgoing calls.

    With an authority holding the shared service key (development, ``make run``): a service
    token, re-minted shortly before it expires. Without one (``authority=None``, mutual TLS):
    nothing at all, the client certificate the channel presents says who calls.
    """

    def __init__(self, authority: TokenAuthority | None, service_name: str) -> None:
        self._authority = authority
        self._service_name = service_name
        self._issued: IssuedToken | None = None

    @classmethod
    def for_process(cls, settings: Settings, service_name: str) -> ServiceCredentials:
        """The credential of this process: a token only where the shared key is in use."""
        authority = TokenAuthority.from_settings(settings)
        return cls(authority if authority.shared_service_key else None, service_name)

    @property
    def by_certificate(self) -> bool:
        """Whether the channel's client certificate is the whole credential."""
        return self._authority is None

    def token(self) -> str:
        """A valid credential (cached until a fifth of its lifetime remains); "" when the
        certificate is the credential."""
        if self._authority is None:
            return ""
        now = time.time()
        margin = self._authority.service_token_ttl_seconds / 5
        if self._issued is None or self._issued.expires_at - margin <= now:
            self._issued = self._authority.issue_service_token(self._service_name)
        return self._issued.token

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Call metadata carrying a valid credential (none when the certificate is it)."""
        token = self.token()
        return bearer_metadata(token) if token else ()


TokenSource = Callable[[], str]


def _with_token(details: grpc.aio.ClientCallDetails, token: str) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(
        *[(k, v) for k, v in (details.metadata or ()) if k != AUTHORIZATION_KEY]
    )
    metadata.add(AUTHORIZATION_KEY, BEARER_PREFIX + token)
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


class BearerUnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
    """Client interceptor adding ``authorization: Bearer`` from ``token_source`` to each call."""

    def __init__(self, token_source: TokenSource) -> None:
        self._token_source = token_source

    async def intercept_unary_unary(
        self, continuation: Any, client_call_details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_token(client_call_details, self._token_source()), request)


class BearerUnaryStream(grpc.aio.UnaryStreamClientInterceptor):
    """Client interceptor adding ``authorization: Bearer`` to server-streaming calls."""

    def __init__(self, token_source: TokenSource) -> None:
        self._token_source = token_source

    async def intercept_unary_stream(
        self, continuation: Any, client_call_details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_token(client_call_details, self._token_source()), request)


def bearer_interceptors(
    token_source: TokenSource,
) -> list[grpc.aio.ClientInterceptor]:
    """Interceptors for ``grpc.aio.insecure_channel(addr, interceptors=...)``."""
    return [BearerUnaryUnary(token_source), BearerUnaryStream(token_source)]
