"""Replica placement, leadership and readiness in a replicated region, on a real (SQLite) metadata store: the
coordinator's rules (`controller.placement`) and the instances' leases (`controller.instances`)."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select, update

from tests.support.platform import SCHEMAS, make_platform_env
from tests.support.topics import InMemoryTopics
from venice_core.config import ClusterConfig
from venice_core.controller import instances, placement, stores, versions
from venice_core.controller.instances import InstanceAlreadyRunning
from venice_core.errors import ConfigError
from venice_core.meta import MetadataStore
from venice_core.meta.db import database_now
from venice_core.meta.models import PartitionLeader, RegionCoordinator, RegionInstance, Replica
from venice_core.model.status import ExecutionStatus
from venice_core.orchestration.airflow.run_following import describe_progress

REGION = "dc-1"
LEASE = 5.0


@pytest.fixture
def replicated(tmp_path: Path) -> ClusterConfig:
    """Three instances in every region, a short grace period."""
    extra = {f"region.{r}.instances": "3" for r in ("dc-0", "dc-1", "dc-2")}
    return make_platform_env(tmp_path / "home", {**extra, "instance.offline.grace.seconds": "30"}).config


def _store(meta: MetadataStore, config: ClusterConfig, partitions: int = 6, **options: object) -> str:
    key, value = (SCHEMAS / "user_key.avsc").read_text(), (SCHEMAS / "user_value_v1.avsc").read_text()
    stores.create_store(meta, config, "users", key, value, partitions=partitions, **options)  # type: ignore[arg-type]
    versions.create_version(meta, config, "users", "job-1", topics=InMemoryTopics())
    return "users"


def _register(meta: MetadataStore, *numbers: int) -> dict[int, str]:
    owners = {n: f"elsewhere:{n}:{os.urandom(4).hex()}" for n in numbers}
    for n, owner in owners.items():
        instances.register(meta, REGION, n, "127.0.0.1", 7000 + n, owner, 1000 + n, LEASE)
    return owners


def owner_of(meta: MetadataStore, instance: int) -> str:
    with meta.session() as session:
        row = session.get(RegionInstance, (REGION, instance))
        assert row is not None
        return row.owner


def _age(meta: MetadataStore, instance: int, seconds: float) -> None:
    """The instance's last renewal `seconds` ago by the database's clock (as if it stopped renewing then)."""
    with meta.session() as session:
        session.execute(
            update(RegionInstance)
            .where(RegionInstance.region == REGION, RegionInstance.instance == instance)
            .values(heartbeat_at=database_now() - seconds)
        )


def _replicas(meta: MetadataStore) -> dict[int, list[int]]:
    """partition -> instances holding it."""
    with meta.session() as session:
        held: dict[int, list[int]] = {}
        for r in session.scalars(select(Replica).where(Replica.region == REGION)):
            held.setdefault(r.partition, []).append(r.instance)
        return {p: sorted(i) for p, i in held.items()}


def _leaders(meta: MetadataStore) -> dict[int, tuple[int, int]]:
    with meta.session() as session:
        rows = session.scalars(select(PartitionLeader).where(PartitionLeader.region == REGION))
        return {r.partition: (r.instance, r.epoch) for r in rows}


def _complete(meta: MetadataStore, min_ready: int = 2) -> None:
    with meta.session() as session:
        rows = [(r.partition, r.instance) for r in session.scalars(select(Replica).where(Replica.region == REGION))]
    for partition, instance in rows:
        versions.report_replica(
            meta, "users", 1, REGION, partition, instance, ExecutionStatus.COMPLETED, 10, 10, "", min_ready
        )


def test_replicas_are_spread_evenly_on_distinct_instances_with_one_leader_each(
    meta: MetadataStore, replicated: ClusterConfig
) -> None:
    _store(meta, replicated)
    _register(meta, 0, 1, 2)
    placement.rebalance(meta, replicated, REGION)
    held = _replicas(meta)
    assert sorted(held) == list(range(6))
    assert all(len(set(i)) == 2 for i in held.values())  # the default factor: min(2, 3 instances)
    assert sorted(Counter(i for h in held.values() for i in h).values()) == [4, 4, 4]
    leaders = _leaders(meta)
    assert all(leaders[p][0] in held[p] and leaders[p][1] == 1 for p in range(6))
    assert placement.rebalance(meta, replicated, REGION) == 0  # stable: nothing to change
    mine = placement.assignments(meta, REGION, 0)
    assert {key[2] for key in mine} == {p for p, i in held.items() if 0 in i}
    assert {key[2] for key, a in mine.items() if a.leader} == {p for p, (i, _) in leaders.items() if i == 0}


def test_leadership_moves_when_a_lease_runs_out_and_replicas_only_after_the_grace_period(
    meta: MetadataStore, replicated: ClusterConfig
) -> None:
    _store(meta, replicated)
    _register(meta, 0, 1, 2)
    placement.rebalance(meta, replicated, REGION)
    _complete(meta)
    before, leaders = _replicas(meta), _leaders(meta)
    led_by_1 = [p for p, (i, _) in leaders.items() if i == 1]
    assert led_by_1

    _age(meta, 1, LEASE + 1)  # gone, within the grace period: leadership moves, replicas stay
    placement.rebalance(meta, replicated, REGION)
    after = _leaders(meta)
    for p in led_by_1:
        assert after[p][0] != 1 and after[p][1] == leaders[p][1] + 1, "a new leader under the next epoch"
        assert not placement.record_progress(meta, "users", 1, REGION, p, leaders[p][1], 99)  # deposed: refused
        assert placement.record_progress(meta, "users", 1, REGION, p, after[p][1], 99)
    assert _replicas(meta) == before

    _age(meta, 1, 31)  # past the grace period: its replicas are placed on the others
    placement.rebalance(meta, replicated, REGION)
    held = _replicas(meta)
    assert all(1 not in i and len(i) == 2 for i in held.values())


def test_a_joining_instance_gets_its_share_without_a_partition_going_under_replicated(
    meta: MetadataStore, replicated: ClusterConfig
) -> None:
    _store(meta, replicated)
    _register(meta, 0, 1)
    placement.rebalance(meta, replicated, REGION)
    _complete(meta)
    assert Counter(i for h in _replicas(meta).values() for i in h) == {0: 6, 1: 6}

    _register(meta, 2)
    instances.set_spare(meta, REGION, 2, owner_of(meta, 2), ["users/1/4", "users/1/5"])  # data it can resume
    placement.rebalance(meta, replicated, REGION)
    assert {4, 5} <= {p for p, held in _replicas(meta).items() if 2 in held}  # its own data first
    for _ in range(10):  # each round: new replicas on the joiner; a surplus dropped once its partition has 2 ready
        placement.rebalance(meta, replicated, REGION)
        with meta.session() as session:
            rows = list(session.scalars(select(Replica).where(Replica.region == REGION)))
        ready = Counter(r.partition for r in rows if r.status == ExecutionStatus.COMPLETED)
        assert all(ready[p] >= 2 for p in range(6)), "a move left a partition with fewer than 2 ready replicas"
        _complete(meta)
    assert sorted(Counter(i for h in _replicas(meta).values() for i in h).values()) == [4, 4, 4]


def test_a_partition_is_ready_once_min_ready_replicas_are(meta: MetadataStore, replicated: ClusterConfig) -> None:
    _store(meta, replicated, partitions=1)
    _register(meta, 0, 1, 2)
    placement.rebalance(meta, replicated, REGION)
    first, second = _replicas(meta)[0]
    report = versions.report_replica
    report(meta, "users", 1, REGION, 0, first, ExecutionStatus.COMPLETED, 5, 5, "", 2)
    assert versions.job_status(meta, "users", 1).regions[REGION].status is ExecutionStatus.PROGRESS
    progress = versions.ingestion_progress(meta, "users", 1)[REGION]
    assert (progress.replicas_ready, progress.replicas) == (1, 2)
    assert describe_progress(progress).endswith(", 1 of 2 replicas ready")
    report(meta, "users", 1, REGION, 0, second, ExecutionStatus.COMPLETED, 5, 5, "", 2)
    assert versions.job_status(meta, "users", 1).regions[REGION].status is ExecutionStatus.COMPLETED
    report(meta, "users", 1, REGION, 0, 9, ExecutionStatus.ERROR, 5, 5, "not placed there", 2)  # ignored
    assert versions.job_status(meta, "users", 1).regions[REGION].status is ExecutionStatus.COMPLETED


def test_only_a_report_that_moves_a_status_moves_the_generation(meta: MetadataStore, replicated: ClusterConfig) -> None:
    """The region servers read the metadata store in full when its generation moves: a replica's or a leader's
    progress alone moves nothing (a push's reports woke every instance about three times a second), a status that
    moves (a replica, its partition, a leader's replication over) does."""
    _store(meta, replicated, partitions=1)
    _register(meta, 0, 1, 2)
    placement.rebalance(meta, replicated, REGION)
    first, second = _replicas(meta)[0]
    epoch = _leaders(meta)[0][1]
    report = versions.report_replica
    generation = meta.generation()

    def moved() -> bool:
        nonlocal generation
        before, generation = generation, meta.generation()
        return generation != before

    report(meta, "users", 1, REGION, 0, first, ExecutionStatus.STARTED, 5, 5, "", 2)
    assert moved()  # NEW -> STARTED
    report(meta, "users", 1, REGION, 0, first, ExecutionStatus.STARTED, 50, 50, "", 2)
    assert not moved()  # progress
    assert versions.ingestion_progress(meta, "users", 1)[REGION].records == 50  # written all the same
    report(meta, "users", 1, REGION, 0, second, ExecutionStatus.COMPLETED, 60, 60, "", 2)
    assert moved()
    report(meta, "users", 1, REGION, 0, first, ExecutionStatus.COMPLETED, 60, 60, "", 2)
    assert moved()  # the partition COMPLETED: two ready
    assert placement.record_progress(meta, "users", 1, REGION, 0, epoch, 99)
    assert not moved()
    assert placement.record_progress(meta, "users", 1, REGION, 0, epoch, 120, replicated=True)
    assert moved()
    assert placement.record_progress(meta, "users", 1, REGION, 0, epoch, 130, replicated=True)
    assert not moved()


def test_an_instance_running_elsewhere_is_refused_and_a_dead_ones_lease_taken_over(meta: MetadataStore) -> None:
    owners = _register(meta, 0)
    with pytest.raises(InstanceAlreadyRunning, match="instance 0 of region dc-1 is already running"):
        instances.register(meta, REGION, 0, "127.0.0.1", 7000, instances.owner_token(), os.getpid(), LEASE)
    assert instances.renew(meta, REGION, 0, owners[0])  # the first keeps its lease

    _age(meta, 0, LEASE + 1)  # its lease ran out: taken over, and the first learns it at its next renewal
    mine = instances.owner_token()
    instances.register(meta, REGION, 0, "127.0.0.1", 7000, mine, os.getpid(), LEASE)
    assert not instances.renew(meta, REGION, 0, owners[0])
    assert instances.renew(meta, REGION, 0, mine)

    # A process of this machine that is gone (its pid free) holds no lease, however fresh.
    dead = f"{instances.owner_token().split(':')[0]}:{2**22 + 12345}:dead"
    instances.register(meta, REGION, 1, "127.0.0.1", 7001, dead, 2**22 + 12345, LEASE)
    instances.register(meta, REGION, 1, "127.0.0.1", 7001, instances.owner_token(), os.getpid(), LEASE)


def test_a_replication_factor_above_a_regions_instances_is_refused_at_create_and_update(
    meta: MetadataStore, replicated: ClusterConfig
) -> None:
    key, value = (SCHEMAS / "user_key.avsc").read_text(), (SCHEMAS / "user_value_v1.avsc").read_text()
    with pytest.raises(ConfigError, match="replication factor 4 is above the 3 instances of region dc-0"):
        stores.create_store(meta, replicated, "users", key, value, replication_factor=4)
    assert stores.list_stores(meta) == []
    stores.create_store(meta, replicated, "users", key, value, replication_factor=3)
    with pytest.raises(ConfigError, match="at least 1"):
        stores.update_store(meta, replicated, "users", replication_factor=0)
    assert stores.store_settings(meta, "users").replication_factor == 3


def test_routing_table_lists_ready_replicas_of_live_instances(meta: MetadataStore, replicated: ClusterConfig) -> None:
    _store(meta, replicated, partitions=2)
    _register(meta, 0, 1, 2)
    placement.rebalance(meta, replicated, REGION)
    _complete(meta)
    assert placement.routing_tables(meta, replicated, REGION) == {}  # no current version yet
    versions.swap_region(meta, "users", REGION, 1)
    table = placement.routing_tables(meta, replicated, REGION)["users"]
    held = _replicas(meta)
    assert table.version == 1 and table.partition_count == 2
    assert [sorted(a) for a in table.replicas] == [sorted(f"127.0.0.1:{7000 + i}" for i in held[p]) for p in (0, 1)]
    dead = held[0][0]
    _age(meta, dead, LEASE + 1)
    table = placement.routing_tables(meta, replicated, REGION)["users"]
    assert f"127.0.0.1:{7000 + dead}" not in table.replicas[0]


def test_only_the_coordinator_holding_the_lease_changes_the_placement(
    meta: MetadataStore, replicated: ClusterConfig
) -> None:
    _store(meta, replicated)
    _register(meta, 0, 1, 2)
    assert instances.hold_coordinator(meta, REGION, 0, "first", LEASE)
    assert not instances.hold_coordinator(meta, REGION, 1, "second", LEASE)  # held by another, still running
    assert placement.rebalance(meta, replicated, REGION, coordinator="second") == 0
    assert _replicas(meta) == {}
    assert placement.rebalance(meta, replicated, REGION, coordinator="first") > 0
    assert len(_replicas(meta)) == 6


def test_leaders_spread_over_instances_that_start_one_after_another(
    meta: MetadataStore, replicated: ClusterConfig
) -> None:
    _store(meta, replicated)
    _register(meta, 0)
    placement.rebalance(meta, replicated, REGION)
    assert {i for i, _ in _leaders(meta).values()} == {0}  # alone: it leads everything
    for partition, (_, epoch) in _leaders(meta).items():  # each replication over: a move interrupts nothing
        assert placement.record_progress(meta, "users", 1, REGION, partition, epoch, 10, replicated=True)
    _register(meta, 1, 2)
    for _ in range(6):
        placement.rebalance(meta, replicated, REGION)
        _complete(meta)
    counts = Counter(i for i, _ in _leaders(meta).values())
    assert max(counts.values()) - min(counts[i] for i in (0, 1, 2)) <= 1, counts
    assert all(_leaders(meta)[p][0] in _replicas(meta)[p] for p in range(6))


def test_a_long_wait_for_ingestion_says_how_many_replicas_are_ready_and_which_instances_are_down(
    meta: MetadataStore, replicated: ClusterConfig
) -> None:
    from types import SimpleNamespace

    from venice_core.rollout.steps import _waiting_on

    _store(meta, replicated, partitions=2)
    _register(meta, 0, 1, 2)
    placement.rebalance(meta, replicated, REGION)
    _age(meta, 1, LEASE + 1)
    rollout = SimpleNamespace(meta=meta, store="users", config=replicated)
    inputs = SimpleNamespace(rollout=rollout, version=SimpleNamespace(number=1), in_region=REGION)
    assert _waiting_on(inputs) == "NEW, 0 of 4 replicas ready; instance 1 of the region down"  # type: ignore[arg-type]


@pytest.mark.parametrize("skew", [45.0, -45.0])
def test_leases_are_written_and_judged_by_the_databases_clock_not_the_callers(
    meta: MetadataStore, replicated: ClusterConfig, monkeypatch: pytest.MonkeyPatch, skew: float
) -> None:
    """Callers whose clocks disagree agree on leases: each is written and judged by the metadata database's clock.
    A caller's clock here is Python's `time.time`, shifted; SQLite's clock, the C library's, is not, as a PostgreSQL
    server's would not be. Leases written by a caller `skew` seconds off, and by one whose clock is right, are judged
    the same by callers with either clock: running, none taken early; run out, each free at once, none held late."""
    real_time = time.time

    def clock(offset: float) -> None:
        monkeypatch.setattr(time, "time", lambda: real_time() + offset)

    def judged_by_every_clock(live: bool) -> None:
        for offset in (0.0, skew, -skew):
            clock(offset)
            assert instances.liveness(meta, REGION, LEASE, 30) == {(0, live, True), (1, live, True)}, offset
            if not live:
                expire_coordinator()  # each caller finds it run out
            assert instances.hold_coordinator(meta, REGION, 2, f"third:{offset}", LEASE) is not live, offset
            if live:
                with pytest.raises(InstanceAlreadyRunning):
                    instances.register(meta, REGION, 0, "127.0.0.1", 7000, "elsewhere:9:x", 9, LEASE)

    def expire_coordinator() -> None:
        with meta.session() as session:
            session.execute(update(RegionCoordinator).values(expires_at=database_now() - 1))

    _store(meta, replicated)
    clock(skew)  # instance 0 and the coordinator's lease, written by a caller whose clock is off
    owners = _register(meta, 0)
    assert instances.renew(meta, REGION, 0, owners[0])
    assert instances.hold_coordinator(meta, REGION, 0, owners[0], LEASE)
    clock(0.0)  # instance 1, by a caller whose clock is right
    owners |= _register(meta, 1)
    with meta.session() as session:
        heartbeats = [row.heartbeat_at for row in session.scalars(select(RegionInstance))]
        expires_at = session.scalars(select(RegionCoordinator)).one().expires_at
    assert all(abs(at - real_time()) < 2 for at in heartbeats) and abs(expires_at - LEASE - real_time()) < 2
    judged_by_every_clock(live=True)
    clock(skew)
    assert placement.rebalance(meta, replicated, REGION, coordinator=owners[0]) > 0
    assert {instance for instance, _epoch in _leaders(meta).values()} == {0, 1}  # both live, both lead

    for instance in (0, 1):
        _age(meta, instance, LEASE + 1)  # by the database's clock
    judged_by_every_clock(live=False)  # the coordinator's lease taken by each caller in turn, at once
    clock(-abs(skew))  # a caller whose clock is behind takes an instance whose lease ran out, at once
    instances.register(meta, REGION, 0, "127.0.0.1", 7000, "elsewhere:9:x", 9, LEASE)
