"""The thin read client: serialise the key with the store's key schema, ask a region server, decode the value with
the schema id it carries. One keep-alive connection per client (and thread), HTTP/1.1 over a plain socket with
httptools parsing the responses: http.client's header parsing alone cost a tenth of a millisecond per read."""

from __future__ import annotations

import base64
import json
import socket
import threading
from typing import Any

import httptools

from venice_core.errors import ComponentError, NoCurrentVersion, StoreNotFound, VeniceError
from venice_core.protocol import batch_get, serde

SCHEMA_ID_HEADER = "X-Venice-Schema-Id"
ERROR_HEADER = "X-Venice-Error"
# A batch's values of one schema decode in one fastavro reader call from this many on (100 values: 206 -> 131 us);
# fewer, one call each (the reader's set-up costs more than it saves).
DECODE_MANY_FROM = 16


class _Response:
    """httptools callbacks: collects one response."""

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.body: list[bytes] = []
        self.complete = False
        self.keep_alive = False
        self.parser = httptools.HttpResponseParser(self)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1")] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()  # valid only until the parser moves on


class _Connection:
    """One keep-alive HTTP/1.1 connection to a region server."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host = host
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.closed = False

    def request(
        self, method: str, path: str, body: bytes | None, content_type: str
    ) -> tuple[int, dict[str, str], bytes]:
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n"
        if body is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        self.sock.sendall(head.encode() + b"\r\n" + (body or b""))
        response = _Response()
        while not response.complete:
            data = self.sock.recv(262144)
            if not data:
                raise ConnectionError("connection closed by the server")
            response.parser.feed_data(data)
        if not response.keep_alive:
            self.close()
        return response.parser.get_status_code(), response.headers, b"".join(response.body)

    def close(self) -> None:
        self.closed = True
        self.sock.close()


class ReadClient:
    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._local = threading.local()
        self._schemas: dict[str, tuple[Any, dict[int, Any]]] = {}
        self._value_json: dict[str, dict[int, str]] = {}  # the value schemas as JSON text (`deserialize_many`)

    def _request(
        self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"
    ) -> tuple[int, dict[str, str], bytes]:
        for attempt in (1, 2):  # a keep-alive connection the server closed is retried once on a new one
            conn = None
            try:
                conn = getattr(self._local, "conn", None)
                if conn is None or conn.closed:
                    conn = self._local.conn = _Connection(self.host, self.port, self.timeout)
                return conn.request(method, path, body, content_type)
            except (OSError, httptools.HttpParserError) as exc:  # ConnectionError and timeouts are OSErrors
                if conn is not None:
                    conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise ComponentError(f"region server {self.host}:{self.port} is unreachable: {exc}") from None
        raise AssertionError("unreachable")

    def _raise(self, store: str, status: int, body: bytes, error_kind: str = "") -> None:
        try:
            message = json.loads(body)["error"]
        except (ValueError, KeyError):
            message = body.decode(errors="replace")
        if status == 404 and "unknown store" in message:
            raise StoreNotFound(store)
        if status == 404 and error_kind == NoCurrentVersion.__name__:
            raise NoCurrentVersion(message)
        raise VeniceError(f"region server answered {status}: {message}")

    def _store_schemas(self, store: str, refresh: bool = False) -> tuple[Any, dict[int, Any]]:
        if refresh or store not in self._schemas:
            status, _, body = self._request("GET", f"/schema/{store}")
            if status != 200:
                self._raise(store, status, body)
            doc = json.loads(body)
            self._value_json[store] = {int(i): json.dumps(s) for i, s in doc["value_schemas"].items()}
            self._schemas[store] = (
                serde.parse(doc["key_schema"]),
                {int(i): serde.parse(s) for i, s in doc["value_schemas"].items()},
            )
        return self._schemas[store]

    def serialize_key(self, store: str, key: Any) -> bytes:
        key_schema, _ = self._store_schemas(store)
        try:
            return serde.serialize(key_schema, key)
        except (ValueError, TypeError, AttributeError) as exc:
            raise VeniceError(f"key {key!r} does not match the key schema of '{store}': {exc}") from None

    def _decode(self, store: str, schema_id: int, data: bytes) -> Any:
        _, values = self._store_schemas(store)
        if schema_id not in values:
            _, values = self._store_schemas(store, refresh=True)
        return serde.deserialize(values[schema_id], data)

    def get(self, store: str, key: Any) -> Any | None:
        encoded = base64.urlsafe_b64encode(self.serialize_key(store, key)).decode().rstrip("=")
        status, headers, body = self._request("GET", f"/storage/{store}/{encoded}")
        if status == 200:
            return self._decode(store, int(headers[SCHEMA_ID_HEADER]), body)
        if status == 404 and headers.get(ERROR_HEADER) == "key-not-found":
            return None
        self._raise(store, status, body, headers.get(ERROR_HEADER, ""))
        return None

    def batch_get(self, store: str, keys: list[Any]) -> dict[Any, Any]:
        """Values of the keys that exist, keyed as given (keys must be hashable)."""
        key_schema, value_schemas = self._store_schemas(store)
        encode = serde.serializer(key_schema)
        try:
            serialized = [encode(k) for k in keys]
        except (ValueError, TypeError, AttributeError):
            serialized = [self.serialize_key(store, k) for k in keys]  # raises, naming the key that does not fit
        request = batch_get.encode_keys(serialized)
        status, headers, body = self._request("POST", f"/storage/{store}", request, batch_get.BATCH_CONTENT_TYPE)
        if status != 200:
            self._raise(store, status, body, headers.get(ERROR_HEADER, ""))
        try:
            records = batch_get.decode_records(body, len(keys))
        except ValueError as exc:
            raise ComponentError(f"region server {self.host}:{self.port} answered a malformed batch: {exc}") from None
        by_schema: dict[int, list[int]] = {}
        for index, record in enumerate(records):
            if record is not None:
                by_schema.setdefault(record[0], []).append(index)
        values: list[Any] = [None] * len(keys)
        for schema_id, indexes in by_schema.items():
            payloads = [records[i][1] for i in indexes]  # type: ignore[index]
            if len(indexes) >= DECODE_MANY_FROM and schema_id in value_schemas:
                decoded = serde.deserialize_many(self._value_json[store][schema_id], payloads)
            else:  # few values, or a schema registered since they were read (`_decode` reads them again)
                decoded = [self._decode(store, schema_id, payload) for payload in payloads]
            for index, value in zip(indexes, decoded, strict=True):
                values[index] = value
        return {key: values[i] for i, key in enumerate(keys) if records[i] is not None}

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
