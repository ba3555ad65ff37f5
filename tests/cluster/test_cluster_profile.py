"""The cluster profile (`venice --profile cluster up`), started once (`conftest.py`): three Kafka brokers, a
standalone Spark cluster, Airflow on Celery workers and Redis, PostgreSQL, three region-server instances per region.
`make demo-cluster`'s job (scripts/demo.sh) pushes 200k records through Airflow on every engine of it, checked exactly
in every region. The same push with one fault at a time is `test_cluster_faults.py` (`make test-cluster`)."""

from __future__ import annotations

import re
import subprocess

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.cluster import RECORDS, assert_exact, master_apps, task_hosts
from tests.support.inputs import expected_records
from tests.support.platform import PlatformEnv
from tests.support.profiles import CLUSTER_PROFILE, REPO
from venice_core.config import ENV_PROFILE
from venice_core.embedded import airflow, platform
from venice_core.pubsub import client_config

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.airflow,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.cluster,
]


def test_make_demo_cluster_pushes_through_airflow_on_every_engine_of_the_cluster(cluster: PlatformEnv) -> None:
    """`make demo-cluster`'s main job as its README line runs it (scripts/demo.sh, the profile chosen by
    `DEMO_PROFILE`, which it exports as `VENICE_PROFILE`), at 200k records, on the platform `venice --profile
    cluster up` started: the tasks run on the Celery workers, the Spark job on the standalone master's workers, the
    topics have three replicas (two in sync), every region serves it all and the demo reads it back; `venice status`
    lists every process of the profile healthy."""
    user = {k: v for k, v in cluster.env.items() if k != ENV_PROFILE}
    demo = subprocess.run(
        ["scripts/demo.sh"],
        cwd=REPO,
        env={**user, "DEMO_PROFILE": CLUSTER_PROFILE, "DEMO_RECORDS": str(RECORDS)},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    store, config = "demo_users", cluster.config
    assert "version 1 of 'demo_users' is serving in every region" in demo.stdout, demo.stdout
    for region in config.region_names:  # the demo's reads, a key of each end and the middle, in every region
        assert len(re.findall(rf"^{region} user-\d{{9}}: {{", demo.stdout, re.M)) == 3, demo.stdout
    assert_exact(cluster, store, expected_records(config.data_dir / "demo-data" / f"users-{RECORDS}"))
    # `venice status`: every process of the profile healthy (Airflow's API server, scheduler and DAG processors on
    # one line, `airflow`; its triggerer and each Celery worker on one of their own).
    status = cluster.venice("status")
    assert status.returncode == 0, status.stdout
    listed = {line.split()[0]: line.split() for line in status.stdout.splitlines() if line.strip()}
    core = {f"airflow-{name}" for name in airflow.COMPONENTS}
    assert {p.name for p in platform.plan(config) if p.name not in core} | {"airflow"} <= set(listed), status.stdout
    if config.hosts.enabled:  # the hosts profile: each process's line names its host's address
        listed["airflow-api-server"] = listed["airflow"]
        for process in platform.plan(config):
            assert listed[process.name][2] == config.hosts.address(process.name), status.stdout
    # The Spark job ran on the standalone cluster (in its two workers' executors), not in local mode.
    apps = master_apps(cluster)
    assert [app["state"] for app in apps["completedapps"] if app["name"].startswith(f"venice-push-{store}-")] == [
        "FINISHED"
    ], apps
    assert len([w for w in apps["workers"] if w["state"] == "ALIVE"]) == config.spark.workers
    # Every task of the run ran on a Celery worker (a task's host names its worker's Celery node), both took some.
    hosts = task_hosts(cluster, store)
    assert hosts and all(host.startswith("venice-worker-") for host in hosts.values()), hosts
    assert len({host.split("@")[0] for host in hosts.values()}) == config.airflow.celery_workers, hosts
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
