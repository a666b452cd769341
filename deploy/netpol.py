"""Who may open a connection to whom, under a set of rendered NetworkPolicies.

A small evaluator of the Kubernetes NetworkPolicy semantics (networking.k8s.io/v1) for one
namespace, so the tests can state the intended reachability ("only the wallet and the
migration job reach PostgreSQL") and check the policies deliver exactly that. A connection
is allowed when the source's egress allows it *and* the destination's ingress admits it;
a pod no policy of a direction selects is unrestricted in that direction. Ports must be
numeric: a named port, an ``endPort`` or anything else not modelled raises
:class:`UnsupportedPolicy` rather than being guessed at.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class UnsupportedPolicy(ValueError):
    """The policy uses a feature this evaluator does not model."""


@dataclass(frozen=True)
class Endpoint:
    """One end of a connection: a pod (namespace and labels) or an address outside the cluster.

    ``namespace`` is None for an address outside the cluster; ``ip`` is None when unknown
    (an arbitrary client on the internet), which any ipBlock is assumed to cover.
    """

    name: str
    namespace: str | None
    labels: Mapping[str, str] = field(default_factory=dict)
    ip: str | None = None


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise UnsupportedPolicy(f"selector operator {op!r}")
    return True


def _peer_matches(peer: Mapping[str, Any], policy_namespace: str, other: Endpoint) -> bool:
    if "ipBlock" in peer:
        if other.namespace is not None:
            # ipBlock is meant for addresses outside the cluster; pod IPs are ephemeral.
            return False
        if other.ip is None:
            return True
        block = peer["ipBlock"]
        address = ipaddress.ip_address(other.ip)
        if address not in ipaddress.ip_network(block["cidr"], strict=False):
            return False
        return not any(
            address in ipaddress.ip_network(cidr, strict=False) for cidr in block.get("except", [])
        )
    if other.namespace is None:
        return False
    if "namespaceSelector" in peer:
        ns_labels = {NAMESPACE_NAME_LABEL: other.namespace}
        if not _selector_matches(peer["namespaceSelector"], ns_labels):
            return False
    elif other.namespace != policy_namespace:
        return False
    return "podSelector" not in peer or _selector_matches(peer["podSelector"], other.labels)


def _port_matches(ports: Iterable[Mapping[str, Any]] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    for entry in ports:
        if "endPort" in entry or isinstance(entry.get("port"), str):
            raise UnsupportedPolicy(f"port entry {dict(entry)!r}: use one numeric port")
        if entry.get("protocol", "TCP") != protocol:
            continue
        if "port" not in entry or entry["port"] == port:
            return True
    return False


class PolicySet:
    """The NetworkPolicies of one namespace."""

    def __init__(self, namespace: str, policies: Iterable[Mapping[str, Any]]) -> None:
        self.namespace = namespace
        self.policies = [p for p in policies if p.get("kind") == "NetworkPolicy"]
        for policy in self.policies:
            if policy["metadata"].get("namespace", namespace) != namespace:
                raise UnsupportedPolicy("policies of several namespaces")

    def _selecting(self, pod: Endpoint, direction: str) -> list[Mapping[str, Any]]:
        if pod.namespace != self.namespace:
            return []
        chosen = []
        for policy in self.policies:
            spec = policy["spec"]
            types = spec.get("policyTypes") or (
                ["Ingress", "Egress"] if "egress" in spec else ["Ingress"]
            )
            if direction in types and _selector_matches(spec.get("podSelector") or {}, pod.labels):
                chosen.append(spec)
        return chosen

    def _allows(
        self, pod: Endpoint, other: Endpoint, port: int, protocol: str, direction: str
    ) -> bool:
        specs = self._selecting(pod, direction)
        if not specs:
            return True
        rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        for spec in specs:
            for rule in spec.get(rules_key) or []:
                if not _port_matches(rule.get("ports"), port, protocol):
                    continue
                peers = rule.get(peers_key)
                if not peers or any(_peer_matches(p, self.namespace, other) for p in peers):
                    return True
        return False

    def allows(
        self, source: Endpoint, destination: Endpoint, port: int, protocol: str = "TCP"
    ) -> bool:
        """Whether ``source`` may open a connection to ``destination`` on ``port``."""
        return self._allows(source, destination, port, protocol, "Egress") and self._allows(
            destination, source, port, protocol, "Ingress"
        )

    def denies_by_default(self) -> bool:
        """Whether one policy selects every pod for both directions with no rule (deny all)."""
        for policy in self.policies:
            spec = policy["spec"]
            if (
                not spec.get("podSelector")
                and set(spec.get("policyTypes") or []) == {"Ingress", "Egress"}
                and not spec.get("ingress")
                and not spec.get("egress")
            ):
                return True
        return False
