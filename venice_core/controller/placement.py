"""Where the replicas of each partition live in a region, which replica leads, and the routing table clients read.

The region's coordinator (an instance holding the lease of `instances.hold_coordinator`) runs `rebalance` every
second; it is the only writer of `replicas` rows (an instance only updates its replicas' status) and of
`partition_leaders`. Its rules, as Helix's delayed rebalancer has them:

- Every partition of every version the region hosts has `replication_factor` replicas (the store's, default
  min(2, the region's instances)) on distinct instances, each new one on the least loaded instance, so replicas
  spread evenly. A replica stays where it is while its instance is live or back within the grace period
  (`instance.offline.grace.seconds`): a restart reshuffles nothing. Past the grace period it is placed again.
- An instance that joins takes a share: a ready partition gets an extra replica on an instance holding at least
  two fewer, and the replica on the most loaded holder is dropped once the partition has enough ready ones without
  it (the new one caught up first, so a move never leaves a partition under-replicated).
- Each partition has one leader: kept while its instance's lease runs; otherwise the most advanced live replica
  leads, under the next epoch. A deposed leader's instance, paused past its lease, finds on waking that its lease
  ran out and produces nothing more (`ingestion.leader`); records it had in flight are exact copies the new
  leader writes again, which every consumer's DIV drops as duplicates.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from venice_core.config import ClusterConfig
from venice_core.controller.versions import current_versions, hostable_versions
from venice_core.meta import MetadataStore
from venice_core.meta.db import database_now, database_time, rows_matched
from venice_core.meta.models import PartitionLeader, RegionCoordinator, RegionInstance, Replica
from venice_core.model.status import ExecutionStatus
from venice_core.protocol.partitioner_config import PartitionerConfig

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int, int]  # store, version, partition
# Replicas added in one round to give a joining instance its share: moves are gradual, each one caught up first.
MOVES_PER_ROUND = 8


def key_of(row: Replica | PartitionLeader) -> PartitionKey:
    return (row.store_name, row.number, row.partition)


def spare_name(key: PartitionKey) -> str:
    """How `RegionInstance.spare` names a partition."""
    return f"{key[0]}/{key[1]}/{key[2]}"


def replication_factor(setting: int | None, instances: int) -> int:
    """A store's replicas per partition in a region of `instances` instances."""
    return setting if setting else min(2, instances)


def min_ready(config: ClusterConfig, setting: int | None, region: str) -> int:
    """Ready replicas a partition needs before the region may swap to its version."""
    factor = replication_factor(setting, config.region(region).instances)
    return min(config.server.min_ready_replicas, factor) if config.server.min_ready_replicas else factor


@dataclass(frozen=True)
class Assignment:
    """A replica an instance holds, and whether it leads its partition (with the epoch it leads under)."""

    store: str
    number: int
    partition: int
    leader: bool
    epoch: int
    progress: int  # the leader's acknowledged replication position (a source offset)
    replicated: bool  # the leader's replication is over (END_OF_PUSH copied and acknowledged)


@dataclass(frozen=True)
class RoutingTable:
    """A store's current version in a region: each partition's ready replicas (addresses of live instances)."""

    store: str
    region: str
    version: int
    partition_count: int
    replicas: tuple[tuple[str, ...], ...]
    partitioner: PartitionerConfig = field(default_factory=PartitionerConfig)  # the version's: a client's routing

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "region": self.region,
            "version": self.version,
            "partition_count": self.partition_count,
            "replicas": [list(addresses) for addresses in self.replicas],
            "partitioner": self.partitioner.to_json(),
        }


