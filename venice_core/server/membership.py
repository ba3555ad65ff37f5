"""A region-server instance's membership of its region: its registration and lease in the metadata store (renewed
every second), the replicas the region's placement assigns it as of the last sync, and, outside the source region, a
`Replicator` for each partition it leads (a leader produces only while its lease runs)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from venice_core.config import ClusterConfig, RegionConfig
from venice_core.controller import instances, placement
from venice_core.controller.placement import Assignment, PartitionKey
from venice_core.errors import VeniceError
from venice_core.ingestion.replication import Replicator
from venice_core.meta import MetadataStore

log = logging.getLogger("venice_core.server.region_server")  # the server's one logger: its lines as they were
SYNC_INTERVAL_SECONDS = 1.0
# A leader stops producing this long before its lease runs out in the metadata store: the clocks of two machines
# and a renewal in flight differ by less.
LEASE_SAFETY_SECONDS = 1.0


class InstanceTakenOver(VeniceError):
    """Another process renewed this instance's registration: this one stops."""


@dataclass
class Leadership:
    """A partition this instance leads outside the source region: its replicator's thread."""

    epoch: int
    stop: threading.Event
    thread: threading.Thread


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
        self.leading: dict[PartitionKey, Leadership] = {}
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
        (leaderships to read afresh), or a replicator stopped (to start again from its progress)."""
        return self._lapsed.is_set() or any(not lead.thread.is_alive() for lead in self.leading.values())

    def sync_assignments(self) -> dict[PartitionKey, Assignment]:
        """Read this instance's assignments afresh (a lapsed lease is trusted again from them)."""
        lapsed = self._lapsed.is_set()  # read before the assignments: a lapse after this waits for the next sync
        self.assignments = placement.assignments(self.meta, self.region.name, self.instance)
        if lapsed:
            self._lapsed.clear()
        return self.assignments

    def leads(self, key: PartitionKey, epoch: int | None = None) -> Callable[[], bool]:
        """Whether this instance leads the partition now (under `epoch`, if given), its lease running."""

        def leads() -> bool:
            assignment = self.assignments.get(key)
            return (
                assignment is not None
                and assignment.leader
                and (epoch is None or assignment.epoch == epoch)
                and self.holds_lease()
            )

        return leads

    # leadership
    def _lead(self, assignment: Assignment) -> None:
        """Replicate a partition this instance leads outside the source region, from its predecessor's progress."""
        key = (assignment.store, assignment.number, assignment.partition)
        source = self.config.region(self.config.source_region)
        epoch = assignment.epoch

        def record(position: int, replicated: bool) -> bool:
            return placement.record_progress(self.meta, *key[:2], self.region.name, key[2], epoch, position, replicated)

        replicator = Replicator(
            source.kafka_bootstrap,
            source.version_topic(assignment.store, assignment.number),
            self.region.kafka_bootstrap,
            self.region.version_topic(assignment.store, assignment.number),
            assignment.partition,
            assignment.progress,
            self.leads(key, epoch),
            record,
        )
        stop = threading.Event()

        def run() -> None:
            try:
                replicator.run(stop)
            except Exception as exc:  # noqa: BLE001 - a ReplicationError or any other: led again from its progress
                log.error("replication of %s v%d p%d failed: %s", *key, exc)

        thread = threading.Thread(target=run, daemon=True, name=f"lead-{key[0]}-v{key[1]}-p{key[2]}")
        self.leading[key] = Leadership(epoch, stop, thread)
        thread.start()

    def sync_leadership(self, hosts: Callable[[PartitionKey], bool]) -> None:
        """Stop the replicators of partitions no longer led (under their epoch); start one for each partition led,
        not yet replicated, of a version this instance `hosts`."""
        for key, leadership in list(self.leading.items()):
            assignment = self.assignments.get(key)
            over = not leadership.thread.is_alive()
            if over or assignment is None or not assignment.leader or assignment.epoch != leadership.epoch:
                if not over:
                    log.warning(
                        "no longer leading %s v%d p%d (epoch %d): its replication stops", *key, leadership.epoch
                    )
                leadership.stop.set()
                if not over:
                    leadership.thread.join(timeout=10)
                del self.leading[key]
        if self.is_source:
            return  # the push writes the source region's version topic: its leaders replicate nothing
        for key, assignment in self.assignments.items():
            if assignment.leader and not assignment.replicated and key not in self.leading and hosts(key):
                self._lead(assignment)

    def stop_leading(self) -> None:
        for leadership in self.leading.values():
            leadership.stop.set()
