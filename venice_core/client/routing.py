"""A replicated region's routing, as the thin client keeps it: each store's routing table (its current version,
partition count and each partition's ready replicas, from `GET /routing/<store>` on any live instance), which replica
a read goes to, and which instances failed lately.

- A table is fetched when a store is first read, again when it is older than `TABLE_MAX_AGE_SECONDS`, and when a
  read saw it go stale (an answer naming another version, a 503 PartitionNotHosted, an instance unreachable): then
  at most once per `REFRESH_MIN_INTERVAL_SECONDS` (so a rollout, when instances swap at slightly different moments,
  costs a few fetches, not one per read), and at once when a read has no replica left to try.
- A region whose servers have no `/routing` (a single instance, an older server: 404 `no-route`) is read from the
  instance that answered, as a client of one address (`Unrouted`); asked again after `TABLE_MAX_AGE_SECONDS`.
- Reads of a partition take its ready replicas in turn (round-robin over the client); an instance that failed (a
  connection error, a timeout, a 5xx, or a long-tail loser) is a suspect for `SUSPECT_SECONDS`: tried after the
  others while it is.

One `Router` per client, shared by its threads (dict operations under the GIL; fetches one at a time)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from venice_core.client.wire import Address
from venice_core.errors import NoCurrentVersion, StoreNotFound, VeniceError
from venice_core.protocol.partitioner import DEFAULT_PARTITIONER, VenicePartitioner
from venice_core.protocol.partitioner_config import PartitionerConfig

TABLE_MAX_AGE_SECONDS = 30.0
REFRESH_MIN_INTERVAL_SECONDS = 0.05
SUSPECT_SECONDS = 1.0


def parse_address(text: str) -> Address:
    """'host:port' (or '[v6]:port') as a socket address."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"replica address {text!r} is not host:port")
    return host.strip("[]"), int(port)


