"""The edge's delivery of the web client: encodings by Accept-Encoding, cache lifetimes by
name, no source maps (services/edge/assets.py, through the edge's ASGI app)."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path
from typing import Any

import pytest

from services.edge.app import Edge, EdgeConfig
from services.edge.assets import accepted, cache_control, preferred

SCRIPT = b"console.log('kishpa');\n" * 40
HASHED = "app-0123456789ab.js"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "index.html").write_text("<!doctype html><title>Kishpa</title>" + " " * 400)
    (tmp_path / HASHED).write_bytes(SCRIPT)
    (tmp_path / f"{HASHED}.br").write_bytes(b"the brotli copy")  # served as is, never decoded
    (tmp_path / f"{HASHED}.gz").write_bytes(gzip.compress(SCRIPT))
    (tmp_path / "app.js.map").write_text("{}")
    (tmp_path / "favicon.ico").write_bytes(b"\x00\x00\x01\x00" + b"\x00" * 300)
    return tmp_path


def get(root: Path, path: str, accept: str = "") -> tuple[int, dict[str, str], bytes]:
    """One GET through the edge's ASGI app."""
    edge = Edge(EdgeConfig(upstreams={}, web_root=root))
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"accept-encoding", accept.encode())] if accept else []
    scope = {"type": "http", "method": "GET", "path": path, "headers": headers}
    asyncio.run(edge(scope, receive, send))
    start, body = sent[0], sent[1]
    return (
        start["status"],
        {k.decode(): v.decode() for k, v in start["headers"]},
        body["body"],
    )


def test_brotli_when_the_browser_accepts_it(root: Path) -> None:
    status, headers, body = get(root, f"/{HASHED}", "gzip, deflate, br, zstd")
    assert status == 200
    assert headers["content-encoding"] == "br"
    assert body == b"the brotli copy"
    assert headers["vary"] == "accept-encoding"
    assert headers["content-length"] == str(len(b"the brotli copy"))


def test_gzip_when_brotli_is_not_accepted(root: Path) -> None:
    _, headers, body = get(root, f"/{HASHED}", "gzip")
    assert headers["content-encoding"] == "gzip"
    assert gzip.decompress(body) == SCRIPT
    _, headers, body = get(root, f"/{HASHED}", "br;q=0, gzip;q=0.5")
    assert headers["content-encoding"] == "gzip"


def test_identity_when_nothing_is_accepted(root: Path) -> None:
    _, headers, body = get(root, f"/{HASHED}")
    assert "content-encoding" not in headers
    assert body == SCRIPT


def test_a_text_file_without_a_precompressed_copy_is_gzipped(root: Path) -> None:
    _, headers, body = get(root, "/", "gzip")
    assert headers["content-encoding"] == "gzip"
    assert gzip.decompress(body).startswith(b"<!doctype html>")
    assert headers["content-type"] == "text/html; charset=utf-8"


def test_cache_lifetimes() -> None:
    assert cache_control("index.html") == "no-cache"
    assert cache_control("app-0123456789ab.js") == "public, max-age=31536000, immutable"
    assert cache_control("app-0123456789ab.css") == "public, max-age=31536000, immutable"
    assert cache_control("favicon.ico") == "public, max-age=3600"
    assert cache_control("app.js") == "public, max-age=3600"


def test_index_is_revalidated_and_hashed_assets_kept(root: Path) -> None:
    _, headers, _ = get(root, "/")
    assert headers["cache-control"] == "no-cache"
    _, headers, _ = get(root, f"/{HASHED}")
    assert headers["cache-control"] == "public, max-age=31536000, immutable"


@pytest.mark.parametrize("path", ["/app.js.map", f"/{HASHED}.br", "/../etc/passwd", "/nope.js"])
def test_maps_copies_and_strays_are_not_served(root: Path, path: str) -> None:
    status, _, _ = get(root, path, "gzip, br")
    assert status == 404


def test_the_favicon_is_served(root: Path) -> None:
    status, headers, _ = get(root, "/favicon.ico")
    assert status == 200
    assert headers["content-type"] in ("image/vnd.microsoft.icon", "image/x-icon")


def test_accept_encoding_parsing() -> None:
    assert accepted("gzip, br;q=0.8, *;q=0") == {"gzip": 1.0, "br": 0.8, "*": 0.0}
    assert preferred("gzip, br", ("br", "gzip")) == "br"
    assert preferred("gzip;q=1, br;q=0.5", ("br", "gzip")) == "gzip"
    assert preferred("br;q=0", ("br", "gzip")) is None
    assert preferred("*", ("br", "gzip")) == "br"
    assert preferred("identity", ("br", "gzip")) is None
    assert preferred("gzip;q=nonsense", ("gzip",)) is None