def rebalance(meta: MetadataStore, config: ClusterConfig, region: str, coordinator: str | None = None) -> int:
    """One round of the coordinator's work in `region`: replicas placed, moved and dropped, leaders picked. Returns
    how many rows it changed. `coordinator`: the lease holder's token, checked (and the lease's row locked) in the
    same transaction, so a coordinator whose lease another instance took meanwhile changes nothing."""
    configured = config.region(region).instances
    with meta.session() as session:
        if coordinator is not None:
            held = session.execute(
                update(RegionCoordinator)
                .where(
                    RegionCoordinator.region == region,
                    RegionCoordinator.owner == coordinator,
                    RegionCoordinator.expires_at > database_now(),
                )
                .values(expires_at=RegionCoordinator.expires_at)
                .execution_options(announce=False)  # a lock on the lease's row, no change
            )
            if rows_matched(held) != 1:
                return 0
        now = database_time(session)  # leases and leaderships are judged by the database's clock, as written
        registered = [
            row
            for row in session.scalars(select(RegionInstance).where(RegionInstance.region == region))
            if row.instance < configured
        ]
        live = {row.instance for row in registered if row.heartbeat_at > now - config.server.instance_lease_seconds}
        present = {
            row.instance for row in registered if row.heartbeat_at > now - config.server.instance_offline_grace_seconds
        }
        if not live:
            return 0
        spare = {row.instance: set(row.spare or []) for row in registered}
        versions = {(v.store, v.number): v for v in hostable_versions(session, region)}
        holders: dict[PartitionKey, list[Replica]] = {}
        changed = 0
        for replica in session.scalars(select(Replica).where(Replica.region == region)):
            key = key_of(replica)
            if (key[0], key[1]) not in versions or replica.instance not in present:
                session.delete(replica)
                changed += 1
                if (key[0], key[1]) in versions:
                    log.info("%s: instance %d gone past the grace period: its replica of %s v%d p%d is placed again",
                             region, replica.instance, *key)  # fmt: skip
            else:
                holders.setdefault(key, []).append(replica)
        load = Counter(r.instance for rows in holders.values() for r in rows)
        leaders = _leaders(session, region)
        partitions = [
            (key, min(replication_factor(version.replication_factor, configured), len(present)))
            for version in versions.values()
            for key in ((version.store, version.number, p) for p in range(version.partition_count))
        ]
        for key, factor in partitions:
            changed += _place(session, region, key, holders.setdefault(key, []), factor, present, live, load, spare)
        # Moves to a joining instance one wave at a time: a wave starts once the last one's replicas caught up and
        # their surplus was dropped, so the loads it decides on are the real ones.
        if not any(len(holders[key]) > factor for key, factor in partitions):
            moves = MOVES_PER_ROUND
            # Partitions some instance has data of first: a restarted instance takes back what it can resume.
            wave = sorted(partitions, key=lambda item: not any(spare_name(item[0]) in s for s in spare.values()))
            for key, factor in wave:
                if moves == 0:
                    break
                leader = leaders.get(key)
                movable = [r for r in holders[key] if leader is None or r.instance != leader.instance]
                if _move_to_joiner(session, region, key, holders[key], movable, factor, live, load, spare):
                    moves -= 1
                    changed += 1
        led = Counter(leader.instance for key, leader in leaders.items() if (key[0], key[1]) in versions)
        for key, factor in partitions:
            changed += _drop_surplus(session, holders[key], factor, leaders.get(key), load)
            changed += _lead(session, region, key, holders[key], live, leaders.get(key), led, now)
        quiet = region == config.source_region  # there, a leader replicates nothing a move would interrupt
        changed += _spread_leaders([(holders[k], leaders.get(k)) for k, _ in partitions], live, led, quiet, now)
        for key, leader in leaders.items():
            if (key[0], key[1]) not in versions:
                session.delete(leader)
                changed += 1
        return changed


def _leaders(session: Session, region: str) -> dict[PartitionKey, PartitionLeader]:
    return {
        key_of(row): row for row in session.scalars(select(PartitionLeader).where(PartitionLeader.region == region))
    }


def _new_replica(session: Session, region: str, key: PartitionKey, instance: int) -> Replica:
    log.info("%s: a replica of %s v%d p%d placed on instance %d", region, *key, instance)
    now = time.time()
    replica = Replica(
        store_name=key[0],
        number=key[1],
        region=region,
        partition=key[2],
        instance=instance,
        status=ExecutionStatus.NEW,
        offset=-1,
        records=0,
        details="",
        created_at=now,
        updated_at=now,
    )
    session.add(replica)
    return replica


