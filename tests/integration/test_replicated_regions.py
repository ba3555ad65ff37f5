"""Replicated regions on real processes: two regions of three region-server instances each (replication factor 2),
on the session's Kafka broker, their leases short so that a lost instance is noticed within seconds.

The tests write versions themselves (START_OF_PUSH, records, END_OF_PUSH through the protocol writer, as
`test_server_recovery` does), so each fault happens at a known point of a push rather than racing a Spark job."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from sqlalchemy import create_engine, make_url, select, text

from tests.support.ingestion import wait_for_ingestion
from tests.support.leftovers import leaves_nothing, platform_parts
from tests.support.platform import VENICE, PlatformEnv, make_platform_env
from tests.support.reads import wait_for
from tests.support.topics import read_partition, through_end_of_push
from venice_core.client import ReadClient
from venice_core.client.serving import wait_until_served
from venice_core.controller import instances, stores, versions
from venice_core.embedded import platform, servers
from venice_core.errors import ComponentError
from venice_core.meta.models import PartitionLeader, RegionInstance, Replica
from venice_core.model.status import ExecutionStatus, VersionStatus
from venice_core.nearline.writer import OnlineWriter
from venice_core.protocol import serde
from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.partitioner import partition_for
from venice_core.pubsub.control import send_end_of_push, send_start_of_push
from venice_core.pubsub.writer import VersionTopicWriter

REGIONS = ("dc-0", "dc-1")
INSTANCES = 3
PARTITIONS = 4
LEASE_SECONDS = 2
GRACE_SECONDS = 6


def _regions_settings(platform_env: PlatformEnv, prefix: str, lease_seconds: float) -> dict[str, str]:
    """REGIONS of INSTANCES region-server instances each, on the session's broker (no broker of their own), their
    topics under `prefix`, with short leases."""
    broker = platform_env.config.kafka.bootstrap
    settings = {
        "regions": ",".join(REGIONS),
        "kafka.embedded.enabled": "false",
        "instance.lease.seconds": str(lease_seconds),
        "instance.offline.grace.seconds": str(GRACE_SECONDS),
    }
    for region in REGIONS:
        settings |= {
            f"region.{region}.instances": str(INSTANCES),
            f"region.{region}.kafka.bootstrap.servers": broker,
            f"region.{region}.topic.prefix": f"{prefix}.{region}.",
        }
    return settings


@pytest.fixture(scope="module")
def replicated(platform_env: PlatformEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformEnv]:
    """Six region-server processes on the session's broker (no broker or Airflow of their own)."""
    extra = _regions_settings(platform_env, "replicated", LEASE_SECONDS)
    env = make_platform_env(tmp_path_factory.mktemp("replicated") / "home", extra)
    config = env.config
    try:
        platform.up(config, report=lambda _line: None)
        yield env
    finally:
        with leaves_nothing(*platform_parts(config)):
            platform.down(config, report=lambda _line: None)


# A process started with this directory first on its PYTHONPATH and VENICE_TEST_CLOCK_SKEW_SECONDS set reads its
# wall clock that far off (its `sitecustomize`); libfaketime breaks Python 3.11's sleeps.
SKEWED_CLOCK = Path(__file__).parents[1] / "support" / "skewed_clock"
SKEWS = {1: 45.0, 2: -45.0}  # dc-1's instance -> its wall clock's offset
# Leases of 4 s: at 2 s (renewed every second, a second kept locally as a margin) a renewal through PostgreSQL found
# the lease lapsed nearly every time on this machine.
SKEWED_LEASE_SECONDS = 4


