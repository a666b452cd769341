"""The client side: bearer metadata and the client interceptors that add a workload's token."""

from __future__ import annotations

import time
from collections.abc import (
    Callable,
)
from typing import Any

import grpc

from services.common.auth.tokens import (
    AUTHORIZATION_KEY,
    BEARER_PREFIX,
    IssuedToken,
    TokenAuthority,
)
from services.common.settings import Settings

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
