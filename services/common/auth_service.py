"""The ``kishpa.auth.v1.AuthService`` servicer: guest login and token refresh.

Stateless: a guest login mints a fresh player id (from the OS random source) and signs a
token for it; nothing is stored. Any service may host it (``auth_registration``); the
matchmaking service, the player's first stop, is the natural home.
"""

from __future__ import annotations

import secrets
import unicodedata
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from kishpa.auth.v1 import auth_pb2, auth_pb2_grpc
from services.common.auth import IssuedToken, TokenAuthority, current_player
from services.common.errors import InvalidArgument, PermissionDenied
from services.common.server import ServiceRegistration

SERVICE_NAME = auth_pb2.DESCRIPTOR.services_by_name["AuthService"].full_name
MAX_DISPLAY_NAME = 32
PLAYER_ID_PREFIX = "p"


def new_player_id() -> str:
    """A fresh, unguessable player id (safe in Redis keys and wallet account names)."""
    return PLAYER_ID_PREFIX + secrets.token_hex(10)


def clean_display_name(raw: str) -> str:
    """The display name as stored: trimmed, 1-32 printable characters; else INVALID_ARGUMENT."""
    name = unicodedata.normalize("NFC", raw).strip()
    if not 1 <= len(name) <= MAX_DISPLAY_NAME:
        raise InvalidArgument(
            "INVALID_DISPLAY_NAME", f"display name must be 1-{MAX_DISPLAY_NAME} characters"
        )
    # Control and format characters would let a name spoof others in logs and clients.
    if any(unicodedata.category(ch) in {"Cc", "Cf", "Zl", "Zp"} for ch in name):
        raise InvalidArgument("INVALID_DISPLAY_NAME", "display name has control characters")
    return name


def _expiry(issued: IssuedToken) -> Timestamp:
    stamp = Timestamp()
    stamp.FromSeconds(issued.expires_at)
    return stamp


class AuthServicer(auth_pb2_grpc.AuthServiceServicer):
    """Guest login and refresh, signing with the process's player-token key.

    ``guest_login=False`` (``KISHPA_GUEST_LOGIN=0``, production) refuses ``Login``: players
    then sign in with their identity provider's token, exchanged by ``RefreshToken``.
    """

    def __init__(self, authority: TokenAuthority, *, guest_login: bool = True) -> None:
        self._authority = authority
        self._guest_login = guest_login

    def guest_name(self, request: auth_pb2.LoginRequest) -> str:
        """The guest's display name as stored, once guest login is known to be on."""
        if not self._guest_login:
            raise PermissionDenied(
                "GUEST_LOGIN_DISABLED", "guest login is off here: sign in with your account"
            )
        return clean_display_name(request.display_name)

    def answer(self, player_id: str, name: str) -> auth_pb2.LoginResponse:
        """A freshly signed token for ``player_id``: the answer to a Login."""
        issued = self._authority.issue_player_token(player_id, name)
        return auth_pb2.LoginResponse(
            token=issued.token,
            player_id=player_id,
            display_name=name,
            expire_time=_expiry(issued),
        )

    async def Login(
        self,
        request: auth_pb2.LoginRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> auth_pb2.LoginResponse:
        """Mint a new guest player and his token."""
        return self.answer(new_player_id(), self.guest_name(request))

    async def RefreshToken(
        self,
        request: auth_pb2.RefreshTokenRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> auth_pb2.RefreshTokenResponse:
        """A fresh token for the player whose valid token the interceptor verified.

        With an identity provider's token this is the exchange: the answer is a Kishpa
        player token for the player the provider's user maps to.
        """
        player = current_player()
        issued = self._authority.issue_player_token(player.player_id, player.name)
        return auth_pb2.RefreshTokenResponse(
            token=issued.token, expire_time=_expiry(issued), player_id=player.player_id
        )


def auth_registration(
    authority: TokenAuthority, *, guest_login: bool = True
) -> ServiceRegistration:
    """The auth servicer, ready for ``create_server``."""
    return ServiceRegistration(
        SERVICE_NAME,
        AuthServicer(authority, guest_login=guest_login),
        auth_pb2_grpc.add_AuthServiceServicer_to_server,
    )
