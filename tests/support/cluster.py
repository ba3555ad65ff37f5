"""What the cluster profile's tests (deploy/cluster.properties, `tests/cluster/`) share: its stores, pushes and
exact reads, and where its engines ran the work."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy

from tests.support.airflow_runs import failed_attempts, wait_for_data_in_version_topic
from tests.support.platform import SCHEMAS, PlatformEnv
from tests.support.reads import wait_for
from tests.support.topics import read_partition, through_end_of_push
from venice_core.client import ReadClient
from venice_core.controller import versions
from venice_core.embedded import airflow, spark_cluster
from venice_core.embedded.process import ManagedProcess, members
from venice_core.model.status import ExecutionStatus
from venice_core.protocol.envelope import decode
from venice_core.rollout.names import rollout_dag_id

PARTITIONS = 4
RECORDS = 200_000  # a push of the cluster tests (and `make demo-cluster`'s, in them)


def create_store(env: PlatformEnv, name: str, hybrid: bool = False) -> str:
    env.venice(
        "store", "create", name, "--key-schema", str(SCHEMAS / "user_key.avsc"),
        "--value-schema", str(SCHEMAS / "user_value_v1.avsc"), "--partitions", str(PARTITIONS), check=True,
    )  # fmt: skip
    if hybrid:
        env.venice("store", "update", name, "--hybrid-rewind-seconds", "600", check=True)
    return name


def read_all(env: PlatformEnv, store: str, region: str, keys: list[str]) -> dict[str, Any]:
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


def start_push(env: PlatformEnv, store: str, data: Path) -> Push:
    return Push(env, store, env.venice_background("push", store, "--input", str(data)))


def assert_exact(env: PlatformEnv, store: str, expected: dict[str, dict], number: int = 1) -> None:
    """Every region serves exactly `expected`; the version topic holds each record once as DIV sees it (copies of
    one message, a retried task's, share its producer, segment and sequence number); no partition failed."""
    keys = sorted(expected)
    for region in env.config.region_names:
        assert read_all(env, store, region, keys) == expected, f"region {region} differs"
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


def master_apps(env: PlatformEnv) -> dict[str, Any]:
    """The standalone master's state: its workers, live and completed applications."""
    state = spark_cluster.master_state(env.config, timeout=5)
    assert state is not None, f"the Spark master's UI ({spark_cluster.ui_url(env.config)}) does not answer"
    return state


def task_hosts(env: PlatformEnv, store: str) -> dict[str, str]:
    """Where each task of the store's runs that ran, ran (`hostname`: the Celery worker's node), from Airflow's
    database."""
    url = env.config.airflow.db_url
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


def spark_step_worker(env: PlatformEnv, store: str) -> ManagedProcess:
    """The Celery worker running the store's Spark step (its spark-submit among the worker's processes), once found."""
    found = wait_for("the Celery worker running the Spark step", lambda: _worker_running(env, f"venice-push-{store}"))
    assert found is not None
    return found


def _worker_running(env: PlatformEnv, pattern: str) -> ManagedProcess | None:
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