def format_address(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


@dataclass(frozen=True, slots=True)
class RoutingTable:
    """A store's current version in a region and each partition's ready replicas (index: partition number), and the
    version's partitioner."""

    store: str
    region: str
    version: int
    partition_count: int
    replicas: tuple[tuple[Address, ...], ...]
    fetched_at: float
    partitioner: VenicePartitioner = DEFAULT_PARTITIONER
    version_text: str = field(init=False)  # the version as `X-Venice-Version` carries it: compared as text

    def __post_init__(self) -> None:
        object.__setattr__(self, "version_text", str(self.version))

    @classmethod
    def from_json(
        cls,
        doc: Any,
        fetched_at: float,
        load_partitioner: Callable[[PartitionerConfig, int], VenicePartitioner],
    ) -> RoutingTable:
        """The `/routing/<store>` answer; ValueError if it is not one. `load_partitioner` builds the version's
        partitioner (named by the answer; a server from before partitioners could be chosen names none: the
        default), given its config and the version; it raises the VeniceError that refuses it."""
        try:
            count = int(doc["partition_count"])
            replicas = tuple(tuple(parse_address(a) for a in partition) for partition in doc["replicas"])
            store, region, version = str(doc["store"]), str(doc["region"]), int(doc["version"])
            config = PartitionerConfig.of(doc.get("partitioner"))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed routing table: {exc!r}") from None
        if count < 1 or len(replicas) != count:
            raise ValueError(f"routing table of {count} partitions lists replicas of {len(replicas)}")
        partitioner = load_partitioner(config, version)
        return cls(store, region, version, count, replicas, fetched_at, partitioner)

    def partition(self, key: bytes) -> int:
        return 0 if self.partition_count == 1 else self.partitioner.partition(key, self.partition_count)

    @property
    def addresses(self) -> set[Address]:
        return {address for partition in self.replicas for address in partition}


@dataclass(frozen=True, slots=True)
class Unrouted:
    """A region without routing tables (404 `no-route`): read from `address`, the instance that said so."""

    address: Address
    fetched_at: float


Route = RoutingTable | Unrouted


class Router:
    """The client's routes (a table or `Unrouted` per store), its seeds and suspects.

    `fetch(store)` asks the region (any live instance) for the store's route: it returns the route, or raises
    ComponentError when no instance answers, or the VeniceError that is the answer (an unknown store, no current
    version)."""

    def __init__(self, seeds: Sequence[Address], fetch: Callable[[str], Route], region: str = "") -> None:
        if not seeds:
            raise ValueError("a routing client needs at least one seed address")
        self.seeds = list(dict.fromkeys(seeds))
        self.region = region
        self._fetch = fetch
        self._routes: dict[str, Route] = {}
        self._attempted: dict[str, float] = {}  # when each store's route was last fetched (or tried)
        self._suspects: dict[Address, float] = {}  # instance -> suspect until (monotonic)
        self._turn = itertools.count()
        self._lock = threading.Lock()
        self.preferred: Address = self.seeds[0]  # the instance that answered the last control request
        self._instances: dict[Address, None] = {}  # every instance a table named (ordered)

    # routes
    def route(self, store: str) -> Route:
        """The store's route, fetched if unknown or older than `TABLE_MAX_AGE_SECONDS` (the hot path)."""
        route = self._routes.get(store)
        if route is not None and time.monotonic() - route.fetched_at < TABLE_MAX_AGE_SECONDS:
            return route
        return self.refresh(store, time.monotonic() - REFRESH_MIN_INTERVAL_SECONDS, required=route is None)

    def cached(self, store: str) -> Route | None:
        return self._routes.get(store)

    def refresh(self, store: str, newer_than: float, required: bool = True) -> Route:
        """The store's route fetched at `newer_than` or since (by this thread or another): fetched now unless one
        was. `required` False: a failed fetch keeps the route there was (a read that saw it stale already has its
        answer); a store that no longer exists or serves nothing drops it (the next read fetches it and says so)."""
        with self._lock:
            current = self._routes.get(store)
            if self._attempted.get(store, -1.0) >= newer_than and current is not None:
                return current
            self._attempted[store] = time.monotonic()
            try:
                route = self._fetch(store)
            except (StoreNotFound, NoCurrentVersion):
                self._routes.pop(store, None)
                if required or current is None:
                    raise
                return current
            except VeniceError:
                if required or current is None:
                    raise
                return current
            self._routes[store] = route
            if isinstance(route, RoutingTable):
                for address in sorted(route.addresses - self._instances.keys()):
                    self._instances[address] = None
            return route

    def forget(self, store: str) -> None:
        """Drop the store's route: the next read fetches it (an unrouted instance that stopped answering)."""
        self._routes.pop(store, None)
        self._attempted.pop(store, None)

    def control_addresses(self) -> list[Address]:
        """Where to ask for a route or a schema: the last instance that answered, the seeds, the instances of the
        known tables; suspects last."""
        ordered = list(dict.fromkeys([self.preferred, *self.seeds, *list(self._instances)]))
        return self.demote(ordered) if self._suspects else ordered

    # replicas
    def pick(self, replicas: tuple[Address, ...]) -> Address:
        """The replica a read goes to first: the next in turn that is not a suspect (the hot path)."""
        count = len(replicas)
        if count == 1:
            return replicas[0]
        start = next(self._turn) % count
        if self._suspects:
            now = time.monotonic()
            suspects = self._suspects
            for step in range(count):
                address = replicas[(start + step) % count]
                if suspects.get(address, 0.0) <= now:
                    return address
        return replicas[start]

    def candidates(self, replicas: tuple[Address, ...]) -> list[Address]:
        """Every replica in the order to try them: from the next in turn, suspects last."""
        count = len(replicas)
        if count > 1:
            start = next(self._turn) % count
            ordered = [*replicas[start:], *replicas[:start]]
        else:
            ordered = list(replicas)
        return self.demote(ordered) if self._suspects else ordered

    def demote(self, addresses: list[Address]) -> list[Address]:
        """Suspects moved after the others (each group kept in order); expired suspicions dropped."""
        now = time.monotonic()
        suspects = self._suspects
        for address, until in list(suspects.items()):
            if until <= now:
                suspects.pop(address, None)
        if not suspects:
            return addresses
        return [a for a in addresses if a not in suspects] + [a for a in addresses if a in suspects]

    def suspect(self, address: Address, seconds: float = SUSPECT_SECONDS) -> None:
        self._suspects[address] = time.monotonic() + seconds

    def is_suspect(self, address: Address) -> bool:
        return self._suspects.get(address, 0.0) > time.monotonic()