@pytest.fixture(scope="module")
def skewed(
    platform_env: PlatformEnv, postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PlatformEnv]:
    """`replicated`'s layout on a PostgreSQL metadata store of its own (a database's clock every process shares,
    where SQLite's is each process's), dc-1's instance 1 with its clock 45 s ahead and instance 2 45 s behind."""
    database = f"skewed_{os.getpid()}"
    server = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        with server.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{database}"'))
    except BaseException:
        server.dispose()
        raise
    url = make_url(postgres_url).set(database=database).render_as_string(hide_password=False)
    extra = {**_regions_settings(platform_env, "skewed", SKEWED_LEASE_SECONDS), "metadata.db.url": url}
    env = make_platform_env(tmp_path_factory.mktemp("skewed") / "home", extra)
    config = env.config
    try:
        platform.up(config, report=lambda _line: None)
        for instance, skew in SKEWS.items():
            servers.stop(config, "dc-1", instance)
            path = os.pathsep.join(filter(None, [str(SKEWED_CLOCK), os.environ.get("PYTHONPATH")]))
            servers.start(config, "dc-1", instance, {"PYTHONPATH": path, "VENICE_TEST_CLOCK_SKEW_SECONDS": str(skew)})
        yield env
    finally:
        with leaves_nothing(*platform_parts(config)):
            platform.down(config, report=lambda _line: None)
        env.meta.dispose()
        with server.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
        server.dispose()


@dataclass
class Push:
    """A version written by the test: its records by partition, and writers that keep their producer identity."""

    env: PlatformEnv
    store: str
    number: int
    expected: dict[str, dict]
    rows: dict[int, list[tuple[bytes, bytes]]]
    writers: list[VersionTopicWriter] = field(default_factory=list)

    def write(self, fraction_from: float, fraction_to: float) -> None:
        for p, writer in enumerate(self.writers):
            part = sorted(self.rows[p])
            for key_bytes, value_bytes in part[int(len(part) * fraction_from) : int(len(part) * fraction_to)]:
                writer.put(key_bytes, value_bytes, 1, partition=p)
            writer.flush()

    def end(self) -> None:
        config = self.env.config
        for p, writer in enumerate(self.writers):
            writer.end_segment(p)
            writer.flush()
        counts = {str(p): len(self.rows[p]) for p in range(PARTITIONS)}
        send_end_of_push(config, self.store, self.number, PARTITIONS, f"job-{self.store}", counts)


def _start_push(env: PlatformEnv, prefix: str, records: int, hybrid: bool = False) -> Push:
    config, meta = env.config, env.meta
    store = env.create_user_store(prefix, PARTITIONS)
    if hybrid:  # nearline writes readable once applied: a partition is ready with no real-time lag
        stores.update_store(meta, config, store, hybrid_rewind_seconds=3600, hybrid_offset_lag_threshold=0)
    info = stores.describe_store(meta, store)
    key_schema, value_schema = serde.parse(info.key_schema), serde.parse(info.value_schemas[0].schema)
    expected = {f"user-{i:06d}": {"name": f"n{i}", "age": i % 90, "score": i / 4} for i in range(records)}
    rows: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
    for key, value in expected.items():
        key_bytes = serde.serialize(key_schema, key)
        rows[partition_for(key_bytes, PARTITIONS)].append((key_bytes, serde.serialize(value_schema, value)))
    job = f"job-{store}"
    number = versions.create_version(meta, config, store, job).number
    send_start_of_push(config, store, number, PARTITIONS, job, CompressionStrategy.NO_OP)
    source = config.region(config.source_region)
    push = Push(env, store, number, expected, rows)
    push.writers = [
        VersionTopicWriter(
            source.kafka_bootstrap, source.version_topic(store, number), PARTITIONS, deterministic_guid(job, p)
        )
        for p in range(PARTITIONS)
    ]
    for p, writer in enumerate(push.writers):
        writer.start_segment(p)
    return push


def _finish(push: Push, timeout: float = 120) -> None:
    env = push.env
    wait_for_ingestion(env.meta, push.store, push.number, list(REGIONS), progress=lambda _line: None, timeout=timeout)
    versions.set_version_status(env.meta, push.store, push.number, VersionStatus.PUSHED)
    for region in REGIONS:
        versions.swap_region(env.meta, push.store, region, push.number)
    wait_until_served(env.config, push.store, push.number, list(REGIONS))


