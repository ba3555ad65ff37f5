"""Airflow (its API server, scheduler and dag-processor) over the session's platform, one per test module: the
two modules of this folder run on two test workers at once, each with its own Airflow (a third module would cost
the suite a third Airflow start)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.airflow_runs import (
    EVENTS,
    EVENTS_TOPIC,
    REPO,
    USER_DAGS,
    ConsumedStore,
    write_settings,
)
from tests.support.leftovers import airflow_parts, leaves_nothing
from tests.support.platform import PlatformEnv
from tests.support.webhook import Webhook
from venice_core.config import load_config
from venice_core.embedded import airflow
from venice_core.pubsub import admin


@pytest.fixture(scope="module")
def events_webhook() -> Iterator[Webhook]:
    """Where the lifecycle-event hook POSTs every run's events."""
    webhook = Webhook()
    try:
        yield webhook
    finally:
        webhook.close()


@pytest.fixture(scope="module")
def consumed_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsumedStore]:
    """The store the downstream DAG of `airflow.user.dags.folder` is scheduled on (its Airflow's components and
    task processes read the name from their environment); a test creates it and pushes to it."""
    consumed = ConsumedStore.named(tmp_path_factory.mktemp("consumed"))
    with consumed.in_environment():
        yield consumed


@pytest.fixture(scope="module")
def airflow_env(
    platform_env: PlatformEnv,
    events_webhook: Webhook,
    consumed_store: ConsumedStore,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PlatformEnv]:
    """Airflow over the session's platform, with the test hooks configured (PROCEED unless a store says
    otherwise) and `venice push` going through Airflow, its default when Airflow is enabled."""
    properties = tmp_path_factory.mktemp("airflow") / "venice.properties"
    bootstrap = platform_env.config.region(platform_env.config.source_region).kafka_bootstrap
    admin.create_topic(bootstrap, EVENTS_TOPIC, 1)
    base = platform_env.properties.read_text().replace("airflow.enabled=false", "airflow.enabled=true")
    base += f"{EVENTS}.topic={EVENTS_TOPIC}\n{EVENTS}.kafka.bootstrap.servers={bootstrap}\n"
    base += f"{EVENTS}.webhook.url={events_webhook.url}\n"
    base += f"airflow.user.dags.folder={USER_DAGS}\n"  # the downstream DAG scheduled on a store's asset
    env = {**platform_env.env, "VENICE_CONFIG": str(properties), "PYTHONPATH": str(REPO)}
    write_settings(PlatformEnv(platform_env.home, properties, env), base, {})
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(REPO)  # Airflow's task processes import the test hook module
    config = load_config({"VENICE_CONFIG": str(properties)})
    try:
        airflow.start(config)
        yield PlatformEnv(platform_env.home, properties, env)
    finally:
        with leaves_nothing(*airflow_parts(config)):  # scheduler, workers, task processes, api-server: all gone
            airflow.stop(config)
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous


@pytest.fixture(autouse=True)
def _airflow_whole(request: pytest.FixtureRequest) -> None:
    """Each Airflow test finds every component of Airflow running: a test cut short by its timeout while it
    restarted Airflow (the scheduler starts last) must not leave the tests after it without a scheduler."""
    if "airflow_env" not in request.fixturenames:
        return
    config = load_config({"VENICE_CONFIG": str(request.getfixturevalue("airflow_env").properties)})
    if any(proc.pid() is None for proc in airflow.processes(config)):
        airflow.start(config)
