"""A tiny OpenID Connect provider played by the tests: keys, a JWKS endpoint, signing."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

AUDIENCE = "kishpa-test"


@dataclass
class Provider:
    """A tiny identity provider: keys, a JWKS endpoint, and token signing."""

    issuer: str = ""
    keys: dict[str, Any] = field(default_factory=dict)
    published: list[str] = field(default_factory=list)
    fetches: int = 0

    def add_rsa(self, kid: str) -> None:
        self.keys[kid] = ("RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def add_ec(self, kid: str) -> None:
        self.keys[kid] = ("ES256", ec.generate_private_key(ec.SECP256R1()))

    def jwks(self) -> dict[str, Any]:
        out = []
        for kid in self.published:
            alg, private = self.keys[kid]
            algo = jwt.algorithms.RSAAlgorithm if alg == "RS256" else jwt.algorithms.ECAlgorithm
            jwk = algo.to_jwk(private.public_key(), as_dict=True)
            out.append({**jwk, "kid": kid, "use": "sig", "alg": alg})
        return {"keys": out}

    def token(self, kid: str, **overrides: Any) -> str:
        alg, private = self.keys[kid]
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": AUDIENCE,
            "sub": "user-1",
            "name": "Dana Doe",
            "iat": now,
            "exp": now + 300,
            **overrides,
        }
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, private, algorithm=alg, headers={"kid": kid})


@pytest.fixture
def provider() -> Iterator[Provider]:
    prov = Provider()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            prov.fetches += 1
            body = json.dumps(prov.jwks()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    prov.issuer = f"http://127.0.0.1:{httpd.server_port}/realm-{uuid.uuid4().hex[:6]}"
    prov.jwks_url = f"http://127.0.0.1:{httpd.server_port}/jwks.json"  # type: ignore[attr-defined]
    prov.add_rsa("rsa-1")
    prov.add_ec("ec-1")
    prov.published = ["rsa-1", "ec-1"]
    try:
        yield prov
    finally:
        httpd.shutdown()
        httpd.server_close()