def _placement(env: PlatformEnv, store: str, region: str) -> tuple[dict[int, list[Replica]], dict[int, int]]:
    """partition -> its replicas, and partition -> the instance leading it."""
    with env.meta.session() as session:
        replicas: dict[int, list[Replica]] = {}
        for row in session.scalars(select(Replica).where(Replica.store_name == store, Replica.region == region)):
            replicas.setdefault(row.partition, []).append(row)
        leaders = {
            row.partition: row.instance
            for row in session.scalars(
                select(PartitionLeader).where(PartitionLeader.store_name == store, PartitionLeader.region == region)
            )
        }
    return replicas, leaders


def _fully_replicated(env: PlatformEnv, store: str, region: str, without: int | None = None) -> bool:
    replicas, _ = _placement(env, store, region)
    return len(replicas) == PARTITIONS and all(
        sum(r.status == ExecutionStatus.COMPLETED and r.instance != without for r in rows) == 2
        for rows in replicas.values()
    )


def _read_all(client: ReadClient, push: Push) -> dict[str, dict]:
    keys, got = sorted(push.expected), {}
    for start in range(0, len(keys), 500):
        got.update(client.batch_get(push.store, keys[start : start + 500]))
    return got


def _reads(client: ReadClient, push: Push) -> dict[str, dict] | None:
    """`_read_all` for a wait: None while a partition has no ready replica (a loaded machine can lapse a surviving
    instance's lease for a moment, until its next renewal)."""
    try:
        return _read_all(client, push)
    except ComponentError:
        return None


def _pause_holding_no_write_lock(env: PlatformEnv, pid: int, attempts: int = 50) -> None:
    """SIGSTOP `pid` at a moment it is not inside a write transaction of the metadata store. SQLite (the embedded
    profile's store) has one database-wide write lock and no timeout for its holder: a process paused while holding
    it stalls every other instance's writes, coordination included, until it resumes. The fault under test is a
    leader whose lease runs out, not one that holds the database, so a pause that caught the lock is undone and
    taken again a moment later."""
    path = make_url(env.config.metadata_db_url).database
    assert path is not None
    for _ in range(attempts):
        os.kill(pid, signal.SIGSTOP)
        probe = sqlite3.connect(path, timeout=1.0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")  # waits out live writers; fails only while the paused one holds it
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.05)
        finally:
            probe.close()
    raise AssertionError(f"process {pid} held the metadata store's write lock at each of {attempts} pauses")


def _log(env: PlatformEnv, region: str, instance: int) -> str:
    return servers.process(env.config, region, instance).log_file.read_text()


def test_a_version_is_placed_on_two_instances_per_partition_and_read_through_the_region(
    replicated: PlatformEnv,
) -> None:
    push = _start_push(replicated, "placed", 4000)
    push.write(0, 1)
    push.end()
    _finish(push)
    for region in REGIONS:
        replicas, leaders = _placement(replicated, push.store, region)
        assert sorted(replicas) == list(range(PARTITIONS))
        for partition, rows in replicas.items():
            holders = [r.instance for r in rows]
            assert len(set(holders)) == 2 and leaders[partition] in holders  # distinct instances, one leader
        assert _read_all(ReadClient.for_region(replicated.config, region), push) == push.expected
    status = replicated.cli("status", "--json", check=True).stdout
    for region in REGIONS:
        for instance in range(INSTANCES):
            assert servers.name(region, instance) in status
    assert "replicas" in status and "leading" in status


