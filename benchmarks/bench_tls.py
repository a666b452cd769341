"""What mutual TLS costs a unary call: the same server and RPC, plaintext vs mutual TLS.

One process, one grpc.aio server hosting the auth service (``RefreshToken`` with a player
token: interceptors, token check, signing), a client channel per mode with ``--concurrency``
calls in flight. Rounds alternate plaintext and TLS so load from elsewhere hits both alike;
the figure to read is the ratio. Connection setup is excluded (a warm-up call first).

    .venv/bin/python benchmarks/bench_tls.py --calls 3000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devkit.tlscerts import TestCA
from kishpa.auth.v1 import auth_pb2, auth_pb2_grpc
from services.common.auth import TokenAuthority, bearer_metadata
from services.common.auth_service import auth_registration
from services.common.server import create_server
from services.common.settings import load_settings
from services.common.tls import CertificateFiles
from shared.tls import ClientTls, aio_channel

KEY = "k" * 40


async def measure(address: str, tls: ClientTls | None, calls: int, concurrency: int) -> float:
    """Calls per second of RefreshToken over one channel."""
    token = TokenAuthority(KEY).issue_player_token("p-bench", "B").token
    md = bearer_metadata(token)
    async with aio_channel(address, tls) as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        await stub.RefreshToken(auth_pb2.RefreshTokenRequest(), metadata=md)  # connect
        left = calls

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await stub.RefreshToken(auth_pb2.RefreshTokenRequest(), metadata=md)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return calls / (time.perf_counter() - start)


async def main(calls: int, rounds: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ca = TestCA(Path(tmp))
        server_cert = ca.issue(
            "matchmaking", cert_file=Path(tmp) / "s.crt", key_file=Path(tmp) / "s.key"
        )
        client_cert = ca.issue("edge")
        settings = load_settings("bench", token_secret=KEY)
        authority = TokenAuthority(KEY)
        plain = create_server([auth_registration(authority)], settings, address="127.0.0.1:0")
        secure = create_server(
            [auth_registration(authority)],
            settings,
            address="127.0.0.1:0",
            tls=CertificateFiles(server_cert.cert_file, server_cert.key_file, ca.ca_file),
        )
        await plain.start()
        await secure.start()
        client = ClientTls(ca.ca_file, client_cert.cert_file, client_cert.key_file)
        rates: dict[str, list[float]] = {"plaintext": [], "mutual TLS": []}
        try:
            for _ in range(rounds):
                rates["plaintext"].append(
                    await measure(f"127.0.0.1:{plain.port}", None, calls, concurrency)
                )
                rates["mutual TLS"].append(
                    await measure(f"127.0.0.1:{secure.port}", client, calls, concurrency)
                )
        finally:
            await plain.stop(0)
            await secure.stop(0)
    base = statistics.median(rates["plaintext"])
    for mode, values in rates.items():
        median = statistics.median(values)
        print(
            f"{mode:11s} RefreshToken x{calls}, {concurrency} in flight: median {median:,.0f} "
            f"calls/s over {rounds} rounds ({', '.join(f'{v:,.0f}' for v in values)}); "
            f"ratio to plaintext {median / base:.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.rounds, args.concurrency))
