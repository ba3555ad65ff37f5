"""The cluster profile (`venice up --profile cluster`), started once for this module on free ports: three Kafka
brokers, a standalone Spark cluster, Airflow on Celery workers and Redis, PostgreSQL, three region-server instances
per region. A push of 200k records through Airflow, checked exactly in every region; then the same push with one
fault at a time mid-run (a broker SIGKILLed while a hybrid store's nearline writes flow, a Spark worker SIGKILLed,
the Celery worker running the Spark step SIGKILLed, PostgreSQL restarted)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from confluent_kafka.admin import AdminClient, ConfigResource

from scripts.generate_dataset import generate
from tests.support.airflow_runs import failed_attempts, wait_for_data_in_version_topic
from tests.support.cluster import make_cluster_env
from tests.support.inputs import expected_records
from tests.support.leftovers import leaves_nothing, platform_parts
from tests.support.platform import SCHEMAS, PlatformEnv
from tests.support.reads import wait_for
from tests.support.topics import read_partition, through_end_of_push
from venice_core.client import ReadClient
from venice_core.controller import stores, versions
from venice_core.embedded import airflow, kafka, platform, postgres, spark_cluster
from venice_core.embedded.process import members
from venice_core.protocol.envelope import decode
from venice_core.pubsub import client_config
from venice_core.rollout.names import rollout_dag_id
from venice_core.status import ExecutionStatus
from venice_core.writer import OnlineWriter

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow, pytest.mark.postgres]

RECORDS = 200_000
PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster() -> Iterator[PlatformEnv]:
    """The cluster profile, up for the module (outside pytest's temp tree: PostgreSQL runs as its own user)."""
    home = Path(tempfile.mkdtemp(prefix="venice-cluster-"))
    env = make_cluster_env(home, {"rollout.step.retry.delay.seconds": "2"})  # a step lost with its worker: soon
    config = env.config
    try:
        started = time.monotonic()
        env.venice("up", check=True, timeout=600)
        print(f"cluster profile up in {time.monotonic() - started:.0f} s")
        yield env
    finally:
        with leaves_nothing(*platform_parts(config)):
            env.venice("down", timeout=600)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    data = generate(tmp_path_factory.mktemp("cluster-data") / "users", RECORDS, files=4)
    return data, expected_records(data)


def _create_store(env: PlatformEnv, name: str, hybrid: bool = False) -> str:
    env.venice(
        "store", "create", name, "--key-schema", str(SCHEMAS / "user_key.avsc"),
        "--value-schema", str(SCHEMAS / "user_value_v1.avsc"), "--partitions", str(PARTITIONS), check=True,
    )  # fmt: skip
    if hybrid:
        env.venice("store", "update", name, "--hybrid-rewind-seconds", "60", check=True)
    return name


def _read_all(env: PlatformEnv, store: str, region: str, keys: list[str]) -> dict[str, Any]:
    client = ReadClient.for_region(env.config, region)
    got: dict[str, Any] = {}
    for start in range(0, len(keys), 1000):
        got.update(client.batch_get(store, keys[start : start + 1000]))
    return {k: v for k, v in got.items() if v is not None}


@dataclass
class Push:
    env: PlatformEnv
    store: str
    process: subprocess.Popen[str]

    def finish(self, timeout: float = 900) -> str:
        out, err = self.process.communicate(timeout=timeout)
        assert self.process.returncode == 0, (out + err, failed_attempts(self.env, self.store))
        return out

    def wait_for_writing(self, number: int = 1) -> None:
        wait_for_data_in_version_topic(self.env, self.store, number, PARTITIONS, self.process)


def _push(env: PlatformEnv, store: str, data: Path) -> Push:
    return Push(env, store, env.venice_background("push", store, "--input", str(data)))


def _assert_exact(env: PlatformEnv, store: str, expected: dict[str, dict], number: int = 1) -> None:
    """Every region serves exactly `expected`; the version topic holds each record once as DIV sees it (copies of
    one message, a retried task's, share its producer, segment and sequence number); no partition failed."""
    keys = sorted(expected)
    for region in env.config.region_names:
        assert _read_all(env, store, region, keys) == expected, f"region {region} differs"
    source = env.config.region(env.config.source_region)
    topic = source.version_topic(store, number)
    seen: dict[tuple[bytes, int, int], bytes] = {}
    for partition in range(PARTITIONS):
        for key, value in through_end_of_push(read_partition(source.kafka_bootstrap, topic, partition)):
            message = decode(key, value)
            if not message.is_control:
                producer = message.producer
                seen.setdefault((producer.guid, producer.segment, producer.sequence), message.key)
    assert len(seen) == len(expected) and len(set(seen.values())) == len(expected)
    status = versions.job_status(env.meta, store, number)
    assert all(s.status is ExecutionStatus.COMPLETED for s in status.regions.values()), status


def _master_apps(env: PlatformEnv) -> dict[str, Any]:
    port = env.config.spark_standalone.ui_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=5) as response:
        return json.load(response)