def test_sigkill_an_instance_while_reading_fails_no_read_and_the_region_is_replicated_again(
    replicated: PlatformEnv,
) -> None:
    push = _start_push(replicated, "failover", 2000)
    push.write(0, 1)
    push.end()
    _finish(push)
    region, victim = "dc-1", 1
    client = ReadClient.for_region(replicated.config, region)
    keys = sorted(push.expected)
    failures: list[str] = []
    latencies: list[tuple[float, float]] = []  # (when, seconds)
    stop = threading.Event()

    def read_loop() -> None:
        index = 0
        while not stop.is_set():
            key = keys[index % len(keys)]
            started = time.perf_counter()
            try:
                assert client.get(push.store, key) == push.expected[key]
            except Exception as exc:  # noqa: BLE001 - every failed read is the test's finding
                failures.append(f"{key}: {exc!r}")
            latencies.append((time.monotonic(), time.perf_counter() - started))
            index += 1

    reader = threading.Thread(target=read_loop)
    reader.start()
    try:
        time.sleep(1)
        killed_at = time.monotonic()
        servers.process(replicated.config, region, victim).kill()
        wait_for(
            "dc-1's replicas re-placed and caught up without the killed instance",
            lambda: _fully_replicated(replicated, push.store, region, without=victim),
            timeout=GRACE_SECONDS + 60,
        )
        replicated_again = time.monotonic() - killed_at
        time.sleep(1)
    finally:
        stop.set()
        reader.join()
    assert failures == [], failures[:5]
    window = sorted(s for when, s in latencies if killed_at <= when <= killed_at + 1)
    p99 = window[int(len(window) * 0.99) - 1] if window else 0.0
    print(f"reads in the second after the kill: {len(window)}, p99 {p99 * 1000:.1f} ms; replicated again in "
          f"{replicated_again:.1f} s")  # fmt: skip
    assert replicated_again < GRACE_SECONDS + 60

    log_before = _log(replicated, region, victim)
    servers.start(replicated.config, region, victim)  # the killed instance back: it gets a share again

    def victims_replicas() -> list[Replica]:
        return [
            r for rows in _placement(replicated, push.store, region)[0].values() for r in rows if r.instance == victim
        ]

    wait_for(
        "the restarted instance holding ready replicas again",
        lambda: victims_replicas() and all(r.status == ExecutionStatus.COMPLETED for r in victims_replicas()),
        timeout=60,
    )
    # What it was given back it had on disk: each resumed from its checkpoint, none read from the topic's start.
    restarted_log = _log(replicated, region, victim)[len(log_before) :]
    topic = replicated.config.region(region).version_topic(push.store, push.number)
    for replica in victims_replicas():
        assert f"resuming {topic}[{replica.partition}] from its checkpoint" in restarted_log, restarted_log[-3000:]
    assert _read_all(client, push) == push.expected


def test_sigkill_a_leader_mid_push_another_leads_and_every_region_has_exactly_the_data(
    replicated: PlatformEnv,
) -> None:
    """In dc-1 the leader of partition 0 replicates the source topic: a new leader resumes its work. In the source
    region (dc-0), where the push itself writes the topic, the leader of partition 1 is killed too: its replicas are
    placed again after the grace period and catch up, and the region completes."""
    push = _start_push(replicated, "leaderkill", 8000)
    push.write(0, 0.5)
    region = "dc-1"
    for r in REGIONS:
        wait_for(f"{r} leaders elected", lambda r=r: len(_placement(replicated, push.store, r)[1]) == PARTITIONS)
    victim = _placement(replicated, push.store, region)[1][0]
    source_victim = _placement(replicated, push.store, "dc-0")[1][1]
    servers.process(replicated.config, region, victim).kill()
    servers.process(replicated.config, "dc-0", source_victim).kill()
    push.write(0.5, 1)
    push.end()
    _finish(push, timeout=GRACE_SECONDS + 120)
    assert _placement(replicated, push.store, region)[1][0] != victim
    assert _placement(replicated, push.store, "dc-0")[1][1] != source_victim
    for r in REGIONS:
        assert _read_all(ReadClient.for_region(replicated.config, r), push) == push.expected
    # The region's own topic: every source record through END_OF_PUSH, none lost; a record copied twice across the
    # handover is the same bytes, dropped by DIV (no partition reported an integrity error).
    source = replicated.config.region("dc-0").version_topic(push.store, push.number)
    local = replicated.config.region(region).version_topic(push.store, push.number)
    bootstrap = replicated.config.region(region).kafka_bootstrap
    for p in range(PARTITIONS):
        copied = read_partition(bootstrap, local, p)
        assert list(dict.fromkeys(copied)) == through_end_of_push(read_partition(bootstrap, source, p))
    status = versions.job_status(replicated.meta, push.store, push.number)
    assert all(s.status is ExecutionStatus.COMPLETED for s in status.regions.values())
    servers.start(replicated.config, region, victim)
    servers.start(replicated.config, "dc-0", source_victim)


