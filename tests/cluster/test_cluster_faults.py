"""The cluster profile's faults, each mid-way through a push of 200k records through Airflow: a Kafka broker and a
Spark worker SIGKILLed in one push (while a hybrid store's nearline writes flow), the Celery worker running the Spark
step SIGKILLed, PostgreSQL restarted. Each push is checked exactly in every region. Marked `faults`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cluster import assert_exact, create_store, read_all, spark_step_worker, start_push
from tests.support.platform import PlatformEnv
from tests.support.reads import wait_for
from venice_core.controller import stores
from venice_core.embedded import kafka, postgres, spark_cluster
from venice_core.embedded.process import members
from venice_core.nearline.writer import OnlineWriter

pytestmark = [
    pytest.mark.faults,
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.airflow,
    pytest.mark.postgres,
    pytest.mark.redis,
]


def test_a_broker_and_a_spark_worker_killed_mid_push_lose_nothing_and_nearline_writes_keep_flowing(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]]
) -> None:
    """A Kafka broker and a Spark worker (with its executor, whose Python imports the package the job shipped)
    SIGKILLed while the Spark job writes to a hybrid store, one push for both (each alone cost a 200k-record push):
    Spark runs the lost tasks again on the other worker, DIV drops the records the lost attempts wrote (the same
    producer, segment and sequence numbers), the producers' retries go to the brokers left, and the push completes
    exactly. Nearline writes to the store, made while the broker is down, are all acknowledged (acks=all, two replicas
    in sync) and readable in every region once the version serves (replayed from the real-time topics). The broker
    and the worker rejoin when `venice up` starts them again."""
    data, expected = dataset
    store = create_store(cluster, "brokerkill", hybrid=True)
    push = start_push(cluster, store, data)
    push.wait_for_writing()
    assert _shipped_package_on_executor_path(cluster)
    spark_cluster.kill_worker(cluster.config, 0)
    kafka.kill_node(cluster.config, 2)
    nearline = _write_nearline(cluster, store, 300)
    push.finish()
    assert_exact(cluster, store, expected)
    keys = sorted(nearline)
    for region in cluster.config.region_names:
        wait_for(
            f"every acknowledged nearline write readable in {region}",
            lambda region=region: read_all(cluster, store, region, keys) == nearline,
            timeout=60,
        )
    cluster.venice("up", check=True, timeout=300)
    wait_for("the killed broker back in the cluster", lambda: kafka.is_healthy(cluster.config), timeout=120)
    assert spark_cluster.alive_workers(cluster.config) == cluster.config.spark.workers


def _write_nearline(env: PlatformEnv, store: str, count: int) -> dict[str, dict]:
    """`count` nearline writes from two regions, each flushed (acknowledged by the brokers in sync)."""
    written: dict[str, dict] = {}
    regions = env.config.region_names[:2]
    writers = {r: OnlineWriter(store, r, config=env.config, meta=env.meta) for r in regions}
    try:
        for i in range(count):
            key, value = f"nearline-{i:06d}", {"name": f"nearline-{i}", "age": i % 90, "score": float(i)}
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


def _shipped_package_on_executor_path(env: PlatformEnv) -> bool:
    """A Python process under a Spark worker (an executor's daemon or worker) has the zip of `venice_core` the job
    shipped first on its path (`PYTHONPATH`: ahead of the venv's own copy)."""
    for n in range(env.config.spark.workers):
        leader = spark_cluster.worker_process(env.config, n).pid()
        for pid in members(leader) if leader is not None else []:
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            paths = [e.split(b"=", 1)[1] for e in environ if e.startswith(b"PYTHONPATH=")]
            if b"python" in command and paths and paths[0].split(b":")[0].startswith(b"venice_core-"):
                return True
    return False


def test_the_celery_worker_running_the_spark_step_killed_retries_it_on_the_other(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]]
) -> None:
    """The Celery worker running the Spark step SIGKILLed (with the task and its spark-submit): Airflow finds the
    task gone, retries it on the other worker, and the run finishes; one version only."""
    data, expected = dataset
    store = create_store(cluster, "celerykill")
    push = start_push(cluster, store, data)
    push.wait_for_writing()
    victim = spark_step_worker(cluster, store)
    victim.kill()
    push.finish()
    assert_exact(cluster, store, expected)
    assert [v.number for v in stores.describe_store(cluster.meta, store).versions] == [1]
    cluster.venice("up", check=True, timeout=300)


def test_postgres_restarted_mid_rollout_the_run_finishes(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]]
) -> None:
    """PostgreSQL (Airflow's database and the metadata store) restarted while the rollout runs: the steps retry,
    the run finishes, the data is exact."""
    data, expected = dataset
    store = create_store(cluster, "pgrestart")
    push = start_push(cluster, store, data)
    push.wait_for_writing()
    postgres.restart(cluster.config)
    push.finish()
    assert_exact(cluster, store, expected)
