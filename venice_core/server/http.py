"""The region server's HTTP API: one event loop (uvloop) in a thread of its own, requests parsed by httptools
(llhttp, the parser of Node.js and uvicorn), HTTP/1.1 keep-alive. Reads are answered on the loop: a RocksDB get
takes microseconds, less than a hand-off to a worker thread would.

GET  /health                       liveness and what the region hosts
GET  /metrics                      Prometheus text: ingestion records, rate and lag; nearline writes; read latency
GET  /schema/<store>               key and value schemas (what the thin client needs to decode)
GET  /dictionary/<store>/<version> a version's compression dictionary (raw bytes; 404 `no-dictionary` if it has
                                   none), what a Da Vinci client decompresses with
GET  /storage/<store>/<key>        one value; key = URL-safe base64 of the serialised key; schema id in a header
POST /storage/<store>              batch get: binary (`protocol.batch_get`, Content-Type BATCH_CONTENT_TYPE), what
                                   the thin client sends; or JSON, for people with curl: body {"keys": [<key>...]},
                                   reply {"values": [[id, b64] | null...]}
                                   A GET or binary batch get saying `X-Venice-Supported-Compression-Strategy: 3`
                                   (the routing client) is answered a ZSTD_WITH_DICT version's values as stored,
                                   compressed, with `X-Venice-Compression-Strategy: 3` and the version read in
                                   `X-Venice-Version`: the client decompresses them with that version's dictionary.
                                   Any other reader gets them decompressed.
POST /sync                         sync with the metadata store now, not at the next interval (202): a swap asks
                                   every instance of its region, so it serves the new version at once
GET  /routing/<store>              a replicated region's routing table (`RoutedBackend.routing_table`): the version,
                                   its partition count and each partition's ready replicas ("host:port"); 404
                                   `no-route` from a backend without one (a single instance: the client reads from it)

A backend that knows its serving version (`RoutedBackend.serving_version`) has every storage answer (200, and 404
`key-not-found`) carry it in `X-Venice-Version`: a routing client refreshes its table when it changes. An instance
asked for a partition it holds no ready replica of raises a VeniceError named `PartitionNotHosted` whose http_status
is 503: answered 503 with that error kind, like any VeniceError.

Bad clients are bounded (`config.ServerLimits`): a body over `server.max.request.bytes` or a batch over
`server.max.batch.keys` is answered 413 (a body too large is not read; the connection is closed), a malformed
Content-Length or key 400; at most `server.max.connections` connections are open, those past it are answered 503
and closed at once; a connection idle or stalled mid-request for `server.idle.timeout.seconds` is closed.

On a secured platform (`security.enabled`) every connection is TLS with a client certificate of the platform's CA
(`tls_protocol`), the caller's principal its certificate's name, and each request is asked of `authorize` first: a
refusal is answered 403 `forbidden`, naming the principal and what it may not do, and logged.

Why not the stdlib's threading server (the first version): its per-request header parsing and a thread per
connection cost ~0.5 ms per read and put a batch get of 100 keys at 2-3 ms p50 (target: p99 under 2 ms).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import re
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, cast
from urllib.parse import unquote

import httptools
import uvloop

from venice_core.config import ServerLimits
from venice_core.errors import VeniceError
from venice_core.protocol import batch_get, compression
from venice_core.protocol.compression import CompressionStrategy
from venice_core.security.tls import principal_of
from venice_core.server.tls_protocol import Pending, secured
from venice_core.utils.metrics import LatencySummary, PartitionIngestion, render, render_summary

SCHEMA_ID_HEADER = "X-Venice-Schema-Id"
ERROR_HEADER = "X-Venice-Error"
VERSION_HEADER = "X-Venice-Version"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Content Too Large", 500: "Internal Server Error"}
_REASONS |= {202: "Accepted", 403: "Forbidden", 503: "Service Unavailable"}
_BATCH_CONTENT_TYPE = batch_get.BATCH_CONTENT_TYPE.encode()
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*([^\r\n]*)", re.IGNORECASE)
_SUPPORTED_COMPRESSION = compression.SUPPORTED_HEADER.lower().encode()
_WITH_DICT = str(int(CompressionStrategy.ZSTD_WITH_DICT)).encode()
log = logging.getLogger(__name__)


def _response(
    status: int, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
) -> bytes:
    head = f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: {content_type}\r\n"
    head += f"Content-Length: {len(body)}\r\n"
    for name, value in (headers or {}).items():
        head += f"{name}: {value}\r\n"
    return head.encode() + b"\r\n" + body


def _error(status: int, kind: str, message: str, close: bool = False, headers: dict[str, str] | None = None) -> bytes:
    headers = {ERROR_HEADER: kind, **({"Connection": "close"} if close else {}), **(headers or {})}
    return _response(status, json.dumps({"error": message}).encode(), headers=headers)


def decode_key(text: str) -> bytes:
    """URL-safe base64, strictly: a character outside the alphabet is an error (binascii.Error, a ValueError), not
    silently dropped (which would read another key)."""
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)


class _Connection(asyncio.Protocol):
    """One client connection: parse requests as bytes arrive, answer each in order."""

    def __init__(self, server: ReadServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.counted = False
        self.url = b""
        self.body: list[bytes] = []
        self.content_length: bytes | None = None
        self.content_type: bytes | None = None
        self.compressed_ok = False  # the reader decompresses ZSTD_WITH_DICT values itself
        self.refused = False  # answered and closing: the rest of the request is not parsed
        self.received = b""  # the start of the request, for naming a malformed Content-Length
        self.idle: asyncio.TimerHandle | None = None
        self.principal: str | None = None  # the caller's certificate's name, over TLS

    # connection life
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream server's: asyncio's signature names the base
        if self.server.open_connections >= self.server.limits.max_connections:
            self.refused = True  # what the caller sent is not read (over TLS, it may have come with the handshake)
            self.transport.write(_error(503, "too-many-connections", "too many connections", close=True))
            transport.close()
            return
        self.counted = True
        if self.server.tls is not None:
            self.principal = principal_of(transport.get_extra_info("peercert"))
        self.server.open_connections += 1
        self.server.connections.add(self)
        self._arm_idle_timer()

    def connection_lost(self, _exc: Exception | None) -> None:
        if self.counted:
            self.server.open_connections -= 1
            self.server.connections.discard(self)
            self.counted = False
        if self.idle is not None:
            self.idle.cancel()

    def _arm_idle_timer(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
        loop = self.server.loop
        self.idle = loop.call_later(self.server.limits.idle_timeout_seconds, self._close)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _refuse(self, response: bytes) -> None:
        """Answer and close: what is left of the request cannot be parsed."""
        self.refused = True
        assert self.transport is not None
        self.transport.write(response)
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        self._arm_idle_timer()
        if len(self.received) < 8192:
            self.received += data[:8192]
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(_error(400, "bad-request", "protocol upgrades are not served", close=True))
        except httptools.HttpParserError as exc:
            if self.refused:
                return
            match = _CONTENT_LENGTH.search(self.received)
            if match is not None and not match.group(1).strip().isdigit():
                given = match.group(1).strip().decode(errors="replace")
                message = f"a batch request needs a valid Content-Length, got {given!r}"
            else:
                message = f"malformed HTTP request: {exc}"
            self._refuse(_error(400, "bad-request", message, close=True))

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.url, self.body, self.content_length, self.content_type = b"", [], None, None
        self.compressed_ok = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length":
            self.content_length = value
        elif name == b"content-type":
            self.content_type = value
        elif name == _SUPPORTED_COMPRESSION:
            self.compressed_ok = _WITH_DICT in value.replace(b" ", b"").split(b",")

    def on_headers_complete(self) -> None:
        if self.parser.get_method() != b"POST":
            return
        limit = self.server.limits.max_request_bytes
        length = int(self.content_length) if self.content_length and self.content_length.isdigit() else -1
        if length < 0:
            given = None if self.content_length is None else self.content_length.decode(errors="replace")
            message = f"a batch request needs a valid Content-Length, got {given!r}"
            self._refuse(_error(400, "bad-request", message, close=True))
        elif length > limit:
            message = f"request body of {length} bytes is over the limit of {limit} bytes"
            self._refuse(_error(413, "too-large", message, close=True))
        if self.refused:
            raise _Refused  # stop the parser: the body is not read

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.refused or self.transport is None:
            return
        self.received = b""
        method = self.parser.get_method()
        path = self.url.decode("latin-1").split("?", 1)[0]
        refusal = self.server.authorize(self.principal, path) if self.server.authorize is not None else None
        if refusal is not None:
            log.warning("refused %s: %s %s (%s)", self.principal, method.decode(), path, refusal)
            response = _error(403, "forbidden", refusal)
        elif method == b"GET":
            response = self.server.handle_get(path, self.compressed_ok)
        elif method == b"POST":
            binary = self.content_type == _BATCH_CONTENT_TYPE
            response = self.server.handle_post(path, b"".join(self.body), binary, self.compressed_ok)
        else:
            response = _error(404, "no-route", f"no such endpoint {method.decode()} {path}")
        self.transport.write(response)
        if not self.parser.should_keep_alive():
            self.transport.close()


# A request's authorisation: its caller's principal (None without TLS) and path -> None if allowed, else why not.
Authorize = Callable[[str | None, str], str | None]


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a request that was already answered."""


