"""A region-server instance (`venice server --region R [--instance N]`).

It registers itself in the metadata store and renews its lease every second (`leases`). Every second it asks the
metadata store which replicas the region's placement gives it (`controller.placement`; the instance holding the
region's coordinator lease also computes that placement and picks each partition's leader) and which version of each
store is current; it runs an ingestion task per replica it holds (every replica ingests the region's own version
topic but a partition's leader outside the source region, which takes the source region's topic and produces it on;
for a hybrid version, after END_OF_PUSH, the region's real-time topics, the partition's leader writing the winners
on), and drops the storage of replicas
placed elsewhere and of versions killed or retired. Reads go to the store's current version; a partition this
instance holds no ready replica of answers 503 (a routing client asks another), a store with no version in the
region 404.

The instance is three parts, each with one job, composed here: its membership of the region (`membership`: the lease,
the assignments, the leaderships), what it hosts (`hosting`: the versions and partitions it ingests, their reports,
its spare partitions) and its reads (`reads`, served over HTTP by `http`). A sync, every second or when asked, brings
the three up to date with the metadata store in turn. Each second the instance asks only whether anything moved (the
metadata store's generation, which every committed change but a lease's renewal bumps, and which instances are live);
it reads the rest when something did, when asked, and every FULL_SYNC_SECONDS whatever.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any
from urllib.parse import unquote

from venice_core.config import ClusterConfig, server_host
from venice_core.controller import placement, store_readers
from venice_core.controller import versions as controller
from venice_core.host import gc_settings
from venice_core.meta import MetadataStore
from venice_core.protocol.compression import CompressionStrategy
from venice_core.security import tls
from venice_core.security.principals import DAVINCI
from venice_core.server.hosting import HostedVersion, Hosting
from venice_core.server.http import serve
from venice_core.server.membership import SYNC_INTERVAL_SECONDS, Membership
from venice_core.server.reads import Reads
from venice_core.utils.metrics import PartitionIngestion

log = logging.getLogger(__name__)
SYNC_GAP_SECONDS = 0.05
# A sync reads the whole metadata store at least this often, though nothing moved its generation: a safety net, not a
# schedule (every change bumps the generation; a lease's renewal is seen through `Membership.observe`).
FULL_SYNC_SECONDS = 10.0
STORE_ENDPOINTS = frozenset({"storage", "schema", "dictionary", "routing"})  # each names its store next


class RegionServer:
    """One instance: its membership, what it hosts and its reads, synced with the metadata store, and the
    `ReadBackend` its HTTP front serves."""

    def __init__(self, config: ClusterConfig, region: str, instance: int = 0) -> None:
        self.config = config
        self.region = config.region(region)
        self.instance = config.check_instance(region, instance)
        self.meta = MetadataStore(config.metadata_db_url)
        self.stopping = threading.Event()
        self._wake = threading.Event()  # a sync asked for now (`POST /sync`), not at the next interval
        self._requested = threading.Event()  # ... and to read everything, changed or not
        self._seen: tuple[int, frozenset[tuple[int, bool, bool]]] | None = None  # `observe()` at the last full read
        self._coordinating = False
        self._synced_at = float("-inf")
        self.membership = Membership(config, self.region, self.instance, self.meta, taken_over=self._stop)
        self.hosting = Hosting(
            config,
            self.region,
            self.instance,
            self.meta,
            self.membership.owner,
            self.membership.leads,
            self.membership.leading,
            lambda store, number: self.reads.required_dictionary(store, number),
        )
        self.reads = Reads(self.region, self.instance, self.meta, self.hosting.hosted)
        self.readers: dict[str, frozenset[str]] = {}  # each store's readers besides the platform's principals

    @property
    def hosted(self) -> dict[tuple[str, int], HostedVersion]:
        return self.hosting.hosted

    def register(self, host: str, port: int) -> None:
        self.membership.register(host, port)
        self.hosting.offer_spare()

    def sync_once(self) -> None:
        """Resend what the metadata store did not take, keep the coordinator lease, and read the rest only if the
        metadata store changed since the last sync (or the instance's own state, a request or the interval asks)."""
        self.hosting.resend_reports()
        coordinating = self.membership.hold_coordination()
        seen = self.membership.observe()
        due = (
            self._requested.is_set()
            or seen != self._seen
            or coordinating != self._coordinating
            or time.monotonic() - self._synced_at >= FULL_SYNC_SECONDS
            or bool(self.hosting.spare)  # (its grace period runs on the clock)
            or self.membership.needs_sync()
        )
        if not due:
            return
        self._requested.clear()  # a request made while this sync reads is served by the next one
        self._read_all(coordinating)
        self._seen, self._coordinating, self._synced_at = seen, coordinating, time.monotonic()

    def _read_all(self, coordinating: bool) -> None:
        region = self.region.name
        if coordinating:
            self.membership.place()
        wanted = {(v.store, v.number): v for v in controller.versions_to_host(self.meta, region)}
        assignments = self.membership.sync_assignments()
        self.hosting.sync(wanted, assignments)
        self.membership.note_replicated(self.hosting.completed)
        if self.hosting.spare:  # until placed back or dropped
            self.hosting.sync_spare(set(wanted))
        current = controller.current_versions(self.meta, region)
        known = controller.store_names(self.meta)
        routing = placement.routing_tables(self.meta, self.config, region)
        self.reads.update(current, known, routing, set(wanted))
        self.hosting.drop_unwanted(wanted)
        if self.config.security.enabled:  # after the rest: a failure here leaves the hosting synced
            self.readers = store_readers.every_reader(self.meta)

    def run(self) -> None:
        gc_settings.tune_for_throughput()
        region, instance = self.region.name, self.instance
        host, port = self.config.instance_bind_host(region, instance), self.config.server_port(region, instance)
        # Refused, before anything is bound, while another process runs this instance.
        self.register(self.config.advertised_host(region, instance), port)
        try:
            context = tls.server_context(self.config, server_host(region, instance))  # None without security
            if context is not None:  # the stores' readers known from the first request on
                self.readers = store_readers.every_reader(self.meta)
            authorize = self.authorize if context is not None else None
            http_server = serve(self, host, port, self.config.server.limits, context, authorize)
        except OSError:
            self.membership.release()
            raise
        signal.signal(signal.SIGTERM, lambda *_: self._stop())
        signal.signal(signal.SIGINT, lambda *_: self._stop())
        heartbeat = threading.Thread(target=self.membership.heartbeat, args=(self.stopping,), daemon=True, name="lease")
        heartbeat.start()
        log.info("region %s instance %d serving on %s:%d", self.region.name, self.instance, *http_server.server_address)
        try:
            while not self.stopping.is_set():
                try:
                    self.sync_once()
                except Exception:  # noqa: BLE001 - the metadata store or broker may be back next round
                    log.exception("sync failed")
                self._wake.wait(SYNC_INTERVAL_SECONDS)
                self._wake.clear()
                self.stopping.wait(SYNC_GAP_SECONDS)  # a burst of `POST /sync`s: one sync per gap at most
        finally:
            http_server.shutdown()
            self.hosting.close()
            try:
                self.membership.release()
            except Exception:  # noqa: BLE001 - the lease then runs out on its own
                log.exception("cannot release the lease of instance %d", self.instance)
            self.meta.dispose()

    def _stop(self) -> None:
        self.stopping.set()
        self._wake.set()

    def authorize(self, principal: str | None, path: str) -> str | None:
        """Whether `principal` may ask for `path` (None: yes; else why not). The platform's principals may ask
        anything; `/health` anyone with a certificate of the platform's CA; a store's reads, schemas, dictionaries
        and routing table its readers (`venice store acl`), and the schemas and dictionaries a Da Vinci client (it
        reads every topic already); `/sync` and `/metrics` no one else."""
        if principal in tls.PLATFORM_PRINCIPALS:
            return None
        _, _, rest = path.partition("/")
        endpoint, _, rest = rest.partition("/")
        if endpoint == "health":
            return None
        if endpoint in STORE_ENDPOINTS:
            store = unquote(rest.partition("/")[0])
            if principal == DAVINCI and endpoint in ("schema", "dictionary"):
                return None
            if principal is not None and principal in self.readers.get(store, ()):
                return None
            grant = f"venice store acl grant {store} --principal {principal} --read"
            return f"{principal} may not read store '{store}' ({grant})"
        return f"/{endpoint} is for the platform's principals only"

    # the HTTP front's backend (`http.RoutedBackend`)
    def request_sync(self) -> None:
        """`POST /sync`: read the metadata store now rather than at the next interval (a swap waits for it)."""
        self._requested.set()
        self._wake.set()

    def health(self) -> dict[str, Any]:
        assignments = self.membership.assignments
        return {
            "region": self.region.name,
            "instance": self.instance,
            "pid": os.getpid(),
            "status": "ok",
            "stores": dict(self.reads.current),
            "hosted": [f"{s}_v{n}" for s, n in self.hosted],
            "replicas": len(assignments),
            "leads": sum(1 for a in assignments.values() if a.leader),
        }

    def ingestion(self) -> list[PartitionIngestion]:
        return self.hosting.ingestion()

    def serving_version(self, store: str) -> int:
        return self.reads.serving_version(store)

    def routing_table(self, store: str) -> dict[str, Any]:
        return self.reads.routing_table(store)

    def get(self, store: str, key: bytes) -> tuple[int, bytes] | None:
        return self.reads.get(store, key)

    def get_stored(self, store: str, key: bytes) -> tuple[int, CompressionStrategy, tuple[int, bytes] | None]:
        return self.reads.get_stored(store, key)

    def batch_get(self, store: str, keys: list[bytes]) -> list[tuple[int, bytes] | None]:
        return self.reads.batch_get(store, keys)

    def batch_get_records(self, store: str, keys: list[bytes]) -> list[bytes | None]:
        return self.reads.batch_get_records(store, keys)

    def batch_get_stored(self, store: str, keys: list[bytes]) -> tuple[int, CompressionStrategy, list[bytes | None]]:
        return self.reads.batch_get_stored(store, keys)

    def dictionary(self, store: str, number: int) -> bytes | None:
        return self.reads.dictionary(store, number)

    def schema_document(self, store: str) -> dict[str, Any]:
        return self.reads.schema_document(store)
