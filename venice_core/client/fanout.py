"""Routed reads: a get or a batch get sent to the ready replicas of its keys' partitions, with retries and the long
tail's second requests, on keep-alive sockets multiplexed with poll (no thread per request).

A read of one partition (a get; a batch get of a one-partition version) goes to one replica (`Router.pick`) and waits
for it on its socket alone: the hot path. Only when that replica fails (a connection error, a timeout, a 5xx) or has
not answered within the long-tail delay does the read become a `Fanout`, the general case that a batch get of
several partitions always is: parts in flight (a request to one instance for the keys of some partitions), each
partition answered by the first part that answers it.

- A part that fails is sent again, its partitions to their next replicas (an instance that failed is a suspect for a
  while: `Router.suspect`); 503 PartitionNotHosted is not the instance's fault, only the table's (refreshed after the
  read). A keep-alive connection found closed by the server (idle) is retried once on a new one, same instance.
- A part not answered within `long_tail` seconds has its partitions asked of another replica too; the first answer
  wins, the other part's connection is closed (its response unread) and its instance made a suspect.
- A partition whose replicas have all failed has its table fetched again (at once, if not since the read started); a
  table of another version or partition count means the read starts over on it (`Reroute`). With no replica left,
  the read fails: ComponentError naming the region, the partition and every replica tried, with what each did.
"""

from __future__ import annotations

import math
import select
import time
from collections.abc import Callable

import httptools

from venice_core.client.dictionaries import READ_HEADERS, VERSION_HEADER
from venice_core.client.routing import REFRESH_MIN_INTERVAL_SECONDS, Route, Router, RoutingTable, format_address
from venice_core.client.wire import Address, Answer, Connection, Pool, encode_request
from venice_core.errors import ComponentError, NoCurrentVersion, StoreNotFound, VeniceError
from venice_core.protocol import batch_get

ERROR_HEADER = "X-Venice-Error"
_NOT_HOSTED = "PartitionNotHosted"  # the error kind of a 503 from an instance without the partition
_MAX_REROUTES = 3
_Record = tuple[int, bytes] | None
# A read's first request, already sent: its partition, its replica, and the answer, the connection still waiting
# for it, or why it failed.
_FirstTry = tuple[int, Address, Answer | Connection | BaseException | str]


def _closed_while_idle(conn: Connection, exc: BaseException) -> bool:
    """A keep-alive connection the server closed while it was idle (it served before, nothing of this response
    came): worth one retry on a new connection, the instance not at fault."""
    return bool(conn.served) and not conn.received and isinstance(exc, ConnectionError)


class Reroute(Exception):
    """The store's table changed version or partitioning under a read: start it over on `route`."""

    def __init__(self, route: Route) -> None:
        super().__init__("routing table changed")
        self.route = route


class _Part:
    """One request in flight: to `address`, for the keys (`indexes`) of `partitions`."""

    __slots__ = ("address", "conn", "pooled", "partitions", "indexes", "started", "hedged", "retried", "fd")

    def __init__(
        self, address: Address, conn: Connection, pooled: bool, partitions: list[int], indexes: list[int], retried: bool
    ) -> None:
        self.address, self.conn, self.pooled = address, conn, pooled
        self.partitions, self.indexes = partitions, indexes
        self.started = time.monotonic()
        self.hedged = False  # its long-tail second request was sent
        self.retried = retried  # a retry on a new connection after an idle one was found closed
        self.fd = conn.sock.fileno()