class ReadBackend(Protocol):
    """What the HTTP front serves: a region server's reads, its health, and its ingestion figures for `/metrics`."""

    def health(self) -> dict[str, Any]: ...

    def schema_document(self, store: str) -> dict[str, Any]: ...

    def dictionary(self, store: str, number: int) -> bytes | None: ...

    def get(self, store: str, key: bytes) -> tuple[int, bytes] | None: ...

    def batch_get(self, store: str, keys: list[bytes]) -> list[tuple[int, bytes] | None]: ...

    def batch_get_records(self, store: str, keys: list[bytes]) -> list[bytes | None]: ...

    def ingestion(self) -> list[PartitionIngestion]: ...

    def request_sync(self) -> None: ...


# A backend's reads for a reader that decompresses ZSTD_WITH_DICT itself (optional, as `RoutedBackend`'s methods): the
# version read, the compression of what is returned, and the record (schema id, value) or records (schema id + value).
StoredGet = Callable[[str, bytes], tuple[int, CompressionStrategy, tuple[int, bytes] | None]]
StoredBatchGet = Callable[[str, list[bytes]], tuple[int, CompressionStrategy, list[bytes | None]]]


class RoutedBackend(ReadBackend, Protocol):
    """A backend of a replicated region (one instance of it): what a routing client needs besides the reads. The HTTP
    front uses each method only if the backend has it (an older backend serves as before)."""

    def routing_table(self, store: str) -> dict[str, Any]:
        """{"store", "region", "version", "partition_count", "replicas": [["host:port", ...] per partition]}: each
        partition's ready replicas, an empty list for one with none; StoreNotFound / NoCurrentVersion as the reads."""
        ...

    def serving_version(self, store: str) -> int:
        """The version this instance's reads of the store answer from (StoreNotFound / NoCurrentVersion as reads)."""
        ...


