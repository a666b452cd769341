"""Which RPCs the edge exposes to browsers, and where each one goes.

An allowlist made at import from the access table (:func:`services.common.access.browser_rpcs`:
the RPCs a player may call, but ``OpenWallet`` and ``LoadTokens``): a method not in it is
answered ``UNIMPLEMENTED`` by the edge and never reaches a service, so service-only RPCs
(``WalletService.ApplyBatch``, admin RPCs) cannot be called from a browser even with a stolen
service token. Envoy's routes (``deploy/envoy/envoy.yaml``) are generated from the same table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from google.protobuf.descriptor import ServiceDescriptor

from kishpa.admin.v1 import admin_pb2
from kishpa.auth.v1 import auth_pb2
from kishpa.matchmaking.v1 import matchmaking_pb2
from kishpa.table.v1 import history_pb2, table_pb2
from kishpa.wallet.v1 import wallet_pb2
from services.common.access import browser_rpcs


@dataclass(frozen=True, slots=True)
class Route:
    """One exposed method: the upstream it goes to and whether it streams responses."""

    path: str
    upstream: str
    server_streaming: bool


CONTRACT: Final[Mapping[str, ServiceDescriptor]] = {
    service.full_name: service
    for module in (admin_pb2, auth_pb2, matchmaking_pb2, table_pb2, history_pb2, wallet_pb2)
    for service in module.DESCRIPTOR.services_by_name.values()
}
"""Every service of the Kishpa contract by its full name (the descriptors say which method
streams)."""


def _route(path: str, upstream: str) -> Route:
    service_name, name = path.removeprefix("/").split("/", 1)
    service = CONTRACT.get(service_name)
    if service is None or name not in service.methods_by_name:
        raise ValueError(f"{path}: no such RPC in the contract's descriptors")
    method = service.methods_by_name[name]
    if method.client_streaming:
        raise ValueError(f"{path}: client streaming is not offered")
    return Route(path, upstream, method.server_streaming)


ROUTES: Final[Mapping[str, Route]] = MappingProxyType(
    {path: _route(path, upstream) for path, upstream in browser_rpcs().items()}
)
"""Every exposed method by its HTTP path (``/kishpa.table.v1.TableService/Draw``)."""


def public_routes() -> dict[str, Route]:
    """A copy of :data:`ROUTES` (an edge may be given other routes, e.g. in a test)."""
    return dict(ROUTES)