class _InFlight:
    """Requests in flight, polled together on their sockets: the one loop of a routed read (`Fanout`) and of a
    request any instance answers (`first_answer`). Each caller says when to wake (its timeouts, its long tail),
    what an answer or a failed read means, what to do at each wake-up, and when it is done."""

    def __init__(self) -> None:
        self.parts: dict[int, _Part] = {}  # by socket fd
        self._poller = select.poll()

    def add(self, part: _Part) -> None:
        self.parts[part.fd] = part
        self._poller.register(part.fd, select.POLLIN)

    def remove(self, part: _Part) -> bool:
        """Stop polling `part` (False: it was not polled)."""
        if self.parts.get(part.fd) is not part:
            return False
        del self.parts[part.fd]
        self._poller.unregister(part.fd)
        return True

    def close_all(self, remove: Callable[[_Part], object]) -> None:
        """At the end of a read: every part still in flight removed (by `remove`, the caller's) and its connection
        closed, its response unread."""
        for part in list(self.parts.values()):
            remove(part)
            part.conn.close()

    def run(
        self,
        wake: Callable[[], float],
        answered: Callable[[_Part, Answer], None],
        failed: Callable[[_Part, BaseException], None],
        tick: Callable[[float], None],
        done: Callable[[], bool],
    ) -> None:
        """Until `done()` or nothing is in flight: poll until `wake()` (monotonic), hand each complete answer to
        `answered` and each failed read to `failed`, then `tick(now)`."""
        parts = self.parts
        while not done() and parts:
            # Over TLS, a part may hold decrypted bytes its socket no longer shows: read without waiting.
            ready = [part.fd for part in parts.values() if part.conn.pending()]
            timeout = 0 if ready else max(0, math.ceil((wake() - time.monotonic()) * 1000))
            events = [(fd, 0) for fd in ready] or self._poller.poll(timeout)
            # the parts as polled: a part that replaces one closed meanwhile may reuse its fd, and is not readable
            for part in [parts.get(fd) for fd, _ in events]:
                if part is not None and parts.get(part.fd) is part:
                    self._read(part, answered, failed)
                if done():
                    return
            tick(time.monotonic())

    @staticmethod
    def _read(
        part: _Part, answered: Callable[[_Part, Answer], None], failed: Callable[[_Part, BaseException], None]
    ) -> None:
        """Hand `part`'s answer to `answered` once complete, or why its read failed to `failed`."""
        try:
            if not part.conn.read_available():
                return
        except TimeoutError:
            return
        except (OSError, httptools.HttpParserError) as exc:
            failed(part, exc)
            return
        answered(part, part.conn.result())