class ReadServer:
    """The HTTP front of a region server (any `ReadBackend`), on an event loop in a daemon thread."""

    def __init__(
        self,
        region: ReadBackend,
        host: str,
        port: int,
        limits: ServerLimits,
        tls: ssl.SSLContext | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        self.region = region
        self.limits = limits
        self.tls, self.authorize = tls, authorize
        # A replicated region's backend (`RoutedBackend`) answers /routing and names its version in each read.
        self._routing_table: Callable[[str], dict[str, Any]] | None = getattr(region, "routing_table", None)
        self._serving_version: Callable[[str], int] | None = getattr(region, "serving_version", None)
        # A region server's reads that leave ZSTD_WITH_DICT values compressed, for readers that say they can decompress.
        self._get_stored: StoredGet | None = getattr(region, "get_stored", None)
        self._batch_get_stored: StoredBatchGet | None = getattr(region, "batch_get_stored", None)
        self.open_connections = 0
        self.connections: set[_Connection] = set()
        self.latency: dict[tuple[tuple[str, str], ...], LatencySummary] = {}
        self._rates: dict[tuple[str, int, int], tuple[float, int]] = {}
        self.loop = uvloop.new_event_loop()
        # backlog: a burst of connects must not wait out TCP retries
        connection: Callable[[], asyncio.Protocol] = functools.partial(_Connection, self)
        self.handshaking = Pending(limits.max_connections)
        if tls is not None:  # behind TLS, each caller known by its certificate
            connection = secured(tls, connection, self.loop, self.handshaking)
        self._server = self.loop.run_until_complete(
            self.loop.create_server(connection, host, port, backlog=1024, reuse_address=True)
        )
        # uvloop's Server has asyncio.Server's `sockets` (create_server is typed as returning an AbstractServer).
        listening = cast(asyncio.Server, self._server).sockets
        self.server_address: tuple[str, int] = listening[0].getsockname()[:2]
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="http")
        self._thread.start()

    def shutdown(self) -> None:
        """Stop listening, close every connection, stop the loop (idempotent)."""
        if self.loop.is_closed():
            return

        async def close() -> None:
            self._server.close()
            self.handshaking.close_all()
            for connection in list(self.connections):
                connection._close()
            await self._server.wait_closed()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
        self.loop.close()

    def server_close(self) -> None:
        self.shutdown()

    # requests
    def handle_get(self, path: str, compressed_ok: bool = False) -> bytes:
        parts = path.split("/")
        region = self.region
        try:
            if path == "/health":
                return _response(200, json.dumps(region.health()).encode())
            if path == "/metrics":
                return _response(200, self.metrics_text().encode(), "text/plain; version=0.0.4")
            if len(parts) == 3 and parts[1] == "schema":
                return _response(200, json.dumps(region.schema_document(unquote(parts[2]))).encode())
            if len(parts) == 4 and parts[1] == "dictionary":
                store, number = unquote(parts[2]), int(parts[3])
                dictionary = region.dictionary(store, number)
                if dictionary is None:
                    return _error(404, "no-dictionary", f"version {number} of store '{store}' has no dictionary")
                return _response(200, dictionary, "application/octet-stream")
            if len(parts) == 4 and parts[1] == "storage":
                store = unquote(parts[2])
                started = time.perf_counter()
                if compressed_ok and self._get_stored is not None:
                    number, strategy, found = self._get_stored(store, decode_key(parts[3]))
                    version: dict[str, str] | None = _stored_headers(number, strategy)
                else:
                    found = region.get(store, decode_key(parts[3]))
                    version = None
                self.observe_read(store, "get", time.perf_counter() - started)
                version = version or self._version_header(store)
                if found is None:
                    return _error(404, "key-not-found", f"key not found in store '{store}'", headers=version)
                headers = {SCHEMA_ID_HEADER: str(found[0]), **(version or {})}
                return _response(200, found[1], "application/octet-stream", headers)
            if len(parts) == 3 and parts[1] == "routing" and self._routing_table is not None:
                return _response(200, json.dumps(self._routing_table(unquote(parts[2]))).encode())
            return _error(404, "no-route", f"no such endpoint {path}")
        except VeniceError as exc:
            return _error(exc.http_status, type(exc).__name__, str(exc))
        except ValueError as exc:  # binascii.Error included
            return _error(400, "bad-request", f"malformed request: {exc}")

    def handle_post(self, path: str, body: bytes, binary: bool, compressed_ok: bool = False) -> bytes:
        if path == "/sync":
            self.region.request_sync()
            return _response(202, b'{"sync": "requested"}')
        parts = path.split("/")
        if len(parts) != 3 or parts[1] != "storage":
            return _error(404, "no-route", f"no such endpoint {path}")
        store = unquote(parts[2])
        if binary:
            return self._batch_get_binary(store, body, compressed_ok)
        try:
            encoded = json.loads(body)["keys"]
            if not isinstance(encoded, list):
                raise TypeError("'keys' must be a list")
            limit = self.limits.max_batch_keys
            if len(encoded) > limit:
                return _error(413, "too-many-keys", f"batch of {len(encoded)} keys is over the limit of {limit} keys")
            keys = [decode_key(k) for k in encoded]
            started = time.perf_counter()
            values = self.region.batch_get(store, keys)
            self.observe_read(store, "batch_get", time.perf_counter() - started)
            b64 = base64.b64encode
            payload = [None if v is None else [v[0], b64(v[1]).decode()] for v in values]
            return _response(200, json.dumps({"values": payload}).encode(), headers=self._version_header(store))
        except VeniceError as exc:
            return _error(exc.http_status, type(exc).__name__, str(exc))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return _error(400, "bad-request", f"malformed batch request: {exc}")

    def _batch_get_binary(self, store: str, body: bytes, compressed_ok: bool = False) -> bytes:
        limit = self.limits.max_batch_keys
        try:
            keys = batch_get.decode_keys(body, limit)
            started = time.perf_counter()
            if compressed_ok and self._batch_get_stored is not None:
                number, strategy, records = self._batch_get_stored(store, keys)
                headers: dict[str, str] | None = _stored_headers(number, strategy)
            else:
                records = self.region.batch_get_records(store, keys)
                headers = None
            self.observe_read(store, "batch_get", time.perf_counter() - started)
            headers = headers or self._version_header(store)
            return _response(200, batch_get.encode_records(records), batch_get.BATCH_CONTENT_TYPE, headers)
        except OverflowError:
            return _error(413, "too-many-keys", f"batch of more than {limit} keys is over the limit of {limit} keys")
        except VeniceError as exc:
            return _error(exc.http_status, type(exc).__name__, str(exc))
        except ValueError as exc:
            return _error(400, "bad-request", f"malformed batch request: {exc}")

    def _version_header(self, store: str) -> dict[str, str] | None:
        """`X-Venice-Version` of a backend that names its serving version (None: one that does not)."""
        if self._serving_version is None:
            return None
        return {VERSION_HEADER: str(self._serving_version(store))}

    # metrics
    def observe_read(self, store: str, kind: str, seconds: float) -> None:
        key = (("store", store), ("kind", kind))
        summary = self.latency.get(key)
        if summary is None:
            summary = self.latency.setdefault(key, LatencySummary())
        summary.observe(seconds)

    def metrics_text(self) -> str:
        Samples = list[tuple[dict[str, str], float]]
        records: Samples = []
        rates: Samples = []
        lags: Samples = []
        duplicates: Samples = []
        nearline: Samples = []
        superseded: Samples = []
        now = time.monotonic()
        for p in self.region.ingestion():
            labels = p.labels()
            records.append((labels, p.records))
            duplicates.append((labels, p.duplicates))
            lags.append((labels, p.lag))
            key = (p.store, p.version, p.partition)
            previous = self._rates.get(key)
            rate = 0.0 if previous is None or now <= previous[0] else (p.records - previous[1]) / (now - previous[0])
            self._rates[key] = (now, p.records)
            rates.append((labels, rate))
            if p.nearline_applied is not None:
                nearline.append((labels, p.nearline_applied))
                superseded.append((labels, p.nearline_superseded or 0))
        lines = render("venice_ingestion_records_total", "counter", "Records ingested.", records)
        lines += render(
            "venice_ingestion_duplicates_total", "counter", "Duplicate messages skipped by DIV.", duplicates
        )
        lines += render("venice_ingestion_records_per_second", "gauge", "Ingestion rate since the last scrape.", rates)
        lines += render("venice_ingestion_lag_messages", "gauge", "Messages behind the partition's end.", lags)
        lines += render(
            "venice_nearline_writes_applied_total", "counter", "Nearline writes applied (they won).", nearline
        )
        lines += render(
            "venice_nearline_writes_superseded_total",
            "counter",
            "Nearline writes that lost to a later write of the key.",
            superseded,
        )
        lines += render_summary("venice_read_latency_seconds", "Read latency at the server.", self.latency)
        return "\n".join(lines) + "\n"


def _stored_headers(number: int, strategy: CompressionStrategy) -> dict[str, str]:
    """A stored read's headers: the version read (a compressed value's dictionary is that version's) and, when the
    values are still compressed, their compression."""
    if strategy is CompressionStrategy.NO_OP:
        return {VERSION_HEADER: str(number)}
    return {VERSION_HEADER: str(number), compression.HEADER: str(int(strategy))}


def serve(
    region: ReadBackend,
    host: str,
    port: int,
    limits: ServerLimits,
    tls: ssl.SSLContext | None = None,
    authorize: Authorize | None = None,
) -> ReadServer:
    return ReadServer(region, host, port, limits, tls, authorize)
