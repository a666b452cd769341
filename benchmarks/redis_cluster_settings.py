"""What a Redis Cluster does when one master dies, under the two settings the service needs.

For each combination of ``cluster-require-full-coverage`` (yes: Redis's default; no) and
``cluster-node-timeout`` (15000 ms: Redis's default; 2000 ms), starts a 3-master cluster of
its own (devkit.redis_servers), SIGKILLs one master and measures, from the kill:

- when the surviving masters flag the dead one ``fail`` (a replica, where there is one, is
  promoted only after that: the node timeout bounds how long its tables wait);
- whether and when a key on a SURVIVING master stops answering (``CLUSTERDOWN``): with full
  coverage required, the whole cluster refuses once one slot is unserved.

Run: ``python benchmarks/redis_cluster_settings.py`` (about 2 minutes; results in
docs/operations.md, "Redis Cluster settings").
"""

from __future__ import annotations

import time

import redis

from devkit.redis_servers import start_cluster, stop_cluster
from shared import keys

HORIZON_S = 25.0


def _flagged_fail(client: redis.Redis, port: int) -> bool:
    """Whether ``client``'s node flags the node on ``port`` as failed (not just suspected)."""
    nodes: dict[str, dict[str, object]] = client.execute_command("CLUSTER NODES")  # type: ignore[no-untyped-call]
    for address, node in nodes.items():
        if address.endswith(f":{port}"):
            return "fail" in str(node["flags"]).split(",")
    return False


def measure(full_coverage: bool, node_timeout_ms: int) -> tuple[float | None, float | None]:
    """(seconds to the ``fail`` flag, seconds until a survivor's key is refused), None:
    not within the horizon."""
    cluster = start_cluster(3, node_timeout_ms=node_timeout_ms, full_coverage=full_coverage)
    try:
        victim, survivor = cluster.nodes[2], cluster.nodes[0]
        tag = next(
            f"k{n}"
            for n in range(10_000)
            if cluster.node_of_slot(keys.key_slot(f"k{n}")) is survivor
        )
        client = survivor.client()
        client.set(f"{{{tag}}}:probe", "1")
        victim.kill()
        killed = time.monotonic()
        flagged: float | None = None
        refused: float | None = None
        while time.monotonic() - killed < HORIZON_S and (flagged is None or refused is None):
            now = time.monotonic() - killed
            if flagged is None and _flagged_fail(client, victim.port):
                flagged = now
            if refused is None:
                try:
                    client.set(f"{{{tag}}}:probe", "1")
                except redis.exceptions.ClusterDownError:
                    refused = now
            time.sleep(0.05)
        return flagged, refused
    finally:
        stop_cluster(cluster)


def main() -> None:
    print(
        "| cluster-require-full-coverage | cluster-node-timeout | dead master flagged fail "
        "| a surviving master's keys |"
    )
    print("|---|---|---|---|")
    for full_coverage in (True, False):
        for timeout in (15000, 2000):
            flagged, refused = measure(full_coverage, timeout)
            flag = "not within 25 s" if flagged is None else f"after {flagged:.1f} s"
            keys_state = (
                f"refused (`CLUSTERDOWN`) from {refused:.1f} s"
                if refused is not None
                else "served throughout"
            )
            print(f"| {'yes' if full_coverage else 'no'} | {timeout} ms | {flag} | {keys_state} |")


if __name__ == "__main__":
    main()
