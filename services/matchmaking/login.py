"""Guest login that also opens the new player's wallet (kishpa.auth.v1 on this service).

The development login: a display name in, a signed player token out. The token is the same
JWT a real identity provider's exchange would mint later, so nothing downstream changes
when one is added. Signing and refresh are the shared ``AuthServicer``'s; this adds the
wallet: a player's first login grants his starting tokens (docs/rules/kishpa.md section 5), and
the login's ``request_id``: a retried attempt is the same player (:mod:`.login_memory`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import grpc

from kishpa.auth.v1 import auth_pb2, auth_pb2_grpc
from services.common.auth import TokenAuthority, current_player
from services.common.auth_service import SERVICE_NAME, AuthServicer, new_player_id
from services.common.errors import AlreadyExists
from services.common.limits import Limiter, caller_address, device_key
from services.common.oidc import PLAYER_ID_PREFIX as OIDC_PLAYER_PREFIX
from services.common.server import ServiceRegistration
from services.common.validation import fingerprint_of
from services.matchmaking.gateways import WalletGateway
from services.matchmaking.login_memory import LoginMemory
from shared.retry import SERVICE_BACKOFF, UNREACHABLE_CODES, code_in, retrying

OPEN_WALLET_RETRY = replace(SERVICE_BACKOFF, attempts=2)
"""One more try of a granting open whose answer was lost (the wallet may have acted)."""


LOGIN_METHOD = f"/{SERVICE_NAME}/Login"


class LoginServicer(AuthServicer):
    """Login = sign a token for a new guest + open his wallet (idempotent in the wallet).

    With ``memory``, a login carrying a ``request_id`` is idempotent too: a retry of the
    same attempt gets the player the first call minted (:mod:`.login_memory`).
    """

    def __init__(
        self,
        authority: TokenAuthority,
        wallet: WalletGateway | None,
        limiter: Limiter | None = None,
        *,
        guest_login: bool = True,
        memory: LoginMemory | None = None,
    ) -> None:
        super().__init__(authority, guest_login=guest_login)
        self._wallet = wallet
        self._limiter = limiter
        self._memory = memory

    async def Login(
        self,
        request: auth_pb2.LoginRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> auth_pb2.LoginResponse:
        """Mint the guest (or find the one this attempt minted), then open his wallet; a
        wallet that is down fails the login (UNAVAILABLE, retryable) rather than hand out a
        player who cannot pay."""
        name = self.guest_name(request)
        player_id = await self._attempt_player(request)
        if self._wallet is not None:
            await self._open_wallet(request, context, player_id)
        return self.answer(player_id, name)

    async def _attempt_player(self, request: auth_pb2.LoginRequest) -> str:
        """A new player id, or the one the first call of this attempt (same request id)
        minted; the same id with another name or device is a reused key."""
        if not request.request_id or self._memory is None:
            return new_player_id()
        fingerprint = fingerprint_of(LOGIN_METHOD, request)
        first = await self._memory.remember(
            request.device_id, request.request_id, new_player_id(), fingerprint
        )
        if first.fingerprint != fingerprint:
            raise AlreadyExists(
                "IDEMPOTENCY_KEY_REUSED",
                "request_id was already used for a login with another name or device",
            )
        return first.player_id

    async def _open_wallet(
        self,
        request: auth_pb2.LoginRequest,
        context: grpc.aio.ServicerContext[Any, Any],
        player_id: str,
    ) -> None:
        assert self._wallet is not None
        if self._limiter is None:
            await self._wallet.open_wallet(player_id)
            return
        # The starting tokens once per device (a login without a device id counts as its
        # client address): a new guest on a known device starts with an empty wallet.
        config = self._limiter.config
        address = caller_address(context.peer(), context.invocation_metadata(), config)
        device = device_key(request.device_id, address, config)
        if device is None:
            await self._wallet.open_wallet(player_id)
            return
        granted = await self._claim_grant(device, player_id)
        wallet = self._wallet
        # No answer: the wallet may have opened it and the answer got lost. Opening is
        # idempotent per player, so asking once more either replays the first answer or opens it.
        await retrying(
            lambda: wallet.open_wallet(player_id, grant=granted),
            OPEN_WALLET_RETRY,
            retry_on=code_in(UNREACHABLE_CODES),
        )

    async def _claim_grant(self, device: str, player_id: str) -> bool:
        """Whether ``player_id`` gets the device's starting grant.

        The device's marker names the player it was claimed for and is never given back
        on a failure (the wallet may have granted it, its answer lost). Instead, a later
        login finds the marker naming a player whose wallet was never opened (that login
        failed before the wallet acted) and takes the grant over, atomically.
        """
        assert self._limiter is not None
        assert self._wallet is not None
        if await self._limiter.grant_once(device, player_id):
            return True
        holder = await self._limiter.grant_holder(device)
        if holder is None or holder == player_id:
            return holder == player_id
        if await self._wallet.wallet_exists(holder) is False:
            return await self._limiter.move_grant(device, holder, player_id)
        return False

    async def RefreshToken(
        self,
        request: auth_pb2.RefreshTokenRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> auth_pb2.RefreshTokenResponse:
        """Refresh; a player signing in with his identity provider's token (the exchange)
        gets his wallet opened here, as a guest's is at Login (idempotent)."""
        player = current_player()
        if self._wallet is not None and player.player_id.startswith(OIDC_PLAYER_PREFIX):
            await self._wallet.open_wallet(player.player_id)
        return await super().RefreshToken(request, context)


def login_registration(
    authority: TokenAuthority,
    wallet: WalletGateway | None,
    limiter: Limiter | None = None,
    *,
    guest_login: bool = True,
    memory: LoginMemory | None = None,
) -> ServiceRegistration:
    """The auth servicer with wallet opening, ready for ``create_server``."""
    return ServiceRegistration(
        SERVICE_NAME,
        LoginServicer(authority, wallet, limiter, guest_login=guest_login, memory=memory),
        auth_pb2_grpc.add_AuthServiceServicer_to_server,
    )
