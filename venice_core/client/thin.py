"""The thin read client: serialise the key with the store's key schema, ask a region server, decode the value with
the schema id it carries.

A region is one or more region-server instances. The client is given seeds (`ReadClient(host, port)`: one;
`ReadClient.for_region(config, region)`: every configured instance) and learns each store's routing table from any
live one (`routing`): a get goes to a ready replica of its key's partition, a batch get to the replicas of its keys'
partitions at once, retried on another replica when one fails and sent to a second one when the first is slow
(`fanout`). A region whose servers have no routing tables (a single instance, an older server) is read from the one
instance that answered, as before. One keep-alive connection per (thread, instance) (`wire`)."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Sequence
from time import monotonic
from typing import TYPE_CHECKING, Any

import httptools

from venice_core.client.dictionaries import READ_HEADERS, Dictionaries
from venice_core.client.fanout import ERROR_HEADER, Reroute, RoutedReads, first_answer
from venice_core.client.routing import Route, Router, RoutingTable, Unrouted, format_address
from venice_core.client.wire import Address, Answer, Pool, encode_request
from venice_core.config import DEFAULTS
from venice_core.config.keys import PARTITIONER_CLASSES
from venice_core.errors import ComponentError, NoCurrentVersion, StoreNotFound, VeniceError
from venice_core.protocol import batch_get, serde
from venice_core.protocol.partitioner import VenicePartitioner
from venice_core.protocol.partitioner_config import PartitionerConfig, VersionPartitioner
from venice_core.security.tls import client_context

if TYPE_CHECKING:
    from venice_core.config import ClusterConfig

SCHEMA_ID_HEADER = "X-Venice-Schema-Id"
# A batch's values of one schema decode in one fastavro reader call from this many on (100 values: 206 -> 131 us);
# fewer, one call each (the reader's set-up costs more than it saves).
DECODE_MANY_FROM = 16
DEFAULT_LONG_TAIL_RETRY_MS = 20.0  # `client.long.tail.retry.ms`'s default
# Several instances to choose from: one that does not accept a connection within this is skipped (a single seed
# waits the whole timeout, as the client always did).
CONNECT_TIMEOUT_SECONDS = 3.0
# The partitioner classes a client without a config loads (`venice.partitioner.classes`' default).
DEFAULT_PARTITIONER_CLASSES = tuple(DEFAULTS[PARTITIONER_CLASSES].split(","))


class ReadClient:
    """`ReadClient(host, port)`: a region through one seed address; `ReadClient(seeds=[...])` or
    `ReadClient.for_region(config, region)`: through any of several. `long_tail_retry_ms`: a read not answered
    within it is sent to another replica too (0: never). `partitioner_classes`: the partitioner classes the client
    routes with besides the default (`venice.partitioner.classes`: the config's for `for_region`, else its default);
    a version pinned to another is refused at its first read. `tls`: the platform's (`security.tls.client_context`:
    `for_region` takes the config's), whose certificate names the client's principal to the servers."""

    def __init__(
        self,
        host: str | None = None,
        port: int | None = None,
        timeout: float = 10.0,
        *,
        seeds: Sequence[Address] | None = None,
        long_tail_retry_ms: float = DEFAULT_LONG_TAIL_RETRY_MS,
        region: str = "",
        partitioner_classes: Sequence[str] = DEFAULT_PARTITIONER_CLASSES,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if (host is None) == (seeds is None) or (host is not None and port is None):
            raise ValueError("a ReadClient takes a host and port, or seeds")
        addresses: list[Address] = [(host, port)] if host is not None and port is not None else list(seeds or [])
        self.host, self.port = addresses[0]
        self.timeout = timeout
        self.region = region
        long_tail = max(0.0, long_tail_retry_ms) / 1000
        wait = long_tail or timeout
        connect_timeout = timeout if len(addresses) == 1 else min(timeout, CONNECT_TIMEOUT_SECONDS)
        self._pool = Pool(timeout, wait, connect_timeout, tls)
        self._router = Router(addresses, self._fetch_route, region)
        self._routed = RoutedReads(self._router, self._pool, timeout, long_tail)
        # ZSTD_WITH_DICT values come compressed: each version's dictionary fetched once, from any instance
        self._dictionaries = Dictionaries(lambda path: self._request("GET", path))
        self._schemas: dict[str, tuple[Any, dict[int, Any]]] = {}
        self._value_json: dict[str, dict[int, str]] = {}  # the value schemas as JSON text (`deserialize_many`)
        self._key_json: dict[str, str] = {}  # the key schema as JSON text (a partitioner other than the default's)
        self.partitioner_classes = tuple(partitioner_classes)

    @classmethod
    def for_region(cls, config: ClusterConfig, region: str, timeout: float = 10.0) -> ReadClient:
        """A client of every configured instance of the region, with the configured long-tail retry."""
        return cls(
            seeds=config.server_addresses(region),
            timeout=timeout,
            long_tail_retry_ms=config.client.long_tail_retry_ms,
            region=region,
            partitioner_classes=config.partitioner_classes,
            tls=client_context(config),
        )

    # requests to one instance, and to any
    def _request_to(
        self,
        address: Address,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str = "",
        headers: str = "",
    ) -> Answer:
        request = encode_request(method, path, address[0], body, content_type or "application/json", headers)
        for attempt in (1, 2):  # a keep-alive connection the server closed is retried once on a new one
            conn = None
            try:
                conn = self._pool.get(address)
                return conn.request(request)
            except (OSError, httptools.HttpParserError) as exc:  # ConnectionError and timeouts are OSErrors
                if conn is not None:
                    conn.close()
                if attempt == 2:
                    raise ComponentError(f"region server {format_address(address)} is unreachable: {exc}") from None
        raise AssertionError("unreachable")

    def _ask_region(
        self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"
    ) -> tuple[Address, Answer]:
        """A request any instance answers (a schema, a routing table, metrics): to the one that answered last, the
        next as soon as one fails or answers 5xx, or is slower than the long-tail delay (`fanout.first_answer`). A
        client of one address asks it as the client always did."""
        addresses = self._router.control_addresses()
        if len(addresses) == 1:
            return addresses[0], self._request_to(addresses[0], method, path, body, content_type)

        def request(address: Address) -> bytes:
            return encode_request(method, path, address[0], body, content_type)

        try:
            address, answer = first_answer(self._router, self._pool, addresses, request, *self._routed.times)
        except ComponentError as exc:
            where = f"region {self.region}" if self.region else "the region"
            raise ComponentError(f"no region server of {where} answers: {exc}") from None
        self._router.preferred = address
        return address, answer

    def _request(
        self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"
    ) -> Answer:
        return self._ask_region(method, path, body, content_type)[1]

    def _fetch_route(self, store: str) -> Route:
        """The store's route as the region says it (Router's `fetch`)."""
        address, (status, headers, body) = self._ask_region("GET", f"/routing/{store}")
        kind = headers.get(ERROR_HEADER, "")
        if status == 200:
            try:
                return RoutingTable.from_json(
                    json.loads(body), monotonic(), lambda p, v: self._partitioner(store, p, v)
                )
            except ValueError as exc:
                raise ComponentError(f"region server {format_address(address)} answered {exc}") from None
        if status == 404 and kind == "no-route":  # no routing tables: a single instance, read directly
            return Unrouted(address, monotonic())
        self._raise(store, status, body, kind)
        raise AssertionError("unreachable")

    def _partitioner(self, store: str, config: PartitionerConfig, version: int) -> VenicePartitioner:
        """The version's partitioner as its routing table names it, loaded from the client's allowed classes."""
        if not config.is_default:
            self._store_schemas(store)  # the key schema, which such a partitioner is built with
        what = f"store '{store}' version {version}"
        return VersionPartitioner(config, self._key_json.get(store, ""), self.partitioner_classes, what).loaded()

    def _raise(self, store: str, status: int, body: bytes, error_kind: str = "") -> None:
        try:
            message = json.loads(body)["error"]
        except (ValueError, KeyError, TypeError):
            message = body.decode(errors="replace")
        if status == 404 and "unknown store" in message:
            raise StoreNotFound(store)
        if status == 404 and error_kind == NoCurrentVersion.__name__:
            raise NoCurrentVersion(message)
        raise VeniceError(f"region server answered {status}: {message}")

    def _direct(self, store: str, route: Route, method: str, path: str, body: bytes | None = None) -> Answer:
        """A read of a region without routing tables: from the instance that said so, as a one-address client."""
        assert isinstance(route, Unrouted)
        try:
            return self._request_to(route.address, method, path, body, batch_get.BATCH_CONTENT_TYPE, READ_HEADERS)
        except ComponentError:
            self._router.forget(store)  # the next read looks for an instance that answers
            raise

    # schemas
    def _store_schemas(self, store: str, refresh: bool = False) -> tuple[Any, dict[int, Any]]:
        if refresh or store not in self._schemas:
            status, _, body = self._request("GET", f"/schema/{store}")
            if status != 200:
                self._raise(store, status, body)
            doc = json.loads(body)
            self._key_json[store] = json.dumps(doc["key_schema"])
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

    # reads
    def get(self, store: str, key: Any) -> Any | None:
        serialized = self.serialize_key(store, key)
        encoded = base64.urlsafe_b64encode(serialized).decode().rstrip("=")
        path = f"/storage/{store}/{encoded}"
        route = self._router.route(store)
        answer = None
        if type(route) is RoutingTable:
            try:
                answer = self._routed.get(store, route, serialized, path)
            except Reroute as change:  # the region's servers stopped having routing tables
                route = change.route
        status, headers, body = answer or self._direct(store, route, "GET", path)
        if status == 200:
            decompress = self._dictionaries.for_answer(store, headers)
            return self._decode(store, int(headers[SCHEMA_ID_HEADER]), body if decompress is None else decompress(body))
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
        path = f"/storage/{store}"
        route = self._router.route(store)
        records: list[tuple[int, bytes] | None] | None = None
        if type(route) is RoutingTable:

            def refuse(answer: Answer) -> None:
                self._raise(store, answer[0], answer[2], answer[1].get(ERROR_HEADER, ""))

            try:
                unpack = self._dictionaries.for_answer
                records = self._routed.batch(store, route, serialized, path, refuse, lambda h: unpack(store, h))
            except Reroute as change:  # the region's servers stopped having routing tables
                route = change.route
        if records is None:
            status, headers, body = self._direct(store, route, "POST", path, batch_get.encode_keys(serialized))
            if status != 200:
                self._raise(store, status, body, headers.get(ERROR_HEADER, ""))
            try:
                records = batch_get.decode_records(body, len(keys))
            except ValueError as exc:
                where = format_address(getattr(route, "address", (self.host, self.port)))
                raise ComponentError(f"region server {where} answered a malformed batch: {exc}") from None
            decompress = self._dictionaries.for_answer(store, headers)
            if decompress is not None:
                records = [None if r is None else (r[0], decompress(r[1])) for r in records]
        by_schema: dict[int, list[int]] = {}
        for index, record in enumerate(records):
            if record is not None:
                by_schema.setdefault(record[0], []).append(index)
        values: list[Any] = [None] * len(keys)
        for schema_id, indexes in by_schema.items():
            payloads = [records[i][1] for i in indexes]  # type: ignore[index]  # `indexes`: records that are not None
            if len(indexes) >= DECODE_MANY_FROM and schema_id in value_schemas:
                decoded = serde.deserialize_many(self._value_json[store][schema_id], payloads)
            else:  # few values, or a schema registered since they were read (`_decode` reads them again)
                decoded = [self._decode(store, schema_id, payload) for payload in payloads]
            for index, value in zip(indexes, decoded, strict=True):
                values[index] = value
        return {key: values[i] for i, key in enumerate(keys) if records[i] is not None}

    def close(self) -> None:
        """Close this thread's connections."""
        self._pool.close()
