"""A TCP proxy for fault tests: a slow link (added latency each way) or a cut one.

``FaultProxy(target_port).start()`` listens on a free loopback port and forwards every
connection to ``target_port``. ``latency_s`` delays every chunk in both directions by that
much (order kept: one thread per direction); :meth:`cut` closes every connection and stops
accepting (the peer sees the link drop, as when a server or a network goes away);
:meth:`restore` accepts again on the same port. Real sockets, real clients: the services
under test do not know they are proxied.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field

from tests.integration.workers_support import free_port


@dataclass
class FaultProxy:
    target_port: int
    latency_s: float = 0.0
    port: int = field(default_factory=free_port)
    target_host: str = "127.0.0.1"
    chunks: int = 0
    """Chunks forwarded (both directions): the link was used."""
    received: int = 0
    """Chunks taken in (both directions), counted before the latency: a request is on its way."""
    _listener: socket.socket | None = None
    _sockets: set[socket.socket] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut or stopped
            if self._listener is not listener:  # cut meanwhile
                client.close()
                return
            try:
                upstream = socket.create_connection((self.target_host, self.target_port), 5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._sockets.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                self.received += 1
                if self.latency_s:
                    time.sleep(self.latency_s)
                sink.sendall(data)
                self.chunks += 1
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            with self._lock:
                self._sockets.discard(source)
                self._sockets.discard(sink)

    def cut(self) -> None:
        """Drop every connection and refuse new ones until :meth:`restore`."""
        listener, self._listener = self._listener, None
        if listener is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would leave
            # the kernel socket accepting for it.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            open_sockets = list(self._sockets)
            self._sockets.clear()
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def restore(self) -> None:
        """Accept connections again, on the same port."""
        if self._listener is None:
            self.start()

    def stop(self) -> None:
        self.cut()