def test_nearline_writes_survive_a_leader_kill_in_every_region(replicated: PlatformEnv) -> None:
    """A hybrid store: nearline writes from two regions flow while the instance leading partition 0 in dc-1 is
    killed; every write acknowledged to its writer is readable in every region afterwards."""
    push = _start_push(replicated, "hybrid", 400, hybrid=True)
    push.write(0, 1)
    push.end()
    _finish(push)
    expected = dict(push.expected)
    writers = {r: OnlineWriter(push.store, r, config=replicated.config, meta=replicated.meta) for r in REGIONS}
    victim = _placement(replicated, push.store, "dc-1")[1][0]
    try:
        for i in range(600):
            if i == 200:
                servers.process(replicated.config, "dc-1", victim).kill()
            key, region = f"user-{i % 500:06d}", REGIONS[i % 2]
            value = {"name": f"nearline-{i}", "age": i % 90, "score": float(i)}
            writers[region].put(key, value)
            expected[key] = value
            if i % 50 == 49:
                for writer in writers.values():
                    writer.flush()  # acknowledged: these must be readable everywhere
                time.sleep(0.2)
        for writer in writers.values():
            writer.flush()
    finally:
        for writer in writers.values():
            writer.close()
    for region in REGIONS:
        client = ReadClient.for_region(replicated.config, region)
        wait_for(
            f"every acknowledged write readable in {region}",
            lambda client=client: _reads(client, Push(replicated, push.store, 0, expected, {})) == expected,
            timeout=60,
        )
    servers.start(replicated.config, "dc-1", victim)


def test_a_paused_leader_past_its_lease_is_fenced(replicated: PlatformEnv) -> None:
    """SIGSTOP a leader of dc-1 mid-push: past its lease another instance leads under the next epoch; SIGCONT: the
    paused one finds its lease ran out and produces nothing more; the data is exact everywhere."""
    push = _start_push(replicated, "paused", 6000)
    push.write(0, 0.3)
    region = "dc-1"
    wait_for("dc-1 leaders replicating", lambda: len(_placement(replicated, push.store, region)[1]) == PARTITIONS)
    paused = _placement(replicated, push.store, region)[1][0]
    pid = servers.process(replicated.config, region, paused).pid()
    assert pid is not None
    # The placement names the leader before the instance has read it: paused then, it never led and has nothing to
    # give up. Paused once it says it leads.
    topic = replicated.config.region(region).version_topic(push.store, push.number)
    wait_for("the leader leading", lambda: f"leading {topic}[0] from source offset" in _log(replicated, region, paused))
    _pause_holding_no_write_lock(replicated, pid)
    try:
        wait_for(
            "another leader for partition 0",
            lambda: _placement(replicated, push.store, region)[1][0] != paused,
            timeout=LEASE_SECONDS + 30,
        )
        push.write(0.3, 0.6)
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(
        "the paused instance giving up its leadership",
        lambda: (
            "no longer leading" in _log(replicated, region, paused)
            or "has another leader now" in _log(replicated, region, paused)
        ),
        timeout=30,
    )
    push.write(0.6, 1)
    push.end()
    _finish(push, timeout=GRACE_SECONDS + 120)
    for r in REGIONS:
        assert _read_all(ReadClient.for_region(replicated.config, r), push) == push.expected


