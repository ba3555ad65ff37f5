"""A webhook for tests: a real `http.server` on 127.0.0.1 that records the JSON bodies POSTed to it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Webhook:
    """Records each JSON body POSTed to it (in `events`) and answers `status`. Close it when done."""

    def __init__(self, status: int = 204) -> None:
        received: list[Any] = []
        self.events = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/events"
        threading.Thread(target=self.server.serve_forever, daemon=True, name="test-webhook").start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
