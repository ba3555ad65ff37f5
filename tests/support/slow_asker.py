"""An asker of a Da Vinci client's SQL endpoint that sends its request one byte at a time and never finishes it:
what the endpoint's one deadline must cut off, and what its close (and Ctrl-C of `venice davinci run`) must not
wait for."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from venice_core.davinci import sql_endpoint


class SlowAsker:
    """Connected to the endpoint at `path` on entering; a thread then sends one byte every `every` seconds until the
    endpoint cuts the connection (`cut` set, `cut_after` the seconds since connecting) or `for_seconds` pass.

    The endpoint accepts connections in the order they came: once a query asked after entering is answered, the
    endpoint is reading this asker's request."""

    def __init__(self, path: Path, every: float = 0.1, for_seconds: float = 90.0) -> None:
        self.path, self.every, self.for_seconds = path, every, for_seconds
        self.cut = threading.Event()
        self.cut_after: float | None = None
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> SlowAsker:
        sock = sql_endpoint._connect(self.path, timeout=5)  # the endpoint's own way in (a long path too)
        assert sock is not None, f"no SQL endpoint at {self.path}"
        self._sock = sock
        self._thread = threading.Thread(target=self._trickle, args=(sock, time.monotonic()), daemon=True)
        self._thread.start()
        return self

    def _trickle(self, sock: socket.socket, connected: float) -> None:
        try:
            while not self._stop.wait(self.every) and time.monotonic() - connected < self.for_seconds:
                sock.send(b" ")
        except OSError:
            self.cut_after = time.monotonic() - connected
            self.cut.set()

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._sock is not None:
            self._sock.close()
