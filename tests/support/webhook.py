"""A webhook for tests: a real `http.server` on 127.0.0.1 that records the JSON bodies POSTed to it, and answers each
with a fixed status or what a test's `respond` says (an HTTP API scripted by the test, whose GETs it answers too)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (path with its query, request headers, JSON body or None for a GET) -> (status, JSON payload to answer with, or
# None for an empty body)
Respond = Callable[[str, Mapping[str, str], Any], tuple[int, Any]]


class Webhook:
    """Records each JSON body POSTed to it (in `events`) and answers `status`, or what `respond` returns. Close it
    when done."""

    def __init__(self, status: int = 204, respond: Respond | None = None) -> None:
        received: list[Any] = []
        self.events = received
        answer: Respond = respond or (lambda _path, _headers, _body: (status, None))

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                received.append(body)
                self._answer(body)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(None)

            def _answer(self, body: Any) -> None:
                code, payload = answer(self.path, self.headers, body)
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(code)
                if payload is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/events"
        # Polling every 50 ms, not 0.5 s: `close` (shutdown) waits for the loop's next look.
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True, name="test-webhook").start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
