"""The hosts profile's network faults (issue 44): a host cut off while it keeps running, which is what a real network
does, not a process killed. Each runs on the platform `venice --profile hosts up` started (`conftest.py`), while reads
or a push through Airflow run; the data is checked exactly afterwards. Marked `faults`; run where network namespaces
can be made (root)."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from scripts.generate_dataset import generate
from tests.support.cluster import (
    assert_exact,
    create_store,
    master_apps,
    read_all,
    spark_step_worker,
    start_push,
    task_hosts,
)
from tests.support.inputs import expected_records
from tests.support.platform import PlatformEnv
from tests.support.profiles import CLUSTER_PROFILE
from tests.support.reads import wait_for
from venice_core.client import ReadClient
from venice_core.config import ClusterConfig
from venice_core.controller import stores
from venice_core.embedded import airflow, kafka, network, servers
from venice_core.meta.models import PartitionLeader, RegionInstance
from venice_core.nearline.writer import OnlineWriter

pytestmark = [
    pytest.mark.faults,
    pytest.mark.hosts,
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.airflow,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.skipif(CLUSTER_PROFILE != "hosts", reason="network namespaces need root"),
]
REGION = "dc-1"
SMALL = 20_000  # records of the pushes the reads run against


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    data = generate(tmp_path_factory.mktemp("hosts-data") / "users", SMALL, files=2)
    return data, expected_records(data)


def _leads(env: PlatformEnv, store: str, region: str) -> dict[int, int]:
    """Partition -> the instance leading it in the region."""
    with env.meta.session() as session:
        rows = session.scalars(select(PartitionLeader).where(PartitionLeader.store_name == store))
        return {row.partition: row.instance for row in rows if row.region == region}


def _log(config: ClusterConfig, region: str, instance: int) -> str:
    return servers.process(config, region, instance).log_file.read_text(errors="replace")


@contextlib.contextmanager
def _cut(config: ClusterConfig, host: str) -> Iterator[None]:
    network.cut(config, host)
    try:
        yield
    finally:
        network.rejoin(config, host)


@contextlib.contextmanager
def _without_route(config: ClusterConfig, host: str, to: str) -> Iterator[None]:
    """`host` cut off from `to` alone (an unreachable route to it inside the host's namespace): it reaches the rest."""
    namespace = network.host_link(config.hosts, host).namespace
    subprocess.run(["ip", "-n", namespace, "route", "add", "unreachable", f"{to}/32"], check=True)
    try:
        yield
    finally:
        subprocess.run(["ip", "-n", namespace, "route", "del", "unreachable", f"{to}/32"], check=True)


@dataclass
class Traffic:
    """Gets in a loop through the routing client, and nearline writes, each flushed, from a thread each."""

    env: PlatformEnv
    store: str
    keys: list[str]
    failures: list[str] = field(default_factory=list)
    latencies: list[tuple[float, float]] = field(default_factory=list)
    written: dict[str, dict[str, Any]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def read(self) -> None:
        client = ReadClient.for_region(self.env.config, REGION)
        index = 0
        while not self.stop.is_set():
            key = self.keys[index % len(self.keys)]
            started = time.perf_counter()
            try:
                if client.get(self.store, key) is None:
                    self.failures.append(f"{key}: not found")
            except Exception as exc:  # noqa: BLE001 - a failed read is what the test counts
                self.failures.append(f"{key}: {exc!r}")
            self.latencies.append((time.monotonic(), time.perf_counter() - started))
            index += 1

    def write(self) -> None:
        writer = OnlineWriter(self.store, self.env.config.source_region, config=self.env.config, meta=self.env.meta)
        try:
            i = 0
            while not self.stop.is_set():
                batch = {
                    f"nearline-{n:06d}": {"name": f"nearline-{n}", "age": n % 90, "score": float(n)}
                    for n in range(i, i + 20)
                }
                for key, value in batch.items():
                    writer.put(key, value)
                writer.flush()  # acknowledged: now it must be readable everywhere
                self.written.update(batch)
                i += 20
                time.sleep(0.1)
        finally:
            writer.close()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        threads = [threading.Thread(target=self.read), threading.Thread(target=self.write)]
        for thread in threads:
            thread.start()
        try:
            yield
        finally:
            self.stop.set()
            for thread in threads:
                thread.join(timeout=60)

    def all_readable(self) -> None:
        keys = sorted(self.written)
        for region in self.env.config.region_names:
            wait_for(
                f"every acknowledged nearline write readable in {region}",
                lambda region=region: read_all(self.env, self.store, region, keys) == self.written,
                timeout=120,
            )


def _pushed_hybrid(env: PlatformEnv, name: str, dataset: tuple[Path, dict[str, dict]]) -> str:
    data, expected = dataset
    store = create_store(env, name, hybrid=True)
    start_push(env, store, data).finish()
    assert_exact(env, store, expected)
    return store


def _leader_of(env: PlatformEnv, store: str) -> int:
    """The first instance leading a partition of the store in dc-1."""
    return min(wait_for("dc-1's leaders", lambda: _leads(env, store, REGION) or None).values())


def _traffic(env: PlatformEnv, store: str, dataset: tuple[Path, dict[str, dict]]) -> Traffic:
    return Traffic(env, store, sorted(dataset[1])[:: max(1, SMALL // 2000)])


def _leaderships_moved(env: PlatformEnv, store: str, victim: int) -> None:
    """Wait until none of the store's partitions in dc-1 is led by `victim` (cut off just now), and check on the
    database's clock that each was taken once its lease had run out, not before and not long after: each new leader's
    `updated_at` (that clock's) is a lease past the victim's last renewal (its `heartbeat_at`, which it cannot move
    while cut off)."""
    lease = env.config.server.instance_lease_seconds
    led = [p for p, leader in _leads(env, store, REGION).items() if leader == victim]
    assert led, f"instance {victim} leads nothing"
    wait_for(
        "its leaderships moved to the instances left",
        lambda: victim not in _leads(env, store, REGION).values(),
        timeout=lease + 30,
    )
    with env.meta.session() as session:
        row = session.get(RegionInstance, (REGION, victim))
        assert row is not None
        renewed = row.heartbeat_at
        rows = session.scalars(select(PartitionLeader).where(PartitionLeader.store_name == store))
        taken_at = [row.updated_at for row in rows if row.region == REGION and row.partition in led]
    assert len(taken_at) == len(led) and all(renewed + lease - 0.01 <= at < renewed + lease + 10 for at in taken_at), (
        renewed,
        taken_at,
    )


def _found_its_lease_lapsed(config: ClusterConfig, victim: int) -> None:
    """Back in touch, the instance renews, finds its lease ran out meanwhile, and trusts none of its leaderships
    until it has read them afresh (fenced)."""
    line = f"instance {victim}'s lease ran out before this renewal: leading nothing until resynced"
    wait_for("the instance back finding its lease ran out", lambda: line in _log(config, REGION, victim), timeout=30)


def test_a_region_server_instance_cut_off_fails_no_read_and_its_leaderships_move_on_the_databases_clock(
    cluster: PlatformEnv, small_dataset: tuple[Path, dict[str, dict]]
) -> None:
    """A leader of dc-1 cut off (its link down: it keeps running) while a client reads in a loop and a hybrid store
    takes nearline writes: no read fails (the routing client moves on), its leaderships move once its lease runs out
    on the database's clock, and when its link comes back it has stopped producing (its lease lapsed: fenced) and
    leads nothing it led; every acknowledged write is readable in every region."""
    config = cluster.config
    store = _pushed_hybrid(cluster, "instancecut", small_dataset)
    victim = _leader_of(cluster, store)
    traffic = _traffic(cluster, store, small_dataset)
    with traffic.running():
        time.sleep(3)
        with _cut(config, servers.name(REGION, victim)):
            cut = time.monotonic()
            _leaderships_moved(cluster, store, victim)
            time.sleep(3)  # writes and reads while it is away
        wait_for("the cut instance answering again", lambda: servers.is_healthy(config, REGION, victim), timeout=60)
        time.sleep(3)
    assert traffic.failures == [], traffic.failures[:5]
    after = [seconds for at, seconds in traffic.latencies if cut <= at < cut + 1]
    assert after, "no read in the second after the cut"
    _found_its_lease_lapsed(config, victim)
    traffic.all_readable()


def test_a_leader_that_reaches_kafka_but_not_the_database_stops_leading_within_its_lease(
    cluster: PlatformEnv, small_dataset: tuple[Path, dict[str, dict]]
) -> None:
    """The metadata database cut off from one leader of dc-1 alone (it still reaches Kafka and the others): it cannot
    renew its lease, stops producing when the lease runs out on its own clock, and the others take its partitions
    under a new epoch; only the new leaders' records are applied (the data exact everywhere)."""
    config = cluster.config
    store = _pushed_hybrid(cluster, "dbcut", small_dataset)
    victim = _leader_of(cluster, store)
    traffic = _traffic(cluster, store, small_dataset)
    with traffic.running(), _without_route(config, servers.name(REGION, victim), config.postgres.host):
        _leaderships_moved(cluster, store, victim)
        time.sleep(3)
    assert traffic.failures == [], traffic.failures[:5]
    # Its renewal fails or hangs (a cut-off connection is not reset): either way its lease ran out on its own clock.
    _found_its_lease_lapsed(config, victim)
    traffic.all_readable()


def test_a_brokers_host_cut_off_for_30_s_mid_push_the_push_completes_exactly(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]]
) -> None:
    """A Kafka broker's host cut off for 30 s while the Spark job writes: the producers' retries go to the brokers
    left (two in sync), the push completes with each record once as DIV sees it, and the broker rejoins."""
    data, expected = dataset
    store = create_store(cluster, "brokercut")
    push = start_push(cluster, store, data)
    push.wait_for_writing()
    with _cut(cluster.config, kafka.name(cluster.config, 2)):
        time.sleep(30)
    push.finish()
    assert_exact(cluster, store, expected)
    wait_for("the broker back in the cluster", lambda: kafka.is_healthy(cluster.config), timeout=180)


def test_the_metadata_databases_host_cut_off_for_20_s_mid_rollout_the_run_resumes(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]]
) -> None:
    """PostgreSQL's host (Airflow's database and the metadata store) cut off for 20 s while the rollout runs: every
    component waits or retries, the run resumes and finishes, the data is exact."""
    data, expected = dataset
    store = create_store(cluster, "dbhostcut")
    push = start_push(cluster, store, data)
    push.wait_for_writing()
    with _cut(cluster.config, "postgres"):
        time.sleep(20)
    push.finish()
    assert_exact(cluster, store, expected)


def test_the_host_of_the_celery_worker_running_the_spark_driver_cut_off_the_step_is_retried_on_the_other(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]]
) -> None:
    """The host of the Celery worker running the Spark step (and, in client mode, the job's driver) cut off mid-push:
    its task's heartbeats stop, Airflow retries the step on the other worker, whose try first kills the cut-off
    driver's application on the master (nothing else would tell the master for minutes), so its executors' cores are
    released; the run finishes with one version only, the data exact."""
    data, expected = dataset
    store = create_store(cluster, "workercut")
    push = start_push(cluster, store, data)
    push.wait_for_writing()
    victim = spark_step_worker(cluster, store)
    with _cut(cluster.config, victim.name):
        push.finish()
    assert_exact(cluster, store, expected)
    assert [v.number for v in stores.describe_store(cluster.meta, store).versions] == [1]
    apps = master_apps(cluster)
    ours = [app for app in apps["completedapps"] if app["name"].startswith(f"venice-push-{store}-")]
    assert sorted(app["state"] for app in ours) == ["FINISHED", "KILLED"], ours
    assert not [app for app in apps["activeapps"] if app["name"].startswith(f"venice-push-{store}-")], apps
    # The retry ran on the other worker (a task's host names its Celery node).
    hosts = task_hosts(cluster, store)
    assert hosts["spark_push"].split("@")[0] != airflow.celery_worker_name(int(victim.name.rsplit("-", 1)[1]))