def _task_hosts(env: PlatformEnv, store: str) -> dict[str, str]:
    """Where each task of the store's runs that ran, ran (`hostname`: the Celery worker's node), from Airflow's
    database."""
    url = env.config.airflow_db_url
    assert url is not None
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sqlalchemy.text("SELECT task_id, hostname FROM task_instance WHERE dag_id = :dag AND hostname <> ''"),
                {"dag": rollout_dag_id(store)},
            )
            return {row.task_id: row.hostname for row in rows}
    finally:
        engine.dispose()


def test_a_push_through_airflow_runs_on_every_engine_of_the_cluster(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]]
) -> None:
    """200k records through the store's Airflow rollout: the tasks run on the Celery workers, the Spark job on
    the standalone master's workers, the topics have three replicas (two in sync), every region serves it all.
    The store is hybrid: the broker-fault test writes to it nearline."""
    data, expected = dataset
    store = _create_store(cluster, "clusterpush", hybrid=True)
    started = time.monotonic()
    print(_push(cluster, store, data).finish())
    print(f"push {time.monotonic() - started:.1f}s")
    _assert_exact(cluster, store, expected)
    print(f"checked {time.monotonic() - started:.1f}s")
    config = cluster.config
    # `venice status`: every process of the profile healthy (Airflow's API server, scheduler and DAG processors on
    # one line, `airflow`; its triggerer and each Celery worker on one of their own).
    status = cluster.venice("status")
    assert status.returncode == 0, status.stdout
    listed = {line.split()[0] for line in status.stdout.splitlines() if line.strip()}
    core = {f"airflow-{name}" for name in airflow.COMPONENTS}
    assert {p.name for p in platform.plan(config) if p.name not in core} | {"airflow"} <= listed, status.stdout
    # The Spark job ran on the standalone cluster (in its two workers' executors), not in local mode.
    apps = _master_apps(cluster)
    assert [app["state"] for app in apps["completedapps"] if app["name"].startswith(f"venice-push-{store}-")] == [
        "FINISHED"
    ], apps
    assert len([w for w in apps["workers"] if w["state"] == "ALIVE"]) == config.spark_standalone.workers
    # Every task of the run ran on a Celery worker (a task's host names its worker's Celery node), both took some.
    hosts = _task_hosts(cluster, store)
    assert hosts and all(host.startswith("venice-worker-") for host in hosts.values()), hosts
    assert len({host.split("@")[0] for host in hosts.values()}) == config.airflow_celery_workers, hosts
    # Topics: replication factor 3, min.insync.replicas 2, partitions spread over the brokers.
    source = config.region(config.source_region)
    topic = source.version_topic(store, 1)
    admin = AdminClient(client_config(source.kafka_bootstrap))
    described = admin.list_topics(topic, timeout=10).topics[topic]
    assert {len(p.replicas) for p in described.partitions.values()} == {3}
    assert len({p.leader for p in described.partitions.values()}) > 1
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["min.insync.replicas"].value == "2"


def test_a_broker_killed_mid_push_loses_nothing_and_nearline_writes_keep_flowing(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]]
) -> None:
    """A broker SIGKILLed while the Spark job writes: the push completes exactly; meanwhile nearline writes to the
    hybrid store of the first test are all acknowledged and readable in every region. The broker rejoins when
    `venice up` starts it again."""
    data, expected = dataset
    store = _create_store(cluster, "brokerkill")
    push = _push(cluster, store, data)
    push.wait_for_writing()
    kafka.kill_node(cluster.config, 2)
    nearline = _write_nearline(cluster, "clusterpush", 300)
    push.finish()
    _assert_exact(cluster, store, expected)
    keys = sorted(nearline)
    for region in cluster.config.region_names:
        wait_for(
            f"every acknowledged nearline write readable in {region}",
            lambda region=region: (
                {k: v for k, v in _read_all(cluster, "clusterpush", region, keys).items()} == nearline
            ),
            timeout=60,
        )
    cluster.venice("up", check=True, timeout=300)
    wait_for("the killed broker back in the cluster", lambda: kafka.is_healthy(cluster.config), timeout=120)


