"""How the edge serves the web client's files: which file, which encoding, how long to cache.

``web/build.mjs`` gives the script and the style sheet content-hashed names
(``app-3f2a9c0b1d4e.js``) and writes a ``.br`` and a ``.gz`` beside every text file. So:

- a hashed name never changes content: browsers keep it a year (``immutable``);
  ``index.html`` names the current ones and is revalidated on every load (``no-cache``);
- the encoding follows the request's ``Accept-Encoding`` (brotli, then gzip, by the
  client's q-values); a text file without a precompressed copy is gzipped once and kept;
- source maps are never served (they stay outside ``dist/``; a stray one is a 404).

Pure except :meth:`Assets.load`, which reads files (run it off the event loop).
"""

from __future__ import annotations

import gzip
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path

HASHED_NAME = re.compile(r"-[0-9a-f]{12}\.[a-z0-9]+$")
"""A content-hashed file name (the build's ``name-<12 hex>.ext``)."""
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
SHORT = "public, max-age=3600"
"""Unhashed files other than HTML (the favicons): an hour."""
COMPRESSIBLE = frozenset(
    {"text/html", "text/css", "text/javascript", "application/javascript", "application/json"}
    | {"image/svg+xml", "image/vnd.microsoft.icon", "image/x-icon"}
)
MIN_COMPRESS_BYTES = 256
"""Smaller files go as they are (the encoding's own overhead eats the gain)."""
ENCODINGS = (("br", ".br"), ("gzip", ".gz"))
"""Encodings the edge can send, best first, with the suffix of their precompressed copy."""
NEVER_SERVED = (".map", ".br", ".gz")


@dataclass(frozen=True, slots=True)
class Asset:
    """One response: the bytes to send and its headers."""

    body: bytes
    content_type: str
    cache_control: str
    encoding: str | None
    vary: bool


def cache_control(name: str) -> str:
    """How long a browser may keep the file ``name`` without asking again."""
    if name.endswith(".html"):
        return REVALIDATE
    if HASHED_NAME.search(name):
        return IMMUTABLE
    return SHORT


def accepted(accept_encoding: str) -> dict[str, float]:
    """The encodings a request accepts, with their q-values (``q=0`` refuses; RFC 9110 12.5.3)."""
    found: dict[str, float] = {}
    for part in accept_encoding.split(","):
        name, _, params = part.strip().partition(";")
        name = name.strip().lower()
        if not name:
            continue
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        found[name] = q
    return found


def preferred(accept_encoding: str, available: tuple[str, ...]) -> str | None:
    """The best of ``available`` (in order of preference) the request accepts, or None."""
    wanted = accepted(accept_encoding)
    best: tuple[float, str] | None = None
    for name in available:
        q = wanted.get(name, wanted.get("*", 0.0))
        if q > 0 and (best is None or q > best[0]):
            best = (q, name)
    return best[1] if best else None


def content_type(name: str) -> str:
    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if kind.startswith("text/") or kind in ("application/javascript", "image/svg+xml"):
        kind += "; charset=utf-8"
    return kind


class Assets:
    """The files under ``root``, with the gzip copies it had to make kept in memory."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._gzipped: dict[tuple[Path, int], bytes] = {}

    def find(self, path: str) -> Path | None:
        """The file a request path names, or None (outside the root, missing, never served)."""
        relative = path.lstrip("/") or "index.html"
        if relative.endswith(NEVER_SERVED):
            return None
        target = (self.root / relative).resolve()
        if not target.is_relative_to(self.root) or not target.is_file():
            return None
        return target

    def load(self, target: Path, accept_encoding: str) -> Asset:
        """The response for ``target`` in the best encoding the request accepts."""
        kind = content_type(target.name)
        cache = cache_control(target.name)
        if kind.split(";")[0] not in COMPRESSIBLE:
            return Asset(target.read_bytes(), kind, cache, None, vary=False)
        ready = tuple(
            e for e, suffix in ENCODINGS if target.with_name(target.name + suffix).is_file()
        )
        choice = preferred(accept_encoding, (*ready, *(() if "gzip" in ready else ("gzip",))))
        if choice is not None and choice in ready:
            suffix = dict(ENCODINGS)[choice]
            return Asset(
                target.with_name(target.name + suffix).read_bytes(), kind, cache, choice, True
            )
        body = target.read_bytes()
        if choice == "gzip" and len(body) >= MIN_COMPRESS_BYTES:
            key = (target, target.stat().st_mtime_ns)
            if key not in self._gzipped:
                self._gzipped[key] = gzip.compress(body, compresslevel=9, mtime=0)
            return Asset(self._gzipped[key], kind, cache, "gzip", vary=True)
        return Asset(body, kind, cache, None, vary=True)