def _place(
    session: Session,
    region: str,
    key: PartitionKey,
    rows: list[Replica],
    factor: int,
    present: set[int],
    live: set[int],
    load: Counter[int],
    spare: dict[int, set[str]],
) -> int:
    """Replicas added until the partition has `factor`, each on the least loaded instance (live ones first, and one
    with the partition's data on disk before them)."""
    added = 0
    name = spare_name(key)
    while len(rows) < factor:
        held = {r.instance for r in rows}
        candidates = sorted(present - held, key=lambda i: (i not in live, name not in spare.get(i, ()), load[i], i))
        if not candidates:
            break
        rows.append(_new_replica(session, region, key, candidates[0]))
        load[candidates[0]] += 1
        added += 1
    return added


def _move_to_joiner(
    session: Session,
    region: str,
    key: PartitionKey,
    rows: list[Replica],
    movable: list[Replica],
    factor: int,
    live: set[int],
    load: Counter[int],
    spare: dict[int, set[str]],
) -> bool:
    """A ready, fully replicated partition gets an extra replica on a live instance holding at least two fewer
    than its most loaded `movable` holder (not the leader); `_drop_surplus` drops that holder's once the new one is
    ready."""
    if len(rows) != factor or not movable or any(r.status != ExecutionStatus.COMPLETED for r in rows):
        return False
    held = {r.instance for r in rows}
    busiest = max((r.instance for r in movable), key=lambda i: (load[i], i))
    name = spare_name(key)
    candidates = sorted(
        (i for i in live - held if load[i] <= load[busiest] - 2),
        key=lambda i: (name not in spare.get(i, ()), load[i], i),
    )
    if not candidates:
        return False
    rows.append(_new_replica(session, region, key, candidates[0]))
    load[candidates[0]] += 1
    load[busiest] -= 1  # the replica `_drop_surplus` will drop: the wave's later moves see the loads it leaves
    return True


def _drop_surplus(
    session: Session, rows: list[Replica], factor: int, leader: PartitionLeader | None, load: Counter[int]
) -> int:
    """Replicas beyond `factor` dropped, ready ones from the most loaded holders, only while `factor` ready ones
    remain: a replica catching up to take another's place is never the one dropped."""
    dropped = 0
    while len(rows) > factor:
        ready = [r for r in rows if r.status == ExecutionStatus.COMPLETED]
        if len(ready) <= factor:
            break
        candidates = [r for r in ready if leader is None or r.instance != leader.instance]
        if not candidates:
            break
        victim = min(candidates, key=lambda r: (-load[r.instance], -r.instance))
        rows.remove(victim)
        session.delete(victim)
        log.info(
            "%s: the replica of %s v%d p%d on instance %d dropped", victim.region, *key_of(victim), victim.instance
        )
        load[victim.instance] -= 1
        dropped += 1
    return dropped


def _lead(
    session: Session,
    region: str,
    key: PartitionKey,
    rows: list[Replica],
    live: set[int],
    leader: PartitionLeader | None,
    led: Counter[int],
    now: float,
) -> int:
    """The leader kept while its instance is live and holds the partition; else a live replica leads under the next
    epoch: a ready one first, then the one on the instance leading fewest partitions (leaders spread evenly)."""
    held = {r.instance for r in rows}
    if leader is not None and leader.instance in live and leader.instance in held:
        return 0
    candidates = [r for r in rows if r.instance in live]
    if not candidates:
        return 0
    best = min(candidates, key=lambda r: (r.status != ExecutionStatus.COMPLETED, led[r.instance], r.instance))
    led[best.instance] += 1
    if leader is not None:
        led[leader.instance] -= 1
    if leader is None:
        session.add(
            PartitionLeader(
                store_name=key[0],
                number=key[1],
                region=region,
                partition=key[2],
                instance=best.instance,
                epoch=1,
                progress=0,
                replicated=False,
                updated_at=now,
            )
        )
    else:
        leader.instance, leader.epoch, leader.updated_at = best.instance, leader.epoch + 1, now
    log.info("%s: %s v%d p%d led by instance %d (epoch %d)", region, *key, best.instance, leader.epoch if leader else 1)
    return 1


