"""Every table's event stream as it was written, kept in the test.

Redis keeps only live play: a round's events leave the stream once the next round is under
way (workers/settle.lua). A test that checks a whole table after the fact (what a page
logged, the settlements a summary showed) reads the entries here; a thread takes in what each
stream gained every ``poll_s``, long before anything is trimmed.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import redis

from shared import keys


class StreamRecorder:
    """The entries of every ``kishpa:table:{id}:events`` stream of one Redis, as written."""

    def __init__(self, redis_url: str, poll_s: float = 0.05) -> None:
        self.client = redis.Redis.from_url(redis_url)
        self.poll_s = poll_s
        self._entries: dict[str, list[tuple[bytes, dict[bytes, Any]]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stream-recorder", daemon=True)

    def start(self) -> StreamRecorder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(redis.RedisError):
                self.look()
            self._stop.wait(self.poll_s)

    def look(self) -> None:
        """Take in what every stream gained since the last look."""
        for key in self.client.scan_iter(match=keys.events("*")):
            name = key.decode()
            table = name.split("{", 1)[1].rsplit("}", 1)[0]
            with self._lock:
                seen = self._entries.setdefault(table, [])
                start = b"(" + seen[-1][0] if seen else b"-"
                seen.extend(self.client.xrange(name, min=start))  # type: ignore[arg-type]

    def entries(self, table_id: str) -> list[tuple[bytes, dict[bytes, Any]]]:
        """The table's entries in stream order, trimmed ones included."""
        self.look()
        with self._lock:
            return list(self._entries.get(table_id, []))
