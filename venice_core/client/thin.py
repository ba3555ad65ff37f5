"""The thin read client: serialise the key with the store's key schema, ask a region server, decode the value with
the schema id it carries. One keep-alive connection per client (and thread)."""

from __future__ import annotations

import base64
import http.client
import json
import threading
from typing import Any

from venice_core.client import serde
from venice_core.errors import ComponentError, StoreNotFound, VeniceError

SCHEMA_ID_HEADER = "X-Venice-Schema-Id"


class ReadClient:
    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._local = threading.local()
        self._schemas: dict[str, tuple[Any, dict[int, Any]]] = {}

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return conn

    def _request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        for attempt in (1, 2):  # a keep-alive connection the server closed is retried once on a new one
            conn = self._connection()
            try:
                conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
                response = conn.getresponse()
                return response.status, dict(response.getheaders()), response.read()
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise ComponentError(f"region server {self.host}:{self.port} is unreachable: {exc}") from None
        raise AssertionError("unreachable")

    def _raise(self, store: str, status: int, body: bytes) -> None:
        try:
            message = json.loads(body)["error"]
        except (ValueError, KeyError):
            message = body.decode(errors="replace")
        if status == 404 and "unknown store" in message:
            raise StoreNotFound(store)
        raise VeniceError(f"region server answered {status}: {message}")

    def _store_schemas(self, store: str, refresh: bool = False) -> tuple[Any, dict[int, Any]]:
        if refresh or store not in self._schemas:
            status, _, body = self._request("GET", f"/schema/{store}")
            if status != 200:
                self._raise(store, status, body)
            doc = json.loads(body)
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
        if status == 404 and headers.get("X-Venice-Error") == "key-not-found":
            return None
        self._raise(store, status, body)
        return None

    def batch_get(self, store: str, keys: list[Any]) -> dict[Any, Any]:
        """Values of the keys that exist, keyed as given (keys must be hashable)."""
        encoded = [base64.urlsafe_b64encode(self.serialize_key(store, k)).decode().rstrip("=") for k in keys]
        status, _, body = self._request("POST", f"/storage/{store}", json.dumps({"keys": encoded}).encode())
        if status != 200:
            self._raise(store, status, body)
        result = {}
        for key, value in zip(keys, json.loads(body)["values"], strict=True):
            if value is not None:
                result[key] = self._decode(store, value[0], base64.b64decode(value[1]))
        return result

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