def _spread_leaders(
    partitions: list[tuple[list[Replica], PartitionLeader | None]],
    live: set[int],
    led: Counter[int],
    quiet: bool,
    now: float,
) -> int:
    """Leaders spread evenly: a partition led by an instance leading at least two more than another live, ready
    replica's instance hands its lead over (the next epoch), a few a round. Instances that start one after another
    would otherwise leave the first leading everything. Only a partition whose leader has nothing in flight moves:
    its replication over (or in the source region, where a leader replicates nothing)."""
    moved = 0
    for rows, leader in partitions:
        if moved == MOVES_PER_ROUND:
            break
        if leader is None or not (quiet or leader.replicated):
            continue
        ready = [r.instance for r in rows if r.instance in live and r.status == ExecutionStatus.COMPLETED]
        target = min(ready, key=lambda i: (led[i], i), default=None)
        if target is None or led[leader.instance] - led[target] < 2:
            continue
        led[leader.instance] -= 1
        led[target] += 1
        leader.instance, leader.epoch, leader.updated_at = target, leader.epoch + 1, now
        log.info("%s: %s v%d p%d led by instance %d (epoch %d), spreading leaders", leader.region, *key_of(leader),
                 target, leader.epoch)  # fmt: skip
        moved += 1
    return moved


def assignments(meta: MetadataStore, region: str, instance: int) -> dict[PartitionKey, Assignment]:
    """The replicas placed on one instance, with its leaderships."""
    with meta.session() as session:
        leaders = _leaders(session, region)
        held: dict[PartitionKey, Assignment] = {}
        for replica in session.scalars(select(Replica).where(Replica.region == region, Replica.instance == instance)):
            key = key_of(replica)
            leader = leaders.get(key)
            leads = leader is not None and leader.instance == instance
            held[key] = Assignment(
                key[0],
                key[1],
                key[2],
                leads,
                leader.epoch if leader is not None and leads else 0,
                leader.progress if leader is not None else 0,
                leader.replicated if leader is not None else False,
            )
        return held


def record_progress(
    meta: MetadataStore,
    store: str,
    number: int,
    region: str,
    partition: int,
    epoch: int,
    progress: int,
    replicated: bool = False,
) -> bool:
    """The leader's replication acknowledged up to `progress` (and over, once `replicated`); False, with nothing
    recorded, if the partition has another leader now."""
    with meta.session() as session:
        leader = session.get(PartitionLeader, (store, number, region, partition))
        if leader is None or leader.epoch != epoch:
            return False
        leader.progress = max(leader.progress, progress)
        leader.replicated = leader.replicated or replicated
        return True


def routing_tables(meta: MetadataStore, config: ClusterConfig, region: str) -> dict[str, RoutingTable]:
    """Every store's routing table in the region: its current version's ready replicas on live instances."""
    current = current_versions(meta, region)
    with meta.session() as session:
        now = database_time(session)
        addresses = {
            row.instance: f"{row.host}:{row.port}"
            for row in session.scalars(select(RegionInstance).where(RegionInstance.region == region))
            if row.heartbeat_at > now - config.server.instance_lease_seconds
        }
        serving = {
            (v.store, v.number): v for v in hostable_versions(session, region) if current.get(v.store) == v.number
        }
        counts = {key: version.partition_count for key, version in serving.items()}
        ready: dict[PartitionKey, list[str]] = {}
        for replica in session.scalars(
            select(Replica).where(Replica.region == region, Replica.status == ExecutionStatus.COMPLETED)
        ):
            if current.get(replica.store_name) == replica.number and replica.instance in addresses:
                ready.setdefault(key_of(replica), []).append(addresses[replica.instance])
    return {
        store: RoutingTable(
            store,
            region,
            number,
            counts[(store, number)],
            tuple(tuple(sorted(ready.get((store, number, p), []))) for p in range(counts[(store, number)])),
            serving[(store, number)].partitioner,
        )
        for store, number in current.items()
        if (store, number) in counts
    }
