"""Tokens from an external OpenID Connect provider, accepted beside our own player tokens.

A provider signs ID/access tokens with asymmetric keys (RS256 or ES256) that it publishes as
a JWK Set at its JWKS URL. :class:`OidcVerifier` fetches that set with PyJWT's
``PyJWKClient`` (cached for ``jwks_cache_seconds``; a token naming a key id the cache does
not know triggers one refetch, at most once per ``jwks_cooldown_seconds``, so a provider's
key rotation is followed at once and a stream of bogus key ids cannot hammer it), then
checks the signature with the algorithm pinned to the configured list, the issuer, the
audience, ``exp``/``iat``/``sub``, and that the key the token's ``kid`` names is of the
type its ``alg`` needs (an ES256 token naming an RSA key is ``TOKEN_INVALID``).

A verified token becomes a :class:`~services.common.auth.Player` whose id is derived from
``(issuer, sub)`` (:func:`player_id_for`): stable across logins, never colliding with a
guest id (``p…``), safe in Redis keys and wallet account names. The display name is the
token's ``name`` (or ``preferred_username``). A token whose roles claim
(``KISHPA_OIDC_ROLES_CLAIM``, a dotted path) grants operator roles makes an
:class:`~services.common.auth.Admin` caller: operators sign in here, never with a key a
workload holds.

``TokenAuthority.verify`` hands a token to this verifier when its (unverified) ``iss`` is
the provider's; everything else still goes to our own HS256 keys.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import jwt

from services.common.access import OPERATOR_ROLES
from services.common.errors import Unauthenticated, Unavailable
from services.common.settings import Settings

PLAYER_ID_PREFIX: Final = "o"
ALLOWED_ALGORITHMS: Final = frozenset({"RS256", "ES256"})
LEEWAY_SECONDS: Final = 5
MAX_NAME_LENGTH: Final = 64
MAX_NUMERIC_DATE: Final = 10**11
"""``exp``/``iat``/``nbf`` beyond this (year 5138) are malformed (as for our own tokens)."""


def operator_roles(granted: list[Any], config: OidcConfig) -> frozenset[str]:
    """Our operator roles from the provider's roles claim."""
    names = {str(g) for g in granted}
    roles = {r for r in OPERATOR_ROLES if config.role_prefix + r in names}
    if config.admin_role in names:
        roles.add("support")
    return frozenset(roles)


def player_id_for(issuer: str, subject: str) -> str:
    """Our player id for the provider's user ``subject`` (``o`` + 20 hex digits)."""
    digest = hashlib.sha256(f"{issuer}\x00{subject}".encode()).hexdigest()
    return PLAYER_ID_PREFIX + digest[:20]


@dataclass(frozen=True, slots=True)
class OidcConfig:
    """Where the provider is and what its tokens must say."""

    issuer: str
    audience: str
    jwks_url: str
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    jwks_cache_seconds: float = 300.0
    jwks_cooldown_seconds: float = 30.0
    roles_claim: str = "roles"
    admin_role: str = "kishpa-admin"
    """The provider's older single admin role: read-only (``support``) since roles exist."""
    role_prefix: str = "kishpa-"
    """The provider's role ``<prefix><role>`` grants our operator role (``kishpa-finance``)."""
    fetch_timeout_seconds: float = 5.0

    def __post_init__(self) -> None:
        if not (self.issuer and self.audience and self.jwks_url):
            raise ValueError("OIDC needs an issuer, an audience and a JWKS URL")
        unknown = set(self.algorithms) - ALLOWED_ALGORITHMS
        if unknown or not self.algorithms:
            raise ValueError(f"OIDC algorithms must be among {sorted(ALLOWED_ALGORITHMS)}")


@dataclass(frozen=True, slots=True)
class OidcIdentity:
    """What a verified provider token says about its bearer."""

    player_id: str
    name: str
    subject: str
    roles: frozenset[str]
    """Operator roles (``support``, ``finance``, ``ops``); empty for a player."""
    expires_at: int
    lifetime: int = 0
    """Seconds from ``iat`` to ``exp``."""

    @property
    def admin(self) -> bool:
        """Whether the bearer is an operator (has any operator role)."""
        return bool(self.roles)