class Fanout:
    """One routed read in flight (see the module). `groups`: partition -> the indexes of its keys; `request(address,
    indexes)`: the request for those keys; `accept(indexes, answer)`: take a non-5xx answer (True), refuse a
    malformed one (False: the instance failed), or raise the error it is."""

    def __init__(
        self,
        router: Router,
        pool: Pool,
        store: str,
        table: RoutingTable,
        groups: dict[int, list[int]],
        request: Callable[[Address, list[int]], bytes],
        accept: Callable[[list[int], Answer], bool],
        timeout: float,
        long_tail: float,
    ) -> None:
        self.router, self.pool, self.store, self.table = router, pool, store, table
        self.groups, self.request, self.accept = groups, request, accept
        self.timeout, self.long_tail = timeout, long_tail
        self.started = time.monotonic()
        self.stale = False  # the read saw the table go stale: refresh it after the read
        self._unresolved = set(groups)
        self._covering = dict.fromkeys(groups, 0)  # parts in flight per partition
        self._tried: dict[int, set[Address]] = {p: set() for p in groups}
        self._errors: dict[Address, str] = {}
        self._inflight = _InFlight()

    # what happened before the read became a fan-out (the hot path's one request)
    def adopt(self, conn: Connection, partition: int, waited: float) -> None:
        """The request in flight on `conn` (pooled), sent `waited` seconds ago, answers `partition`."""
        self._tried[partition].add(conn.address)
        part = self._register(conn.address, conn, True, [partition], self.groups[partition], False)
        part.started -= waited

    def failed(self, address: Address, partition: int, reason: str, suspect: bool = True) -> None:
        self._tried[partition].add(address)
        self._note_failure(address, reason, suspect)

    def run(self) -> None:
        """Until every partition is answered; raises ComponentError when one cannot be, `Reroute`, or the error an
        answer is. Connections left with a response unread are closed."""
        try:
            self._launch([p for p in self.groups if p in self._unresolved and not self._covering[p]])
            self._loop()
        finally:
            self._inflight.close_all(self._remove)

    # parts
    def _launch(self, partitions: list[int], hedge: bool = False) -> None:
        """Send the partitions' keys to their next untried replicas, one part per instance. A hedge sends only
        where an untried replica is left; otherwise a partition without one fails the read."""
        by_address: dict[Address, list[int]] = {}
        for partition in partitions:
            address = self._next_replica(partition, hedge)
            if address is None:
                if hedge:
                    continue
                raise self._exhausted(partition)
            by_address.setdefault(address, []).append(partition)
        for address, group in by_address.items():
            self._send(address, group)

    def _send(self, address: Address, partitions: list[int], retried: bool = False) -> None:
        for partition in partitions:
            self._tried[partition].add(address)
        conn: Connection | None = None
        groups = self.groups
        indexes = groups[partitions[0]] if len(partitions) == 1 else [i for p in partitions for i in groups[p]]
        try:
            conn, pooled = self.pool.checkout(address)
            conn.send(self.request(address, indexes))
        except OSError as exc:
            if conn is None:
                self._fail(address, partitions, f"unreachable: {exc}")
                return
            conn.close()
            if not retried and conn.served and isinstance(exc, ConnectionError):
                self._send(address, partitions, retried=True)  # an idle connection the server had closed
            else:
                self._fail(address, partitions, f"unreachable: {exc}")
            return
        self._register(address, conn, pooled, partitions, indexes, retried)

    def _register(
        self,
        address: Address,
        conn: Connection,
        pooled: bool,
        partitions: list[int],
        indexes: list[int],
        retried: bool,
    ) -> _Part:
        part = _Part(address, conn, pooled, partitions, indexes, retried)
        self._inflight.add(part)
        for partition in partitions:
            self._covering[partition] += 1
        return part

    def _remove(self, part: _Part) -> None:
        if self._inflight.remove(part):
            for partition in part.partitions:
                self._covering[partition] -= 1

    def _next_replica(self, partition: int, hedge: bool) -> Address | None:
        tried = self._tried[partition]
        for address in self.router.candidates(self.table.replicas[partition]):
            if address not in tried:
                return address
        if hedge:
            return None
        # every replica the table names failed (or it names none): a table fetched since the read started may
        # name others
        try:
            route = self.router.refresh(self.store, self.started)
        except (StoreNotFound, NoCurrentVersion):
            raise
        except VeniceError:
            return None
        if route is not self.table:
            table = self.table
            if not isinstance(route, RoutingTable) or (route.version, route.partition_count) != (
                table.version,
                table.partition_count,
            ):
                raise Reroute(route)
            self.table = route
            for address in self.router.candidates(route.replicas[partition]):
                if address not in tried:
                    return address
        return None

    # the loop
    def _loop(self) -> None:
        self._inflight.run(self._wake, self._answered, self._read_failed, self._tick, lambda: not self._unresolved)
        if self._unresolved:
            raise AssertionError("a partition is neither answered nor asked")

    def _wake(self) -> float:
        """When the next part times out, or reaches the long-tail delay unhedged."""
        long_tail, timeout = self.long_tail, self.timeout
        return min(
            p.started + (long_tail if long_tail and not p.hedged else timeout) for p in self._inflight.parts.values()
        )

    def _tick(self, now: float) -> None:
        """Fail the parts past the timeout; hedge those past the long-tail delay."""
        parts = self._inflight.parts
        for part in list(parts.values()):
            if parts.get(part.fd) is not part:
                continue
            if now >= part.started + self.timeout:
                self._read_failed(part, TimeoutError(f"no answer within {self.timeout:g}s"))
            elif self.long_tail and not part.hedged and now >= part.started + self.long_tail:
                part.hedged = True
                alone = [p for p in part.partitions if p in self._unresolved and self._covering[p] == 1]
                self._launch(alone, hedge=True)

    def _answered(self, part: _Part, answer: Answer) -> None:
        self._remove(part)
        if not part.pooled:
            self.pool.checkin(part.conn)
        status, headers, _ = answer
        if status >= 500:
            kind = headers.get(ERROR_HEADER, "")
            # PartitionNotHosted: the instance is fine, the table is stale
            self._fail(part.address, part.partitions, f"answered {status} {kind}".rstrip(), suspect=kind != _NOT_HOSTED)
            return
        if not self.accept(part.indexes, answer):
            self._fail(part.address, part.partitions, f"answered {status} with a malformed body")
            return
        if headers.get(VERSION_HEADER, self.table.version_text) != self.table.version_text:
            self.stale = True
        self._unresolved.difference_update(part.partitions)
        for other in list(self._inflight.parts.values()):  # answered by this one: their answers are not read
            if self._unresolved.isdisjoint(other.partitions):
                self._remove(other)
                other.conn.close()
                if other.hedged:  # the slow one the long tail went around
                    self.router.suspect(other.address)

    def _read_failed(self, part: _Part, exc: BaseException) -> None:
        self._remove(part)
        conn = part.conn
        conn.close()
        if not part.retried and _closed_while_idle(conn, exc):
            self._send(part.address, part.partitions, retried=True)  # an idle connection the server had closed
            return
        self._fail(part.address, part.partitions, str(exc) or type(exc).__name__)

    def _fail(self, address: Address, partitions: list[int], reason: str, suspect: bool = True) -> None:
        self._note_failure(address, reason, suspect)
        uncovered = [p for p in partitions if p in self._unresolved and not self._covering[p]]
        if uncovered:
            self._launch(uncovered)

    def _note_failure(self, address: Address, reason: str, suspect: bool) -> None:
        self._errors[address] = reason
        self.stale = True
        if suspect:
            self.router.suspect(address)

    def _exhausted(self, partition: int) -> ComponentError:
        table = self.table
        what = f"partition {partition} of '{self.store}' (version {table.version}) in region {table.region}"
        tried = sorted(self._tried[partition])
        if not tried:
            return ComponentError(f"no ready replica of {what}")
        said = "; ".join(f"{format_address(a)}: {self._errors.get(a, 'failed')}" for a in tried)
        return ComponentError(f"every replica of {what} failed: {said}")


