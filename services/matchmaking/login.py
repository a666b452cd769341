"""Guest login that also opens the new player's wallet (kishpa.auth.v1 on this service).

The development login: a display name in, a signed player token out. The token is the same
JWT a real identity provider's exchange would mint later, so nothing downstream changes
when one is added. Signing and refresh are the shared ``AuthServicer``'s; this adds the
wallet: a player's first login grants his starting tokens (docs/rules/kishpa.md section 5).
"""

from __future__ import annotations

from typing import Any

import grpc

from kishpa.auth.v1 import auth_pb2, auth_pb2_grpc
from services.common.auth import TokenAuthority, current_player
from services.common.auth_service import SERVICE_NAME, AuthServicer
from services.common.limits import Limiter, caller_address, device_key
from services.common.oidc import PLAYER_ID_PREFIX as OIDC_PLAYER_PREFIX
from services.common.server import ServiceRegistration
from services.matchmaking.gateways import WalletGateway

AMBIGUOUS = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
"""Failures after which the wallet may have acted: the answer, not the request, was lost."""


class LoginServicer(AuthServicer):
    """Login = sign a token for a new guest + open his wallet (idempotent in the wallet)."""

    def __init__(
        self,
        authority: TokenAuthority,
        wallet: WalletGateway | None,
        limiter: Limiter | None = None,
        *,
        guest_login: bool = True,
    ) -> None:
        super().__init__(authority, guest_login=guest_login)
        self._wallet = wallet
        self._limiter = limiter

    async def Login(
        self,
        request: auth_pb2.LoginRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> auth_pb2.LoginResponse:
        """Mint the guest, then open his wallet; a wallet that is down fails the login
        (UNAVAILABLE, retryable) rather than hand out a player who cannot pay."""
        response = await super().Login(request, context)
        if self._wallet is None:
            return response
        if self._limiter is None:
            await self._wallet.open_wallet(response.player_id)
            return response
        # The starting tokens once per device (a login without a device id counts as its
        # client address): a new guest on a known device starts with an empty wallet.
        config = self._limiter.config
        address = caller_address(context.peer(), context.invocation_metadata(), config)
        device = device_key(request.device_id, address, config)
        if device is None:
            await self._wallet.open_wallet(response.player_id)
            return response
        granted = await self._claim_grant(device, response.player_id)
        try:
            await self._wallet.open_wallet(response.player_id, grant=granted)
        except grpc.aio.AioRpcError as exc:
            if exc.code() not in AMBIGUOUS:
                raise
            # The wallet may have opened it and the answer got lost: opening is idempotent
            # per player, so asking once more either replays the first answer or opens it.
            await self._wallet.open_wallet(response.player_id, grant=granted)
        return response

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
) -> ServiceRegistration:
    """The auth servicer with wallet opening, ready for ``create_server``."""
    return ServiceRegistration(
        SERVICE_NAME,
        LoginServicer(authority, wallet, limiter, guest_login=guest_login),
        auth_pb2_grpc.add_AuthServiceServicer_to_server,
    )
