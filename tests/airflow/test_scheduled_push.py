"""A store's scheduled push through real Airflow: `venice store update --push-schedule --push-input` puts the store's
rollout DAG on its working hours, and the scheduler's runs push the template rendered for their logical date."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scripts.generate_dataset import generate
from tests.integration.test_push_e2e import _assert_serves, _expected
from tests.support.airflow_runs import failed_attempts
from tests.support.platform import PlatformEnv
from venice_core.controller import stores, versions
from venice_core.embedded import airflow
from venice_core.jobs.airflow_push import dag_id

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


def _scheduled_run_ended(env: PlatformEnv, store: str, timeout: float) -> dict:
    """The store's first scheduled run once it has ended."""
    api, deadline = airflow.AirflowApi(env.config), time.monotonic() + timeout
    while not api.has_dag(dag_id(store)):  # the dag-processor parses the DAG file every 20 s
        assert time.monotonic() < deadline, f"{dag_id(store)} never appeared"
        time.sleep(2)
    while True:
        run = api.latest_run(dag_id(store))
        if run and run["run_type"] == "scheduled" and run["state"] in ("success", "failed"):
            return run
        assert time.monotonic() < deadline, f"no scheduled run of {dag_id(store)} ended: {run}"
        time.sleep(2)


def _scheduled_run_past_its_first_step(env: PlatformEnv, store: str, timeout: float) -> str:
    """The id of the store's first scheduled run once its first step succeeded (later runs queue behind it)."""
    api, deadline = airflow.AirflowApi(env.config), time.monotonic() + timeout
    while True:
        runs = api.get(f"/api/v2/dags/{dag_id(store)}/dagRuns?run_type=scheduled&order_by=run_after&limit=1")
        first = runs["dag_runs"][0]["dag_run_id"] if runs["dag_runs"] else None
        if first and api.task_states(dag_id(store), first).get("start_of_push_job") == "success":
            return first
        assert time.monotonic() < deadline, f"no scheduled run of {dag_id(store)} started pushing: {runs}"
        time.sleep(2)


def test_scheduled_runs_push_the_day_dataset_and_fail_at_once_on_a_missing_input(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """Two stores pushed every minute, all day, every day, side by side (a scheduled run waits for its minute). One's
    template names the folder of the day's dataset (`{{ ds }}`): a scheduled run pushes it and every region serves
    it. The other's names a folder that does not exist: its run fails at its first step, once (no retry), saying
    which path, with no version."""
    env = airflow_env
    good, bad = env.create_user_store("asch"), env.create_user_store("asmiss")
    days = {(datetime.now(UTC) + timedelta(minutes=m)).strftime("%Y-%m-%d") for m in (0, 5)}  # around midnight too
    for day in days:  # the dates of the next runs
        data = generate(tmp_path / "data" / day, 500, files=2)
    schedule = ["--push-schedule", "* * * * *", "--push-days", "mon-sun", "--push-hours", "0-24"]
    env.cli("store", "update", good, *schedule, "--push-input", str(tmp_path / "data" / "{{ ds }}"), check=True)
    env.cli("store", "update", bad, *schedule, "--push-input", str(tmp_path / "missing" / "{{ ds }}") + "/", check=True)
    api = airflow.AirflowApi(env.config)
    try:
        failed = _scheduled_run_ended(env, bad, timeout=240)
        assert failed["state"] == "failed"
        ds = failed["logical_date"][:10]
        first = next(
            t for t in api.task_instances(dag_id(bad), failed["dag_run_id"]) if t["task_id"] == "start_of_push_job"
        )
        assert (first["state"], first["try_number"]) == ("failed", 1)
        log = airflow.home(env.config) / "logs" / f"dag_id={dag_id(bad)}" / f"run_id={failed['dag_run_id']}"
        said = (log / "task_id=start_of_push_job" / "attempt=1.log").read_text()
        assert f"input path {tmp_path}/missing/{ds}/ does not exist" in said
        assert stores.describe_store(env.meta, bad)["versions"] == []

        # Once the good store's first run is past its first step, no more runs: the schedules go, and a run the
        # scheduler made meanwhile stops at its first step (the run in flight pushes what it rendered).
        pushing = _scheduled_run_past_its_first_step(env, good, timeout=240)
    finally:
        for store in (good, bad):
            env.cli("store", "update", store, "--no-push-schedule", check=True)
    deadline = time.monotonic() + 900
    while env.serving(good) != {"dc-0": 1, "dc-1": 1, "dc-2": 1}:
        assert time.monotonic() < deadline, failed_attempts(env, good)
        time.sleep(3)
    deadline = time.monotonic() + 300
    while (state := api.run(dag_id(good), pushing)["state"]) not in ("success", "failed"):  # its last steps
        assert time.monotonic() < deadline, state
        time.sleep(2)
    assert state == "success", failed_attempts(env, good)
    deadline = time.monotonic() + 300
    while api.active_runs(dag_id(good)) or api.active_runs(dag_id(bad)):  # a run made meanwhile stops at its start
        assert time.monotonic() < deadline
        time.sleep(2)
    pushed = versions.get_version(env.meta, good, 1)
    assert pushed.push_job_id.startswith(f"{good}-scheduled__"), pushed.push_job_id
    assert [v["status"] for v in stores.describe_store(env.meta, good)["versions"]] == ["ONLINE"]
    _assert_serves(env, good, _expected(data))