def test_bad_instance_arguments_are_refused_and_a_running_instance_keeps_running(
    replicated: PlatformEnv, tmp_path: Path
) -> None:
    out_of_range = replicated.cli("server", "--region", "dc-1", "--instance", "3")
    assert out_of_range.returncode == 2
    assert "region dc-1 has 3 instances (region.dc-1.instances): instance 3 is out of range 0..2" in out_of_range.stderr

    running = servers.process(replicated.config, "dc-1", 2).pid()
    twice = subprocess.run(
        [VENICE, "server", "--region", "dc-1", "--instance", "2"],
        env=replicated.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert twice.returncode == 2, twice.stderr
    assert "instance 2 of region dc-1 is already running" in twice.stderr
    assert servers.process(replicated.config, "dc-1", 2).pid() == running
    assert servers.is_healthy(replicated.config, "dc-1", 2)

    key, value = (
        Path(__file__).parents[2] / "examples" / "schemas" / n for n in ("user_key.avsc", "user_value_v1.avsc")
    )
    too_many = replicated.cli(
        "store", "create", "rf4", "--key-schema", str(key), "--value-schema", str(value), "--replication-factor", "4"
    )  # fmt: skip
    assert too_many.returncode == 2
    assert "replication factor 4 is above the 3 instances of region dc-0" in too_many.stderr


def test_status_and_up_tell_an_instance_they_did_not_start_and_one_no_longer_configured(
    replicated: PlatformEnv, tmp_path: Path
) -> None:
    config = replicated.config
    servers.stop(config, "dc-1", 2)
    by_hand = subprocess.Popen(
        [VENICE, "server", "--region", "dc-1", "--instance", "2"],
        env=replicated.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for("the hand-started instance serving", lambda: servers.is_healthy(config, "dc-1", 2), timeout=60)
        status = replicated.cli("status")
        assert status.returncode == 1
        assert (
            f"not started by venice up; pid {by_hand.pid} serves port {config.server_port('dc-1', 2)}" in status.stdout
        )
        # `venice up` starts its own, which is refused: an error, not "started" answered by the other process.
        with pytest.raises(ComponentError, match="instance 2 of region dc-1 is already running"):
            servers.start(config, "dc-1", 2)
    finally:
        by_hand.send_signal(signal.SIGTERM)
        by_hand.wait(timeout=60)
    servers.start(config, "dc-1", 2)

    fewer = tmp_path / "fewer.properties"  # the same platform, configured with one instance less in dc-1
    fewer.write_text(replicated.properties.read_text().replace("region.dc-1.instances=3", "region.dc-1.instances=2"))
    status = PlatformEnv(replicated.home, fewer, {**replicated.env, "VENICE_CONFIG": str(fewer)}).cli("status")
    assert status.returncode == 1
    assert re.search(r"server-dc-1\.2 +DOWN +pid \d+, running but not in the config", status.stdout), status.stdout


def _leader_epochs(env: PlatformEnv, store: str, region: str) -> dict[int, tuple[int, int]]:
    """partition -> (leading instance, epoch)."""
    with env.meta.session() as session:
        return {
            row.partition: (row.instance, row.epoch)
            for row in session.scalars(
                select(PartitionLeader).where(PartitionLeader.store_name == store, PartitionLeader.region == region)
            )
        }


def _pause_outside_transactions(env: PlatformEnv, pid: int, attempts: int = 50) -> None:
    """SIGSTOP `pid` at a moment none of its PostgreSQL sessions is inside a transaction: one paused there would
    hold its row locks (the coordinator's lease row) and stall the other instances' coordination until it resumes.
    The fault under test is a lease that runs out, not a database held. Its sessions are found by their client ports
    (the platform connects over TCP); the process is resumed if the check itself fails."""
    sessions = text(
        "SELECT count(*), count(*) FILTER (WHERE state <> 'idle') FROM pg_stat_activity "
        "WHERE client_port = ANY(:ports) AND pid <> pg_backend_pid()"
    )
    with env.meta.engine.connect() as connection:
        for _ in range(attempts):
            os.kill(pid, signal.SIGSTOP)
            try:
                ports = [c.laddr.port for c in psutil.Process(pid).net_connections("tcp") if c.raddr]
                found, busy = connection.execute(sessions, {"ports": ports}).one()
                connection.rollback()
            except BaseException:
                os.kill(pid, signal.SIGCONT)
                raise
            assert found > 0, f"no PostgreSQL session of process {pid} found by its ports {ports}"
            if busy == 0:
                return
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.05)
    raise AssertionError(f"process {pid} was inside a transaction at each of {attempts} pauses")


def _pause_until_led_elsewhere(env: PlatformEnv, store: str, region: str, instance: int) -> None:
    """Pause the instance until the partitions it leads are led by others, then resume it. They move once its lease
    runs out by the database's clock (each new leader's `updated_at`, that clock's, is a lease past the paused
    instance's last renewal), not before, and not 45 s later."""
    led = wait_for(
        f"instance {instance} leading a partition",
        lambda: [p for p, (leader, _epoch) in _leader_epochs(env, store, region).items() if leader == instance],
    )
    pid = servers.process(env.config, region, instance).pid()
    assert pid is not None
    _pause_outside_transactions(env, pid)
    try:
        with env.meta.session() as session:
            row = session.get(RegionInstance, (region, instance))
            assert row is not None
            renewed = row.heartbeat_at  # its last renewal: it renews no more while paused
        wait_for(
            f"instance {instance}'s leaderships ({led}) taken over",
            lambda: all(_leader_epochs(env, store, region)[p][0] != instance for p in led),
            timeout=SKEWED_LEASE_SECONDS + 20,
            interval=0.1,
        )
        with env.meta.session() as session:
            leaders = select(PartitionLeader).where(
                PartitionLeader.store_name == store, PartitionLeader.region == region
            )
            taken_at = [row.updated_at for row in session.scalars(leaders) if row.partition in led]
    finally:
        os.kill(pid, signal.SIGCONT)
    assert len(taken_at) == len(led) and all(
        renewed + SKEWED_LEASE_SECONDS - 0.01 <= at < renewed + SKEWED_LEASE_SECONDS + 15 for at in taken_at
    ), (instance, renewed, taken_at)
    wait_for(
        f"instance {instance} live again",
        lambda: (instance, True, True) in instances.liveness(env.meta, region, SKEWED_LEASE_SECONDS, 60),
    )


@pytest.mark.postgres
def test_instances_whose_clocks_are_45s_off_take_no_lease_early_and_keep_none_late(skewed: PlatformEnv) -> None:
    """Leases are written and judged by the metadata database's clock (issue 44): dc-1's instance 1's wall clock
    runs 45 s ahead and instance 2's 45 s behind (`SKEWED_CLOCK`, those processes alone). Both hold leases the
    others see running, so leadership stays put while every instance runs (an instance behind would look dead at
    once, and lose its leaderships over and over, if its own clock wrote its lease); paused, each loses its
    leaderships once its lease runs out by the database's clock, not 45 s later or at once; the data is exact
    everywhere."""
    region, config = "dc-1", skewed.config
    push = _start_push(skewed, "skew", 4000)
    push.write(0, 0.5)
    wait_for("dc-1's leaders", lambda: len(_leader_epochs(skewed, push.store, region)) == PARTITIONS)
    live = {
        instance
        for instance, running, _ in instances.liveness(skewed.meta, region, SKEWED_LEASE_SECONDS, 60)
        if running
    }
    assert live == {0, 1, 2}
    settled = _leader_epochs(skewed, push.store, region)
    time.sleep(3 * SKEWED_LEASE_SECONDS)  # no leadership moves while every instance renews its lease
    assert _leader_epochs(skewed, push.store, region) == settled
    for instance in SKEWS:
        _pause_until_led_elsewhere(skewed, push.store, region, instance)
    push.write(0.5, 1)
    push.end()
    _finish(push, timeout=GRACE_SECONDS + 120)
    for r in REGIONS:
        assert _read_all(ReadClient.for_region(config, r), push) == push.expected