class RoutedReads:
    """The routed get and batch get of one client (its router, its connections)."""

    def __init__(self, router: Router, pool: Pool, timeout: float, long_tail: float) -> None:
        self.router, self.pool = router, pool
        self.timeout, self.long_tail = timeout, long_tail

    def get(self, store: str, table: RoutingTable, key: bytes, path: str) -> Answer:
        """The answer (status under 500) of a replica of the key's partition; Reroute if the region's routing
        stopped being tables."""
        for _ in range(_MAX_REROUTES):
            partition = table.partition(key)
            replicas = table.replicas[partition]
            tried: _FirstTry | None = None
            if replicas:  # the hot path: one replica, its socket alone
                address = self.router.pick(replicas)
                first = self._ask(address, f"GET {path} HTTP/1.1\r\nHost: {address[0]}\r\n{READ_HEADERS}\r\n".encode())
                if first.__class__ is tuple and first[0] < 500:
                    if first[1].get(VERSION_HEADER, table.version_text) != table.version_text:
                        self._refresh(store)
                    return first
                tried = (partition, address, first)
            answers: list[Answer] = []

            def accept(_: list[int], answer: Answer, answers: list[Answer] = answers) -> bool:
                answers.append(answer)
                return True

            def request(address: Address, _: list[int]) -> bytes:
                return encode_request("GET", path, address[0], None, "", READ_HEADERS)

            try:
                self._read(store, table, {partition: [0]}, request, accept, tried)
            except Reroute as change:
                if not isinstance(change.route, RoutingTable):
                    raise
                table = change.route
                continue
            return answers[-1]
        raise ComponentError(f"the routing table of '{store}' kept changing during a read")

    def _read(
        self,
        store: str,
        table: RoutingTable,
        groups: dict[int, list[int]],
        request: Callable[[Address, list[int]], bytes],
        accept: Callable[[list[int], Answer], bool],
        tried: _FirstTry | None = None,
    ) -> None:
        """Every group answered (`Fanout`'s arguments). The keys of one partition go to one replica and are waited
        for on its socket alone; a `Fanout` only if that fails or is slow, or for several partitions. `tried`: what
        became of that first request already sent (`get`'s)."""
        if tried is None and len(groups) == 1:
            ((partition, indexes),) = groups.items()
            replicas = table.replicas[partition]
            if replicas:
                address = self.router.pick(replicas)
                first = self._ask(address, request(address, indexes))
                if isinstance(first, tuple) and first[0] < 500:
                    if accept(indexes, first):
                        if first[1].get(VERSION_HEADER, table.version_text) != table.version_text:
                            self._refresh(store)
                        return
                    tried = (partition, address, f"answered {first[0]} with a malformed body")
                else:
                    tried = (partition, address, first)
        run = Fanout(self.router, self.pool, store, table, groups, request, accept, *self.times)
        if tried is not None:
            partition, address, outcome = tried
            if isinstance(outcome, Connection):
                run.adopt(outcome, partition, self.pool.wait)
            elif isinstance(outcome, tuple):
                kind = outcome[1].get(ERROR_HEADER, "")
                reason = f"answered {outcome[0]} {kind}".rstrip()
                run.failed(address, partition, reason, suspect=kind != _NOT_HOSTED)
            else:
                run.failed(address, partition, outcome if isinstance(outcome, str) else str(outcome) or repr(outcome))
        run.run()
        if run.stale:
            self._refresh(store)

    def _ask(self, address: Address, request: bytes) -> Answer | Connection | BaseException:
        """One request to one instance, waiting `pool.wait` at most: the answer, the connection still waiting for
        it, or why it failed (a keep-alive connection found closed by the server is retried once on a new one)."""
        for attempt in (1, 2):
            try:
                conn = self.pool.get(address)
            except OSError as exc:
                return exc
            try:
                return conn.exchange(request)
            except TimeoutError:
                return conn
            except (OSError, httptools.HttpParserError) as exc:
                conn.close()
                if attempt == 1 and _closed_while_idle(conn, exc):
                    continue
                return exc
        raise AssertionError("unreachable")

    def batch(
        self,
        store: str,
        table: RoutingTable,
        keys: list[bytes],
        path: str,
        refuse: Callable[[Answer], None],
        unpack: Callable[[dict[str, str]], Callable[[bytes], bytes] | None] = lambda _headers: None,
    ) -> list[_Record]:
        """Each key's record (None: absent), in order: the keys split by partition, each instance asked for the
        partitions it is the chosen replica of, all at once. `refuse(answer)` raises the error a non-5xx answer
        other than 200 is; `unpack(headers)` is what an answer's values are decompressed with (None: as they are)."""
        records: list[_Record] = [None] * len(keys)
        answered = bytearray(len(keys))
        pending = everything = list(range(len(keys)))  # `everything`: one part asks for all keys, in order

        def accept(indexes: list[int], answer: Answer) -> bool:
            status, _, body = answer
            if status != 200:
                refuse(answer)
                return False
            try:
                found = batch_get.decode_records(body, len(indexes))
            except ValueError:
                return False
            decompress = unpack(answer[1])
            if decompress is not None:  # each answer's own: its version's dictionary
                found = [None if r is None else (r[0], decompress(r[1])) for r in found]
            if indexes is everything:
                records[:] = found
                answered[:] = b"\x01" * len(found)
                return True
            for index, record in zip(indexes, found, strict=True):
                records[index] = record
                answered[index] = 1
            return True

        def request(address: Address, indexes: list[int]) -> bytes:
            body = batch_get.encode_keys(keys if indexes is everything else [keys[i] for i in indexes])
            return encode_request("POST", path, address[0], body, batch_get.BATCH_CONTENT_TYPE, READ_HEADERS)

        for _ in range(_MAX_REROUTES):
            groups: dict[int, list[int]] = {}
            if table.partition_count == 1:
                groups[0] = pending
            else:
                for index in pending:
                    groups.setdefault(table.partition(keys[index]), []).append(index)
            try:
                self._read(store, table, groups, request, accept)
            except Reroute as change:
                if not isinstance(change.route, RoutingTable):
                    raise
                table = change.route
                pending = [i for i in pending if not answered[i]]
                continue
            return records
        raise ComponentError(f"the routing table of '{store}' kept changing during a read")

    @property
    def times(self) -> tuple[float, float]:
        """The timeout and the long-tail delay."""
        return self.timeout, self.long_tail

    def _refresh(self, store: str) -> None:
        """A read saw the store's table go stale: fetch it again (at most every REFRESH_MIN_INTERVAL_SECONDS)."""
        self.router.refresh(store, time.monotonic() - REFRESH_MIN_INTERVAL_SECONDS, required=False)


