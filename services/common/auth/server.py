"""The server side: the interceptor that says who calls, and the caller of the current RPC.

Under mutual TLS a *workload* is who its verified client certificate says (a call without a
token over the ``table`` certificate is the table service). Servicers never read the player
from a request body: the interceptor verifies the ``authorization: Bearer <jwt>`` metadata (or
the peer certificate), checks the method against ``services.common.access`` and stores the
caller for the duration of the call; servicers ask :func:`current_player` or
:func:`require_service`.
"""

from __future__ import annotations

import contextlib
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterator,
    Sequence,
)
from contextvars import ContextVar
from typing import Any, Final, Protocol

import grpc
import structlog

from services.common.access import PROXIES, WORKLOADS, allowed, refusal
from services.common.auth.tokens import (
    ADMIN_SUBJECT_PREFIX,
    AUTHORIZATION_KEY,
    BEARER_PREFIX,
    MAX_TOKEN_CHARS,
    SERVICE_SUBJECT_PREFIX,
    Admin,
    Caller,
    Player,
    Service,
)
from services.common.errors import PermissionDenied, Unauthenticated, Unavailable, abort_with
from services.common.handlers import wrap_handler
from services.common.tls import peer_identity

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
