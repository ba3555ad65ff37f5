"""The standalone Spark cluster (`embedded.spark_cluster`: a master and two workers) and a real push job submitted
to it through spark-submit (`rollout.local.run_spark_job`), beside the session's platform (its Kafka broker,
metadata store and region servers): the executors import the job's code from its py-files, and a worker killed
mid-job (with its executor, as a lost machine) costs nothing but its tasks' retries."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest

from scripts.generate_dataset import generate
from tests.support.inputs import expected_records
from tests.support.leftovers import leaves_nothing, listening_beyond_loopback
from tests.support.platform import PlatformEnv
from tests.support.reads import assert_serves, wait_for
from tests.support.sandbox import free_ports
from venice_core.client import ReadClient
from venice_core.config import ClusterConfig, SparkStandaloneConfig
from venice_core.embedded import spark_cluster
from venice_core.embedded.process import members
from venice_core.rollout.local import run_spark_job
from venice_core.spark.job_result import JobResult
from venice_core.spark.submit import PushJobRequest


def cluster_config(platform_env: PlatformEnv, home: Path) -> ClusterConfig:
    """The platform's config with a standalone cluster of two workers on free ports, its processes in `home`."""
    master_port, ui_port = free_ports(2, block=3)  # the UI's port, then each worker's
    return dataclasses.replace(
        platform_env.config,
        home=home,
        spark_master=f"spark://127.0.0.1:{master_port}",
        spark_standalone=SparkStandaloneConfig(workers=2, worker_cores=1, worker_memory="1g", ui_port=ui_port),
    )


def worker_running(config: ClusterConfig, pid: int) -> int:
    """The worker whose processes (its executors' Python workers among them) include `pid`."""
    for n in range(config.spark_standalone.workers):
        leader = spark_cluster.worker_process(config, n).pid()
        if leader is not None and pid in members(leader):
            return n
    raise AssertionError(f"no worker runs pid {pid}")


@pytest.mark.spark
def test_a_push_on_the_standalone_cluster_survives_a_lost_worker(platform_env: PlatformEnv, tmp_path: Path) -> None:
    """The cluster comes up on loopback with both workers alive. A push job is submitted to it; once its task of
    partition 1 has written 700 records it stalls (`venice.push.test.stall.file`), and its worker is SIGKILLed
    with the executor: Spark runs the task again on the other worker, ingestion skips the records the lost attempt
    wrote (the same producer GUID), and every region serves exactly the input. The master lists the finished
    application; the lost worker starts again and registers."""
    config = cluster_config(platform_env, tmp_path / "spark-home")
    try:
        spark_cluster.start(config)
        assert spark_cluster.alive_workers(config) == 2
        assert listening_beyond_loopback(spark_cluster.processes(config)) == {}

        store = platform_env.create_user_store("cluster", 2)
        data = generate(tmp_path / "in", 4000, files=2)
        stall = tmp_path / "stall.json"
        confs = {
            "venice.push.test.fail.partition": "1",
            "venice.push.test.fail.after.records": "700",
            "venice.push.test.stall.file": str(stall),
        }
        outcome: list[object] = []

        def job(_config: ClusterConfig, request: PushJobRequest) -> JobResult:
            return run_spark_job(config, request)  # the cluster's master, not the platform's local one

        def push() -> None:
            try:
                outcome.append(platform_env.push(store, job, data, confs=confs))
            except Exception as exc:  # noqa: BLE001 - reported by the test's thread
                outcome.append(exc)

        def stalled() -> str | None:
            if stall.exists():
                return stall.read_text()
            assert pushing.is_alive(), f"the push ended before its task stalled: {outcome}"
            return None

        pushing = threading.Thread(target=push)
        pushing.start()
        try:
            task = json.loads(wait_for("the stalled task", stalled, timeout=120))
            assert ".zip/venice_core/" in task["module"]  # the executors import the shipped package
            spark_cluster.kill_worker(config, worker_running(config, task["pid"]))
        finally:
            pushing.join(timeout=240)
        assert outcome == [1], outcome
        assert_serves(platform_env, store, expected_records(data))
        metrics = ReadClient("127.0.0.1", config.server_port("dc-1"))._request("GET", "/metrics")[2].decode()
        duplicates = [
            float(line.split()[-1])
            for line in metrics.splitlines()
            if line.startswith("venice_ingestion_duplicates_total") and f'store="{store}"' in line
        ]
        assert sum(duplicates) >= 700  # the task run again re-sent what the killed one had written

        state = spark_cluster.master_state(config)
        assert state is not None
        apps = [(app["name"], app["state"]) for app in state["completedapps"]]
        assert apps == [(f"venice-push-{store}-v1", "FINISHED")]
        assert spark_cluster.alive_workers(config) == 1
        lost = next(n for n in range(2) if spark_cluster.worker_process(config, n).pid() is None)
        spark_cluster.start_worker(config, lost)
        assert spark_cluster.alive_workers(config) == 2
    finally:
        with leaves_nothing(spark_cluster.processes(config), spark_cluster.ports(config)):
            spark_cluster.stop(config)