def first_answer(
    router: Router,
    pool: Pool,
    addresses: list[Address],
    request: Callable[[Address], bytes],
    timeout: float,
    long_tail: float,
) -> tuple[Address, Answer]:
    """A request any instance can answer (a schema, a routing table): the first answer under 500 of the instances,
    asked in order, the next one as soon as one fails (or answers 5xx) or when the last asked has not answered
    within `long_tail`. ComponentError (naming what each did) when none answers."""
    return _FirstAnswer(router, pool, addresses, request, timeout, long_tail).run()


class _FirstAnswer:
    """`first_answer` in flight: the instances not yet asked (`queue`), what each that failed did."""

    def __init__(
        self,
        router: Router,
        pool: Pool,
        addresses: list[Address],
        request: Callable[[Address], bytes],
        timeout: float,
        long_tail: float,
    ) -> None:
        self.router, self.pool, self.request = router, pool, request
        self.timeout, self.long_tail = timeout, long_tail
        self.queue = list(addresses)
        self.retried: set[Address] = set()
        self.failures: list[str] = []
        self.answer: tuple[Address, Answer] | None = None
        self.newest = 0.0  # when the last instance asked was, as of the last wake-up
        self._inflight = _InFlight()

    def run(self) -> tuple[Address, Answer]:
        try:
            self._send_next()
            self._inflight.run(
                self._wake, self._answered, self._read_failed, self._tick, lambda: self.answer is not None
            )
            if self.answer is not None:
                return self.answer
            raise ComponentError("; ".join(f.rstrip() for f in self.failures) or "no instance to ask")
        finally:
            self._inflight.close_all(self._inflight.remove)

    def _send_next(self) -> None:
        while self.queue:
            address = self.queue.pop(0)
            conn: Connection | None = None
            try:
                conn, pooled = self.pool.checkout(address)
                conn.send(self.request(address))
            except OSError as exc:
                if conn is not None:
                    conn.close()
                self.router.suspect(address)
                self.failures.append(f"{format_address(address)}: unreachable: {exc}")
                continue
            self._inflight.add(_Part(address, conn, pooled, [], [], False))
            return

    def _drop(self, part: _Part, close: bool) -> None:
        self._inflight.remove(part)
        if close:
            part.conn.close()
        elif not part.pooled:
            self.pool.checkin(part.conn)

    def _wake(self) -> float:
        """When the first asked times out, or the last asked reaches the long-tail delay (an instance left)."""
        sent = [part.started for part in self._inflight.parts.values()]
        self.newest = max(sent)
        wake = min(sent) + self.timeout
        if self.long_tail and self.queue:
            wake = min(wake, self.newest + self.long_tail)
        return wake

    def _read_failed(self, part: _Part, exc: BaseException) -> None:
        self._drop(part, close=True)
        conn, address = part.conn, part.address
        if _closed_while_idle(conn, exc) and address not in self.retried:
            self.retried.add(address)  # an idle keep-alive connection the server had closed: once more
            self.queue.insert(0, address)
        else:
            self.router.suspect(address)
            self.failures.append(f"{format_address(address)}: {exc}")

    def _answered(self, part: _Part, answer: Answer) -> None:
        self._drop(part, close=False)
        if answer[0] < 500:
            self.answer = part.address, answer
            return
        self.failures.append(f"{format_address(part.address)}: answered {answer[0]} {answer[1].get(ERROR_HEADER, '')}")

    def _tick(self, now: float) -> None:
        """Give up on the instances past the timeout; ask the next when none is left in flight, or when the last
        asked is past the long-tail delay."""
        for part in list(self._inflight.parts.values()):
            if now >= part.started + self.timeout:
                self._drop(part, close=True)
                self.router.suspect(part.address)
                self.failures.append(f"{format_address(part.address)}: no answer within {self.timeout:g}s")
        if not self._inflight.parts or (self.long_tail and self.queue and now >= self.newest + self.long_tail):
            self._send_next()
