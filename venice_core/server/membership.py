"""A region-server instance's membership of its region: its registration and lease in the metadata store (renewed
every second), the replicas the region's placement assigns it as of the last sync, and, outside the source region,
what each of its replicas asks to lead its partition (`ingestion.leader.Leading`: a leader produces only under its
epoch while its lease runs)."""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable

from venice_core.config import ClusterConfig, RegionConfig
from venice_core.controller import instances, placement
from venice_core.controller.placement import Assignment, PartitionKey
from venice_core.errors import VeniceError
from venice_core.ingestion.leader import Leading, Upstream
from venice_core.meta import MetadataStore

log = logging.getLogger("venice_core.server.region_server")  # the server's one logger: its lines as they were
SYNC_INTERVAL_SECONDS = 1.0
# A leader stops producing this long before its lease runs out in the metadata store (which judges it by the
# database's clock): this process counts its lease on its monotonic clock from before the renewal, and the drift
# between the two clocks over a lease, with a renewal's latency, is less.
LEASE_SAFETY_SECONDS = 1.0


class InstanceTakenOver(VeniceError):
    """Another process renewed this instance's registration: this one stops."""


class Membership:
    """The instance's lease, its assignments and its leaderships. `taken_over` is called when another process
    renewed the instance's registration (the server stops)."""

    def __init__(
        self,
        config: ClusterConfig,
        region: RegionConfig,
        instance: int,
        meta: MetadataStore,
        taken_over: Callable[[], None],
    ) -> None:
        self.config, self.region, self.instance, self.meta = config, region, instance, meta
        self.owner = instances.owner_token()  # this process's token on the instance's lease
        self.assignments: dict[PartitionKey, Assignment] = {}
        self.lease_until = 0.0  # monotonic: a leader produces only before it
        self._lapsed = threading.Event()  # the lease ran out, then was renewed: leaderships unknown until resynced
        self._taken_over = taken_over

    @property
    def is_source(self) -> bool:
        return self.region.name == self.config.source_region

    # the lease
    def register(self, host: str, port: int) -> None:
        started = time.monotonic()
        instances.register(
            self.meta,
            self.region.name,
            self.instance,
            host,
            port,
            self.owner,
            os.getpid(),
            self.config.server.instance_lease_seconds,
        )
        self._extend_lease(started)

    def renew_lease(self) -> None:
        """Renew the instance's lease; a renewal that fails leaves it to run out (leaders stop producing)."""
        started = time.monotonic()
        try:
            renewed = instances.renew(self.meta, self.region.name, self.instance, self.owner)
        except Exception:  # noqa: BLE001 - the metadata store may be back at the next renewal
            log.exception("cannot renew the lease of instance %d", self.instance)
            return
        if not renewed:
            log.error("instance %d of %s was taken over by another process: stopping", self.instance, self.region.name)
            self._taken_over()
            return
        if time.monotonic() >= self.lease_until and not self._lapsed.is_set():
            # Renewed after the lease ran out (a pause, a stalled database): leaderships may have moved meanwhile.
            # None is trusted again until the next sync has read them afresh.
            log.warning(
                "instance %d's lease ran out before this renewal: leading nothing until resynced", self.instance
            )
            self._lapsed.set()
        self._extend_lease(started)

    def _extend_lease(self, renewed_at: float) -> None:
        """The lease as this process counts it: from when its renewal started, a margin short of the database's."""
        self.lease_until = renewed_at + self.config.server.instance_lease_seconds - LEASE_SAFETY_SECONDS

    def heartbeat(self, stopping: threading.Event) -> None:
        """Renew the lease every SYNC_INTERVAL_SECONDS until `stopping` is set (the lease thread's loop)."""
        while not stopping.wait(SYNC_INTERVAL_SECONDS):
            self.renew_lease()

    def holds_lease(self) -> bool:
        return time.monotonic() < self.lease_until and not self._lapsed.is_set()

    def release(self) -> None:
        instances.release(
            self.meta, self.region.name, self.instance, self.owner, self.config.server.instance_lease_seconds
        )

    # assignments
    def hold_coordination(self) -> bool:
        """Take the region's coordinator lease if free, renew it if held: whether this instance coordinates."""
        lease = self.config.server.instance_lease_seconds
        return instances.hold_coordinator(self.meta, self.region.name, self.instance, self.owner, lease)

    def place(self) -> None:
        """Place the region's replicas and pick their leaders (the coordinator's job)."""
        placement.rebalance(self.meta, self.config, self.region.name, coordinator=self.owner)

    def observe(self) -> tuple[int, frozenset[tuple[int, bool, bool]]]:
        """What tells whether a sync has anything new to read: the metadata store's generation and which of the
        region's instances are live or within their grace period (which the clock changes, not a write)."""
        server = self.config.server
        seen = instances.liveness(
            self.meta, self.region.name, server.instance_lease_seconds, server.instance_offline_grace_seconds
        )
        return self.meta.generation(), seen

    def needs_sync(self) -> bool:
        """Whether this instance's own state asks for a sync, whatever the metadata store says: its lease lapsed
        (leaderships to read afresh)."""
        return self._lapsed.is_set()

    def sync_assignments(self) -> dict[PartitionKey, Assignment]:
        """Read this instance's assignments afresh (a lapsed lease is trusted again from them)."""
        lapsed = self._lapsed.is_set()  # read before the assignments: a lapse after this waits for the next sync
        self.assignments = placement.assignments(self.meta, self.region.name, self.instance)
        if lapsed:
            self._lapsed.clear()
        return self.assignments

    def leads(self, key: PartitionKey) -> Callable[[], bool]:
        """Whether this instance leads the partition now, its lease running (`leader_epoch` says under which epoch)."""
        return lambda: self.leader_epoch(key) is not None

    # leadership
    def leader_epoch(self, key: PartitionKey) -> int | None:
        """The epoch this instance leads the partition under, its lease running; None if it does not lead it."""
        assignment = self.assignments.get(key)
        if assignment is None or not assignment.leader or not self.holds_lease():
            return None
        return assignment.epoch

    def leading(self, key: PartitionKey) -> Leading | None:
        """What a replica of the partition asks to lead it outside the source region (None in the source region,
        where the push writes the version topic)."""
        if self.is_source:
            return None
        store, number, partition = key
        source = self.config.region(self.config.source_region)

        def recorded(epoch: int) -> int | None:
            assignment = self.assignments.get(key)
            if assignment is None or self.leader_epoch(key) != epoch:
                return None
            return assignment.progress

        def record(epoch: int, position: int, replicated: bool) -> bool:
            try:
                return placement.record_progress(
                    self.meta, store, number, self.region.name, partition, epoch, position, replicated
                )
            except Exception:  # noqa: BLE001 - a position only helps a successor: its lease still fences this one
                log.exception("cannot record the position of %s v%d p%d", *key)
                return True

        upstream = Upstream(source.kafka_bootstrap, source.version_topic(store, number))
        epoch = functools.partial(self.leader_epoch, key)
        return Leading(upstream, epoch, recorded, record, self.config.kafka.producer_config)

    def note_replicated(self, completed: Callable[[PartitionKey], bool]) -> None:
        """A partition this instance leads whose replica took END_OF_PUSH while it followed (its predecessor
        produced it): its replication is over (what lets the coordinator move its lead, `placement`)."""
        if self.is_source:
            return
        for key, assignment in self.assignments.items():
            if assignment.leader and not assignment.replicated and completed(key):
                placement.record_progress(self.meta, *key[:2], self.region.name, key[2], assignment.epoch, 0, True)