def _write_nearline(env: PlatformEnv, store: str, count: int) -> dict[str, dict]:
    """`count` nearline writes from two regions, each flushed (acknowledged by the brokers in sync)."""
    written: dict[str, dict] = {}
    regions = env.config.region_names[:2]
    writers = {r: OnlineWriter(store, r, config=env.config, meta=env.meta) for r in regions}
    try:
        for i in range(count):
            key, value = f"user-{i:09d}", {"name": f"nearline-{i}", "age": i % 90, "score": float(i)}
            writers[regions[i % 2]].put(key, value)
            written[key] = value
            if i % 50 == 49:
                for writer in writers.values():
                    writer.flush()
        for writer in writers.values():
            writer.flush()
    finally:
        for writer in writers.values():
            writer.close()
    return written


def _worker_running(env: PlatformEnv, pid: int) -> int:
    """The Spark worker whose processes (its executors' Python workers among them) include `pid`."""
    config = env.config
    for n in range(config.spark_standalone.workers):
        leader = spark_cluster.worker_process(config, n).pid()
        if leader is not None and pid in members(leader):
            return n
    raise AssertionError(f"no Spark worker runs pid {pid}")


def test_a_spark_worker_killed_mid_job_has_its_tasks_rescheduled(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]], tmp_path: Path
) -> None:
    """The task of partition 1 stalls once it has written 7,000 records (`venice.push.test.stall.file`: it says
    its pid and where it imported the job's code from: the zip the job shipped); its Spark worker is SIGKILLed
    with the executor: Spark runs the task again on the other worker, DIV drops the records the lost attempt wrote
    (the same producer, segment and sequence numbers), the data is exact. The worker rejoins at `venice up`."""
    data, expected = dataset
    store = _create_store(cluster, "workerkill")
    stall = tmp_path / "stall.json"
    confs = {"fail.partition": "1", "fail.after.records": "7000", "stall.file": str(stall)}
    args = [arg for key, value in confs.items() for arg in ("--conf", f"venice.push.test.{key}={value}")]
    push = Push(cluster, store, cluster.venice_background("push", store, "--input", str(data), *args))

    def stalled() -> str | None:
        if stall.exists() and stall.stat().st_size:
            return stall.read_text()
        assert push.process.poll() is None, push.process.communicate()
        return None

    task = json.loads(wait_for("the stalled task", stalled, timeout=300))
    assert ".zip/venice_core/" in task["module"], task  # the executors import the package the job shipped
    spark_cluster.kill_worker(cluster.config, _worker_running(cluster, task["pid"]))
    push.finish()
    _assert_exact(cluster, store, expected)
    cluster.venice("up", check=True, timeout=300)
    assert spark_cluster.alive_workers(cluster.config) == cluster.config.spark_standalone.workers


def _celery_worker_running(env: PlatformEnv, pattern: str) -> Any:
    """The Celery worker whose processes include one whose command line matches `pattern`, or None."""
    for worker in airflow.celery_workers(env.config):
        pid = worker.pid()
        if pid is None:
            continue
        for member in members(pid):
            try:
                command = Path(f"/proc/{member}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if pattern in command:
                return worker
    return None


def test_the_celery_worker_running_the_spark_step_killed_retries_it_on_the_other(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]]
) -> None:
    """The Celery worker running the Spark step SIGKILLed (with the task and its spark-submit): Airflow finds the
    task gone, retries it on the other worker, and the run finishes; one version only."""
    data, expected = dataset
    store = _create_store(cluster, "celerykill")
    push = _push(cluster, store, data)
    push.wait_for_writing()
    victim = wait_for(
        "the Celery worker running the Spark step", lambda: _celery_worker_running(cluster, f"venice-push-{store}")
    )
    victim.kill()
    push.finish()
    _assert_exact(cluster, store, expected)
    assert [v.number for v in stores.describe_store(cluster.meta, store).versions] == [1]
    cluster.venice("up", check=True, timeout=300)


def test_postgres_restarted_mid_rollout_the_run_finishes(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]]
) -> None:
    """PostgreSQL (Airflow's database and the metadata store) restarted while the rollout runs: the steps retry,
    the run finishes, the data is exact."""
    data, expected = dataset
    store = _create_store(cluster, "pgrestart")
    push = _push(cluster, store, data)
    push.wait_for_writing()
    postgres.restart(cluster.config)
    push.finish()
    _assert_exact(cluster, store, expected)
