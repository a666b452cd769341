"""Who calls: player tokens, workload certificates, operators; in three parts.

* :mod:`.tokens` — the callers (:class:`Player`, :class:`Service`, :class:`Admin`) and the
  :class:`TokenAuthority` that mints and verifies their tokens;
* :mod:`.server` — the :class:`AuthInterceptor` every server runs, and the caller of the
  current RPC (:func:`current_player`, :func:`require_service`, :func:`require_admin`);
* :mod:`.client` — bearer metadata and the client interceptors that add a workload's token.

Under mutual TLS a *workload* is who its verified client certificate says: no secret is
shared between workloads, and production (``KISHPA_PRODUCTION=1``) holds none. *Operators*
are who the identity provider says (``services.common.oidc``). Service credentials and admin
tokens are the development model (plain ``make run``), refused where no shared key is
configured. The names below are re-exported so callers import them from here.
"""

from __future__ import annotations

from services.common.auth.client import BearerUnaryStream as BearerUnaryStream
from services.common.auth.client import BearerUnaryUnary as BearerUnaryUnary
from services.common.auth.client import ServiceCredentials as ServiceCredentials
from services.common.auth.client import TokenSource as TokenSource
from services.common.auth.client import bearer_interceptors as bearer_interceptors
from services.common.auth.client import bearer_metadata as bearer_metadata
from services.common.auth.server import DEFAULT_PUBLIC_METHODS as DEFAULT_PUBLIC_METHODS
from services.common.auth.server import AuthInterceptor as AuthInterceptor
from services.common.auth.server import CallerVerifier as CallerVerifier
from services.common.auth.server import RefusalHook as RefusalHook
from services.common.auth.server import acting_as as acting_as
from services.common.auth.server import bearer_token as bearer_token
from services.common.auth.server import caller_label as caller_label
from services.common.auth.server import certified_workload as certified_workload
from services.common.auth.server import current_caller as current_caller
from services.common.auth.server import current_player as current_player
from services.common.auth.server import identities as identities
from services.common.auth.server import require_admin as require_admin
from services.common.auth.server import require_service as require_service
from services.common.auth.tokens import ADMIN_OIDC_PREFIX as ADMIN_OIDC_PREFIX
from services.common.auth.tokens import ADMIN_SUBJECT_PREFIX as ADMIN_SUBJECT_PREFIX
from services.common.auth.tokens import ADMIN_TYP as ADMIN_TYP
from services.common.auth.tokens import ALGORITHM as ALGORITHM
from services.common.auth.tokens import AUTHORIZATION_KEY as AUTHORIZATION_KEY
from services.common.auth.tokens import BEARER_PREFIX as BEARER_PREFIX
from services.common.auth.tokens import DEV_OPERATOR_TOKEN_SECONDS as DEV_OPERATOR_TOKEN_SECONDS
from services.common.auth.tokens import ISSUER as ISSUER
from services.common.auth.tokens import KEY_FETCH_THREADS as KEY_FETCH_THREADS
from services.common.auth.tokens import LEEWAY_SECONDS as LEEWAY_SECONDS
from services.common.auth.tokens import MAX_NAME_LENGTH as MAX_NAME_LENGTH
from services.common.auth.tokens import MAX_NUMERIC_DATE as MAX_NUMERIC_DATE
from services.common.auth.tokens import MAX_TOKEN_CHARS as MAX_TOKEN_CHARS
from services.common.auth.tokens import PLAYER_TYP as PLAYER_TYP
from services.common.auth.tokens import SERVICE_SUBJECT_PREFIX as SERVICE_SUBJECT_PREFIX
from services.common.auth.tokens import SERVICE_TYP as SERVICE_TYP
from services.common.auth.tokens import VERIFIED_CACHE_SIZE as VERIFIED_CACHE_SIZE
from services.common.auth.tokens import Admin as Admin
from services.common.auth.tokens import Caller as Caller
from services.common.auth.tokens import IssuedToken as IssuedToken
from services.common.auth.tokens import Player as Player
from services.common.auth.tokens import Service as Service
from services.common.auth.tokens import TokenAuthority as TokenAuthority