class OidcVerifier:
    """Verifies the provider's tokens against its published keys."""

    def __init__(self, config: OidcConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._clock = clock
        client = _LocalKeySet if urlsplit(config.jwks_url).scheme == "file" else jwt.PyJWKClient
        self._keys = client(
            config.jwks_url,
            cache_keys=False,  # a key the provider withdrew must stop verifying with the set
            cache_jwk_set=True,
            lifespan=config.jwks_cache_seconds,
            timeout=config.fetch_timeout_seconds,
            cooldown_duration=config.jwks_cooldown_seconds,
        )
        # One fetch at a time: calls arriving while the set is being fetched wait for it
        # (in their verification thread) instead of each asking the provider again.
        self._fetching = threading.Lock()

    @property
    def issuer(self) -> str:
        return self.config.issuer

    def verify(self, token: str) -> OidcIdentity:
        """The identity in a valid provider token; :class:`Unauthenticated` otherwise.

        Fetching the key set may block for up to ``fetch_timeout_seconds``: on the first
        token, after ``jwks_cache_seconds``, and on a key rotation. Servers therefore call
        it from a thread (``TokenAuthority.verify_async``), never on the event loop.
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("TOKEN_INVALID", "the token is not a valid JWT") from None
        if header.get("alg") not in self.config.algorithms:
            raise Unauthenticated(
                "TOKEN_INVALID", f"tokens of this provider must be signed with {self._algs()}"
            )
        key = self._signing_key(token)
        if _family(key.algorithm_name) != _family(str(header["alg"])):
            # E.g. ES256 with the id of the provider's RSA key: never handed to the wrong
            # algorithm (PyJWT raised TypeError there, answered UNKNOWN).
            raise Unauthenticated(
                "TOKEN_INVALID",
                f"the token is signed with {header['alg']} but its key id names a "
                f"{key.algorithm_name} key",
            )
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[str(header["alg"])],
                audience=self.config.audience,
                issuer=self.config.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "iss", "sub", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("TOKEN_EXPIRED", "the token has expired: sign in again") from None
        except jwt.InvalidAudienceError:
            raise Unauthenticated("TOKEN_INVALID", "the token is not meant for Kishpa") from None
        except jwt.InvalidIssuerError:
            raise Unauthenticated("TOKEN_INVALID", "the token's issuer is not trusted") from None
        except jwt.PyJWTError as exc:
            raise Unauthenticated("TOKEN_INVALID", f"the token is invalid: {exc}") from None
        except (TypeError, ValueError, OverflowError):
            # A key and token that do not fit together in a way PyJWT does not name.
            raise Unauthenticated("TOKEN_INVALID", "the token does not fit its key") from None
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject:
            raise Unauthenticated("TOKEN_INVALID", "the token names no subject")
        name = str(claims.get("name") or claims.get("preferred_username") or "")
        granted = _claim(claims, self.config.roles_claim)
        roles = operator_roles(granted, self.config) if isinstance(granted, list) else frozenset()
        for claim in ("exp", "iat", "nbf"):
            value = claims.get(claim, 0)
            # The same bounds as our own tokens: a year-5138 expiry is malformed, not long.
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise Unauthenticated("TOKEN_INVALID", f"the token's {claim} is not a number")
            if not (math.isfinite(value) and 0 <= value <= MAX_NUMERIC_DATE):
                raise Unauthenticated("TOKEN_INVALID", f"the token's {claim} is out of range")
        expires_at = int(claims["exp"])
        lifetime = expires_at - int(claims["iat"])
        return OidcIdentity(
            player_id=player_id_for(self.config.issuer, subject),
            name=name[:MAX_NAME_LENGTH],
            subject=subject,
            roles=roles,
            expires_at=expires_at,
            lifetime=lifetime,
        )

    def _signing_key(self, token: str) -> jwt.PyJWK:
        """The provider's key for ``token``; a provider that cannot say is UNAVAILABLE.

        Whatever the key endpoint does wrong (an error status, a timeout, a dropped
        connection, an HTML page, JSON that is not a key set) is the provider's outage, not
        the caller's fault: ``UNAVAILABLE`` ``IDENTITY_PROVIDER_UNAVAILABLE``, with a message
        naming no internals. Only a well-formed set without the token's key id (after the
        one refetch) refuses the token itself.
        """
        try:
            with self._fetching:
                return self._keys.get_signing_key_from_jwt(token)
        except jwt.PyJWKClientConnectionError:
            raise _provider_unavailable("cannot be reached") from None
        except jwt.PyJWKSetError:
            raise _provider_unavailable("published no usable key") from None
        except jwt.PyJWKClientError as exc:
            if str(exc).startswith(UNKNOWN_KEY_MESSAGE):
                raise Unauthenticated(
                    "TOKEN_INVALID", "no key of the provider fits the token"
                ) from None
            raise _provider_unavailable("answered with something other than a key set") from None
        except jwt.PyJWTError:
            raise Unauthenticated(
                "TOKEN_INVALID", "no key of the provider fits the token"
            ) from None
        except (OSError, ValueError, http.client.HTTPException):
            # ValueError: a body that is not JSON; OSError: the connection broke mid-read.
            raise _provider_unavailable("answered with something other than a key set") from None

    def _algs(self) -> str:
        return "/".join(self.config.algorithms)


class _LocalKeySet(jwt.PyJWKClient):
    """A key set in a local file (``file://`` JWKS URL): the development operator issuer of
    ``kishpa run --tls`` publishes its public key this way. PyJWT fetches only http(s), so
    this reads the file and caches it like a fetched set. Production refuses such URLs."""

    def __init__(self, uri: str, **kwargs: Any) -> None:
        super().__init__("https://localhost/jwks.json", **kwargs)
        self._path = Path(unquote(urlsplit(uri).path))

    def fetch_data(self) -> Any:
        try:
            jwk_set = json.loads(self._path.read_text())
        except OSError as exc:
            raise jwt.PyJWKClientConnectionError(f"cannot read {self._path}: {exc}") from None
        if not isinstance(jwk_set, dict):
            raise jwt.PyJWKClientError("the key set file is not a JSON object")
        if self.jwk_set_cache is not None:
            self.jwk_set_cache.put(jwk_set)
        self._last_successful_fetch = time.monotonic()
        return jwk_set


def _family(algorithm: str) -> str:
    """``RS`` or ``ES`` (the key type an algorithm needs): RS256 and RS384 share keys."""
    return algorithm[:2]


def _claim(claims: dict[str, Any], path: str) -> Any:
    """The claim at ``path``; dots reach into objects (``realm_access.roles``)."""
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value or []


UNKNOWN_KEY_MESSAGE: Final = "Unable to find a signing key"
"""How PyJWT starts the message of a key id missing from a well-formed key set."""


def _provider_unavailable(what: str) -> Unavailable:
    return Unavailable(
        "IDENTITY_PROVIDER_UNAVAILABLE",
        f"the identity provider's key endpoint {what}: sign-in works again once it answers",
    )


def oidc_verifier_from_settings(settings: Settings) -> OidcVerifier | None:
    """The process's verifier when ``KISHPA_OIDC_ISSUER`` is set (else None: OIDC is off).

    A half-configured provider (issuer without audience or JWKS URL) fails at start-up.
    """
    if not settings.oidc_issuer:
        return None
    algorithms = tuple(a.strip() for a in settings.oidc_algorithms.split(",") if a.strip())
    return OidcVerifier(
        OidcConfig(
            issuer=settings.oidc_issuer,
            audience=settings.oidc_audience,
            jwks_url=settings.oidc_jwks_url,
            algorithms=algorithms,
            jwks_cache_seconds=settings.oidc_jwks_cache_seconds,
            admin_role=settings.oidc_admin_role,
            role_prefix=settings.oidc_role_prefix,
            roles_claim=settings.oidc_roles_claim,
        )
    )
