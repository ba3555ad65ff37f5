"""The region server's HTTP API on a threading stdlib server (HTTP/1.1 keep-alive; no framework on the read path).

GET  /health                       liveness and what the region hosts
GET  /metrics                      Prometheus text: ingestion records, rate and lag; read latency
GET  /schema/<store>               key and value schemas (what the thin client needs to decode)
GET  /storage/<store>/<key>        one value; key = URL-safe base64 of the serialised key; schema id in a header
POST /storage/<store>              batch get: body {"keys": [<key>...]}, reply {"values": [[id, b64] | null...]}

Bad clients are bounded (`config.ServerLimits`): a body over `server.max.request.bytes` or a batch over
`server.max.batch.keys` is answered 413 (the body is not read; the connection is closed), a malformed
Content-Length or key 400; at most `server.max.connections` connections hold a thread, those past it are answered
503 and closed at once; a connection idle or stalled mid-request for `server.idle.timeout.seconds` is closed.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from venice_core.config import ServerLimits
from venice_core.errors import VeniceError
from venice_core.metrics import LatencySummary, render, render_summary
from venice_core.server.region_server import decode_key

if TYPE_CHECKING:
    from venice_core.server.region_server import RegionServer

SCHEMA_ID_HEADER = "X-Venice-Schema-Id"
ERROR_HEADER = "X-Venice-Error"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One buffered write per response (flushed by http.server after each request) and no Nagle delay: otherwise
    # headers and body go out as two segments and keep-alive reads stall on delayed ACKs (~40 ms each).
    wbufsize = 64 * 1024
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, *_args: object) -> None:  # access logs would dominate the read path
        pass

    def setup(self) -> None:
        self.timeout = self.server.limits.idle_timeout_seconds  # idle or stalled clients end with a timeout
        super().setup()

    def _reply(
        self, status: int, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, kind: str, message: str) -> None:
        self._reply(status, json.dumps({"error": message}).encode(), headers={ERROR_HEADER: kind})

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        parts = self.path.split("/")
        region = self.server.region
        try:
            if self.path == "/health":
                self._reply(200, json.dumps(region.health()).encode())
            elif self.path == "/metrics":
                self._reply(200, self.server.metrics_text().encode(), "text/plain; version=0.0.4")
            elif len(parts) == 3 and parts[1] == "schema":
                self._reply(200, json.dumps(region.schema_document(unquote(parts[2]))).encode())
            elif len(parts) == 4 and parts[1] == "storage":
                store = unquote(parts[2])
                started = time.perf_counter()
                found = region.get(store, decode_key(parts[3]))
                self.server.observe_read(store, "get", time.perf_counter() - started)
                if found is None:
                    self._error(404, "key-not-found", f"key not found in store '{store}'")
                else:
                    self._reply(200, found[1], "application/octet-stream", {SCHEMA_ID_HEADER: str(found[0])})
            else:
                self._error(404, "no-route", f"no such endpoint {self.path}")
        except VeniceError as exc:
            self._error(exc.http_status, type(exc).__name__, str(exc))
        except (ValueError, base64.binascii.Error) as exc:
            self._error(400, "bad-request", f"malformed request: {exc}")

    def _refuse(self, status: int, kind: str, message: str) -> None:
        """Answer without reading the body, and close: what is left of the request cannot be parsed."""
        self.close_connection = True
        self._error(status, kind, message)

    def _body(self) -> bytes | None:
        """The request body within the server's limit, or None after answering why not."""
        length_header = self.headers.get("Content-Length")
        try:
            length = int(length_header or "")
        except ValueError:
            length = -1
        if length < 0:
            self._refuse(400, "bad-request", f"a batch request needs a valid Content-Length, got {length_header!r}")
            return None
        limit = self.server.limits.max_request_bytes
        if length > limit:
            self._refuse(413, "too-large", f"request body of {length} bytes is over the limit of {limit} bytes")
            return None
        body = self.rfile.read(length)  # a client that stalls mid-body times out (idle timeout)
        if len(body) < length:
            self._refuse(400, "bad-request", f"truncated body: {len(body)} of {length} bytes")
            return None
        return body

    def do_POST(self) -> None:  # noqa: N802
        parts = self.path.split("/")
        if len(parts) != 3 or parts[1] != "storage":
            self._refuse(404, "no-route", f"no such endpoint {self.path}")
            return
        body = self._body()
        if body is None:
            return
        try:
            store = unquote(parts[2])
            encoded = json.loads(body)["keys"]
            if not isinstance(encoded, list):
                raise TypeError("'keys' must be a list")
            limit = self.server.limits.max_batch_keys
            if len(encoded) > limit:
                self._error(413, "too-many-keys", f"batch of {len(encoded)} keys is over the limit of {limit} keys")
                return
            keys = [decode_key(k) for k in encoded]
            started = time.perf_counter()
            values = self.server.region.batch_get(store, keys)
            self.server.observe_read(store, "batch_get", time.perf_counter() - started)
            payload = [None if v is None else [v[0], base64.b64encode(v[1]).decode()] for v in values]
            self._reply(200, json.dumps({"values": payload}).encode())
        except VeniceError as exc:
            self._error(exc.http_status, type(exc).__name__, str(exc))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._error(400, "bad-request", f"malformed batch request: {exc}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # a burst of connects must not wait out TCP retries (socketserver has 5)

    def __init__(self, region: RegionServer, address: tuple[str, int], limits: ServerLimits) -> None:
        super().__init__(address, _Handler)
        self.region = region
        self.limits = limits
        self._connections = threading.BoundedSemaphore(limits.max_connections)
        self.latency: dict[tuple[tuple[str, str], ...], LatencySummary] = {}
        self._rates: dict[tuple[str, int, int], tuple[float, int]] = {}

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread per connection, up to the limit; past it, 503 at once rather than an unbounded thread count."""
        if not self._connections.acquire(blocking=False):
            try:
                body = json.dumps({"error": "too many connections"}).encode()
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                    + f"{ERROR_HEADER}: too-many-connections\r\nConnection: close\r\n".encode()
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._connections.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._connections.release()

    def observe_read(self, store: str, kind: str, seconds: float) -> None:
        key = (("store", store), ("kind", kind))
        summary = self.latency.get(key)
        if summary is None:
            summary = self.latency.setdefault(key, LatencySummary())
        summary.observe(seconds)

    def metrics_text(self) -> str:
        records, rates, lags, duplicates = [], [], [], []
        now = time.monotonic()
        for (store, number), hosted in list(self.region.hosted.items()):
            for partition, task in enumerate(hosted.tasks):
                labels = {
                    "store": store,
                    "version": str(number),
                    "partition": str(partition),
                    "region": self.region.region.name,
                }
                stats = task.stats
                records.append((labels, stats.records))
                duplicates.append((labels, stats.duplicates))
                previous = self._rates.get((store, number, partition))
                rate = (
                    0.0
                    if previous is None or now <= previous[0]
                    else (stats.records - previous[1]) / (now - previous[0])
                )
                self._rates[(store, number, partition)] = (now, stats.records)
                rates.append((labels, rate))
                lags.append((labels, 0 if task.completed else stats.lag))
        lines = render("venice_ingestion_records_total", "counter", "Records ingested.", records)
        lines += render(
            "venice_ingestion_duplicates_total", "counter", "Duplicate messages skipped by DIV.", duplicates
        )
        lines += render("venice_ingestion_records_per_second", "gauge", "Ingestion rate since the last scrape.", rates)
        lines += render("venice_ingestion_lag_messages", "gauge", "Messages behind the partition's end.", lags)
        lines += render_summary("venice_read_latency_seconds", "Read latency at the server.", self.latency)
        return "\n".join(lines) + "\n"


def serve(region: RegionServer, host: str, port: int, limits: ServerLimits | None = None) -> _Server:
    server = _Server(region, (host, port), limits or region.config.server_limits)
    threading.Thread(target=server.serve_forever, daemon=True, name="http").start()
    return server
