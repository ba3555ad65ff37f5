"""The cluster profile (`venice up --profile cluster`), started once on free ports (`conftest.py`): three Kafka
brokers, a standalone Spark cluster, Airflow on Celery workers and Redis, PostgreSQL, three region-server instances
per region. A push of 200k records through Airflow runs on every engine of it and is checked exactly in every region.
The same push with one fault at a time is `test_cluster_faults.py` (`make test-cluster`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.cluster import assert_exact, create_store, master_apps, start_push, task_hosts
from tests.support.platform import PlatformEnv
from venice_core.embedded import airflow, platform
from venice_core.pubsub import client_config

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow, pytest.mark.postgres, pytest.mark.redis]


def test_a_push_through_airflow_runs_on_every_engine_of_the_cluster(
    cluster: PlatformEnv, dataset: tuple[Path, dict[str, dict]]
) -> None:
    """200k records through the store's Airflow rollout: the tasks run on the Celery workers, the Spark job on
    the standalone master's workers, the topics have three replicas (two in sync), every region serves it all;
    `venice status` lists every process of the profile healthy."""
    data, expected = dataset
    store = create_store(cluster, "clusterpush")
    start_push(cluster, store, data).finish()
    assert_exact(cluster, store, expected)
    config = cluster.config
    # `venice status`: every process of the profile healthy (Airflow's API server, scheduler and DAG processors on
    # one line, `airflow`; its triggerer and each Celery worker on one of their own).
    status = cluster.venice("status")
    assert status.returncode == 0, status.stdout
    listed = {line.split()[0] for line in status.stdout.splitlines() if line.strip()}
    core = {f"airflow-{name}" for name in airflow.COMPONENTS}
    assert {p.name for p in platform.plan(config) if p.name not in core} | {"airflow"} <= listed, status.stdout
    # The Spark job ran on the standalone cluster (in its two workers' executors), not in local mode.
    apps = master_apps(cluster)
    assert [app["state"] for app in apps["completedapps"] if app["name"].startswith(f"venice-push-{store}-")] == [
        "FINISHED"
    ], apps
    assert len([w for w in apps["workers"] if w["state"] == "ALIVE"]) == config.spark_standalone.workers
    # Every task of the run ran on a Celery worker (a task's host names its worker's Celery node), both took some.
    hosts = task_hosts(cluster, store)
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
