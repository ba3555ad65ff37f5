"""Rollouts through real Airflow that stop or fail early, or survive crashes: hook failures under the ABORT policy,
refused configs and schemas, a missing input, Airflow killed mid-run, a step that fails on its own; and a repush
(`venice repush`: the DAG's Spark step runs the repush job over the store's own version topic) that a hook aborts,
as any push."""

from __future__ import annotations

import json
import time
import urllib.parse
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scripts.generate_dataset import generate
from tests.support.airflow_runs import (
    CLUSTER_SETTINGS,
    HOOKS,
    asset_events,
    cluster_settings,
    crash_and_restart_airflow,
    failed_attempts,
    kill_spark_push,
    step_state,
    wait_for_data_in_version_topic,
    wait_for_step,
)
from tests.support.drain import SteadyProducer, rt_puts
from tests.support.inputs import expected_records
from tests.support.jobs import RecordsJob
from tests.support.leftovers import airflow_parts, listening_beyond_loopback
from tests.support.platform import PlatformEnv
from tests.support.reads import assert_serves, wait_for
from venice_core.client import ReadClient
from venice_core.controller import drain, stores, streams, versions
from venice_core.deployment import airflow as deployment
from venice_core.orchestration.airflow.api import AirflowApi
from venice_core.protocol import serde
from venice_core.pubsub import admin
from venice_core.rollout.names import rollout_dag_id
from venice_core.streams import control

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


def test_hook_failures_under_abort_policy_stop_before_any_version(airflow_env: PlatformEnv, tmp_path: Path) -> None:
    """Policy ABORT (fail closed): a hook that raises, or times out, at pre_start_of_push_job stops the run before
    a version exists; nothing changes in any region."""
    data = generate(tmp_path / "in", 50, files=1)
    store = airflow_env.create_user_store("afa")
    with cluster_settings(airflow_env, **{"venice.store.lifecycle.hooks.failure.policy": "ABORT"}):
        for failure, said in (
            ("raise", "RuntimeError: pre_start_of_push_job cannot decide"),
            ("timeout", "timed out after 2s"),
        ):
            airflow_env.cli(
                "store", "update", store, "--hook-config", f"fail.pre_start_of_push_job={failure}", check=True
            )
            result = airflow_env.venice("push", store, "--input", str(data), timeout=600)
            assert result.returncode == 3, result.stdout + result.stderr
            assert (
                "error: rollout run failed at start_of_push_job; no version was created: FailWhereConfigured answered "
                f"ABORT at pre_start_of_push_job ({said})"
            ) in result.stderr
            assert airflow_env.serving(store) == {"dc-0": 0, "dc-1": 0, "dc-2": 0}
            assert json.loads(airflow_env.cli("store", "show", store, "--json", check=True).stdout)["versions"] == []


def test_schema_hooks_refuse_an_auto_registering_push_and_a_missing_input_fails_at_once(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """A push whose input brings a new field, to a store that auto-registers: pre_schema_registration's ABORT
    stops the run at its schema_registration step, before any version, and registers nothing. A push of input that
    does not exist fails before Airflow is asked anything: one line, in under 5 s, no run, no version."""
    store = airflow_env.create_user_store("afs", auto_register_schemas=True)
    airflow_env.cli("store", "update", store, "--hook-config", "answer.pre_schema_registration=ABORT", check=True)
    data = generate(tmp_path / "in", 50, files=1)
    (part,) = data.glob("*.parquet")
    table = pq.read_table(part)
    pq.write_table(table.append_column("city", pa.array(["Oslo"] * table.num_rows)), part)
    result = airflow_env.venice("push", store, "--input", str(data), timeout=600)
    assert result.returncode == 3, result.stdout + result.stderr
    assert (
        "rollout run failed at schema_registration; no version was created: AnswerFromConfig answered ABORT at "
        "pre_schema_registration"
    ) in result.stderr
    shown = json.loads(airflow_env.cli("store", "show", store, "--json", check=True).stdout)
    assert shown["versions"] == [] and len(shown["value_schemas"]) == 1

    api = AirflowApi(airflow_env.config)
    last_run = api.latest_run(f"venice_push__{store}")["dag_run_id"]
    started = time.monotonic()
    missing = airflow_env.cli("push", store, "--input", str(tmp_path / "no-such-path"))
    assert time.monotonic() - started < 5
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1 and missing.stderr.startswith("error: ")
    assert "no-such-path" in missing.stderr
    assert api.latest_run(f"venice_push__{store}")["dag_run_id"] == last_run  # nothing triggered
    assert json.loads(airflow_env.cli("store", "show", store, "--json", check=True).stdout)["versions"] == []


def test_airflow_listens_on_loopback_only(airflow_env: PlatformEnv) -> None:
    """Every component of the platform's Airflow, and every process they started, listens on 127.0.0.1 only (the
    scheduler's log server, which Airflow binds to every interface, is not started)."""
    parts, _, _ = airflow_parts(airflow_env.config)
    assert all(part.pid() is not None for part in parts)
    assert listening_beyond_loopback(parts) == {}


def test_invalid_store_level_hook_config_is_refused(airflow_env: PlatformEnv, tmp_path: Path) -> None:
    """A hook added to the cluster that rejects a store's existing configs: `venice store update` refuses new
    ones with the hook's reason, and the store's next run stops at validate_hook_config before any version."""
    store = airflow_env.create_user_store("afv")
    airflow_env.cli("store", "update", store, "--hook-config", "answer.post_end_of_push_job=PROCEED", check=True)
    hooks = CLUSTER_SETTINGS["venice.store.lifecycle.hooks"] + f",{HOOKS}.StrictConfig"
    with cluster_settings(airflow_env, **{"venice.store.lifecycle.hooks": hooks}):
        refused = airflow_env.cli("store", "update", store, "--hook-config", "min.delay.seconds=soon")
        assert refused.returncode != 0 and refused.stderr.startswith(
            f"error: store-level hook config of '{store}' refused: StrictConfig: unknown key"
        )
        result = airflow_env.venice("push", store, "--input", str(generate(tmp_path / "in", 20, files=1)), timeout=600)
    assert result.returncode == 3, result.stdout + result.stderr
    assert (
        "rollout run failed at start_of_push_job; no version was created: StrictConfig answered ABORT at "
        "validate_hook_config (unknown key 'answer.post_end_of_push_job')"
    ) in result.stderr


@pytest.mark.timeout(1200)  # two restarts of Airflow: 600 s under the suite's load
def test_airflow_killed_mid_spark_push_and_while_awaiting_approval_the_run_goes_on(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """All of Airflow is SIGKILLed twice during one run, as a crash would.

    First while the Spark push writes (its spark-submit dies with it): started again, the scheduler resets the
    orphaned task and runs it again; the producers' deterministic GUIDs make the re-written records duplicates
    that ingestion skips. Then while dc-1 waits for a person's approval (its human-in-the-loop task): the wait
    survives the restart, and the approval, given then, lets the run finish. Every region serves exactly the
    input."""
    store = airflow_env.create_user_store("afk", 2)
    airflow_env.cli("store", "update", store, "--hook-config", "manual.approval.regions=dc-1", check=True)
    data = generate(tmp_path / "in", 20_000, files=1)
    push = airflow_env.venice_background("push", store, "--input", str(data))
    try:
        wait_for_step(airflow_env, store, "spark_push", "running", push)
        wait_for_data_in_version_topic(airflow_env, store, 1, 2, push)  # the executors are writing
        crash_and_restart_airflow(airflow_env)

        wait_for_step(airflow_env, store, "dc_1.approval", "awaiting_input", push)
        assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 0, "dc-2": 0}
        crash_and_restart_airflow(airflow_env)
        assert step_state(airflow_env, store, "dc_1.approval") == "awaiting_input"
        approved = airflow_env.cli("rollout", "approve", store, "--region", "dc-1", check=True)
        assert "approved the swap of" in approved.stdout and "its Airflow run goes on" in approved.stdout
        out, err = push.communicate(timeout=900)
    finally:
        if push.poll() is None:
            push.kill()
    assert push.returncode == 0, (out + err, failed_attempts(airflow_env, store))
    assert "still following the run" in out  # the follower rode out the restarts
    assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    assert_serves(airflow_env, store, expected_records(data))
    status = json.loads(airflow_env.cli("rollout", "status", store, "--json", check=True).stdout)
    assert status["state"] == "success" and status["version"]["status"] == "ONLINE"
    steps = {s["task"]: s for s in status["steps"]}
    assert steps["dc_1.approval"]["state"] == "success"
    assert steps["spark_push"]["tries"] >= 2


def test_a_step_that_fails_on_its_own_is_retried_then_ends_the_push(airflow_env: PlatformEnv, tmp_path: Path) -> None:
    """The Spark push's JVM is SIGKILLed as it starts (as a lost machine would), on every try: the step fails,
    Airflow retries it after `rollout.step.retry.delay.seconds`, 1 + `rollout.step.retries` tries in all; then the
    run fails and its failure callback kills the version; the previous one keeps serving. (A step that runs again
    and succeeds, writing duplicates that ingestion skips, is the Airflow-crash test above.)"""
    store = airflow_env.create_user_store("afr", 2)
    airflow_env.push(store, RecordsJob(expected_records(generate(tmp_path / "v1", 100, files=1))))  # v1, directly
    push = airflow_env.venice_background("push", store, "--input", str(generate(tmp_path / "v2", 100, files=1)))
    out, err = kill_spark_push(store, push, times=3)
    assert push.returncode == 3, out + err
    # The failed step ends the push at once, and the version says which step and why (the JVM killed: -9).
    assert err.startswith("error: rollout run failed at spark_push; version 2 is KILLED: spark_push failed: ")
    assert err.endswith("Error code is: -9.\n") and err.count("\n") == 1
    status = json.loads(airflow_env.cli("rollout", "status", store, "--json", check=True).stdout)
    assert {s["task"]: s["tries"] for s in status["steps"]}["spark_push"] == 3  # 1 + rollout.step.retries
    assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}


def test_a_repush_through_airflow_aborted_at_the_second_region_behaves_like_a_push(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """Version 1 written directly (200 records, 2 partitions); a repush through the DAG asked as seed 003 asks it,
    `venice push STORE --conf source.kafka=true` (which is `venice repush STORE`), with a hook that ABORTs dc-1's
    swap: exit 3 and one error line naming the abort, dc-0 serves the repushed version 2, dc-1 and
    dc-2 still version 1. Version 2's push job id is Venice's repush id, its source dc-0's version topic of version
    1, pinned with each partition's end offset, and what dc-0 serves is the source's data."""
    env = airflow_env
    store = env.create_user_store("afrp", 2)
    expected = expected_records(generate(tmp_path / "v1", 200, files=1))
    env.push(store, RecordsJob(expected))  # v1, directly
    env.cli("store", "update", store, "--hook-config", "answer.pre_store_version_swap.dc-1=ABORT", check=True)

    result = env.venice(
        "push", store, "--conf", "source.kafka=true", "--conf", "kafka.input.max.records.per.mapper=150", timeout=900
    )
    assert result.returncode == 3, result.stdout + result.stderr
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("error: rollout run failed at dc_1.pre_swap_abort; "), errors
    assert "version 2 is PARTIALLY_ONLINE: aborted by a hook at pre_store_version_swap in dc-1" in errors[0]
    assert f"repushing '{store}' (now from version 1 in dc-0" in result.stdout
    assert env.serving(store) == {"dc-0": 2, "dc-1": 1, "dc-2": 1}

    v2 = versions.get_version(env.meta, store, 2)
    assert v2.push_job_id.startswith(f"venice_re_push_{store}-manual__"), v2.push_job_id
    source = env.config.region("dc-0")
    confs = v2.lifecycle.job_confs
    assert confs["source.kafka"] == "true" and confs["kafka.input.topic"] == source.version_topic(store, 1)
    ends = admin.end_offsets(source.kafka_bootstrap, source.version_topic(store, 1), 2)
    assert json.loads(confs["kafka.input.end.offsets"]) == {"0": ends[0], "1": ends[1]}  # v1's topic is final
    client = ReadClient("127.0.0.1", env.config.server_port("dc-0"))
    keys = sorted(expected)
    assert client.batch_get(store, keys) == expected  # version 2, rebuilt from version 1's topic
    assert asset_events(env, store) == []  # not every region serves it: nothing announced


def test_a_stream_pipeline_upgraded_through_its_dag_and_a_drain_that_times_out_alerts(
    airflow_env: PlatformEnv,
) -> None:
    """The map-only pipeline (two source partitions, no shuffle) through its `venice_upgrade__<pipeline>` DAG.
    First a drain that cannot finish (a task hangs mid-batch): past `--timeout` the job stops without cleaning up,
    the run branches to its alert and fails, starts nothing, and `venice stream status` says why. Started again, the
    pipeline replays the uncommitted batch (its writes skipped as duplicates) and ignores the kept notification, which
    is stale. Then `venice stream upgrade`: drained, a new run from the drained offsets, consuming. Every event is
    written exactly once across all three runs."""
    env, config, meta = airflow_env, airflow_env.config, airflow_env.meta
    store = f"mapped_{uuid.uuid4().hex[:8]}"
    stores.create_store(meta, config, store, '"string"', '"long"', partitions=2)
    stores.update_store(meta, config, store, hybrid_rewind_seconds=3600)
    bootstrap = config.region("dc-0").kafka_bootstrap
    source = f"events_{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, source, 2)
    producer = SteadyProducer(bootstrap, source, 2, rate=200).start()
    name = f"u{uuid.uuid4().hex[:8]}"
    job = control.process(config, name)

    def puts() -> list[tuple[str, int]]:
        return rt_puts(env, "dc-0", store, 2, serde.parse("string"), serde.parse("long"))

    try:
        env.cli(
            "stream", "start", name, "--store", store, "--source-topic", source, "--region", "dc-0",
            "--key-field", "user", "--value-fields", "n", "--event-time-field", "ts", "--trigger-seconds", "0.5",
            "--conf", "spark.venice.stream.test.hang.after.records=5", check=True,
        )  # fmt: skip
        first_run = streams.get_pipeline(meta, name).run_id
        wait_for("the hung task's writes", lambda: len(puts()) >= 5)
        failed = env.cli("stream", "drain", name, "--timeout", "3")
        assert failed.returncode == 3, failed.stdout + failed.stderr
        assert failed.stderr.startswith(
            f"error: venice_upgrade__{name} run failed at alert; pipeline {name} is failed: drain timed out after 3s "
            "(batch 0 in flight): stopped without cleaning up"
        ), failed.stderr
        assert "start_new_run" not in failed.stdout and "alert: failed" in failed.stdout, failed.stdout
        status = env.cli("stream", "status", name, check=True).stdout
        assert status.startswith(f"{name}: failed: drain timed out after 3s"), status
        assert [n.notification.run_id for n in drain.read(meta, name)] == [first_run]  # kept
        wait_for("the timed-out job to exit", lambda: job.pid() is None)

        env.cli("stream", "start", name, "--conf", "spark.ui.enabled=false", check=True)  # replays batch 0
        upgraded = env.cli("stream", "upgrade", name, "--trigger-seconds", "0.4", "--timeout", "120")
        assert upgraded.returncode == 0, upgraded.stdout + upgraded.stderr
        assert "wait_consuming: success" in upgraded.stdout and f"{name}: running" in upgraded.stdout, upgraded.stdout
        record = streams.get_pipeline(meta, name)
        assert record.args["trigger_seconds"] == 0.4 and record.state == streams.RUNNING
        assert drain.read(meta, name) == [n for n in drain.read(meta, name) if n.notification.run_id == first_run]
        written = len(puts())
        wait_for("the upgraded run writing events", lambda: len(puts()) > written)  # live, not only the backlog
        produced = producer.stop()
        wait_for("every event written", lambda: len(puts()) >= len(produced), timeout=300)
        assert sorted(puts()) == sorted((p.event["user"], p.event["n"]) for p in produced)  # once each
    finally:
        producer.stop()
        job.stop(timeout=10)


def _first_scheduled_run_ended(env: PlatformEnv, store: str, timeout: float) -> dict:
    """The store's first scheduled run, once it has ended (asked every 2 s: each poll costs the API server)."""
    api, dag = AirflowApi(env.config), rollout_dag_id(store)

    def first_ended() -> dict | None:
        if not api.has_dag(dag):  # not parsed yet
            return None
        runs = api.get(f"/api/v2/dags/{dag}/dagRuns?run_type=scheduled&order_by=run_after&limit=1")["dag_runs"]
        return runs[0] if runs and runs[0]["state"] in ("success", "failed") else None

    return wait_for(f"the first scheduled run of {dag} to end", first_ended, timeout=timeout, interval=2)


def test_scheduled_runs_render_their_input_for_their_date_and_a_missing_one_fails_at_once(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """Two stores pushed every minute, all day, every day (`--push-schedule`), side by side. One's `--push-input`
    names the folder of the day's dataset (`{{ ds }}`): its first scheduled run renders the template for its
    logical date, pins it (its first step's XCom), finds the input and reads its schema, and is then stopped by a
    hook at version creation (the rest is any push's, tested above; here it would only cost a Spark job). The
    other's names a folder that does not exist: its run fails at its first step, once (no retry), saying which
    path, with no version."""
    env = airflow_env
    good, bad = env.create_user_store("asch"), env.create_user_store("asmiss")
    env.cli("store", "update", good, "--hook-config", "answer.pre_store_version_creation=ABORT", check=True)
    days = {(datetime.now(UTC) + timedelta(minutes=m)).strftime("%Y-%m-%d") for m in (-2, 5)}  # around midnight too
    for day in days:  # the dates of the first runs
        generate(tmp_path / "data" / day, 20, files=1)
    schedule = ["--push-schedule", "* * * * *", "--push-days", "mon-sun", "--push-hours", "0-24"]
    env.cli("store", "update", good, *schedule, "--push-input", str(tmp_path / "data" / "{{ ds }}"), check=True)
    env.cli("store", "update", bad, *schedule, "--push-input", str(tmp_path / "missing" / "{{ ds }}") + "/", check=True)
    api = AirflowApi(env.config)
    try:
        failed = _first_scheduled_run_ended(env, bad, timeout=300)
        stopped = _first_scheduled_run_ended(env, good, timeout=300)
    finally:  # no more runs after this test
        for store in (good, bad):
            env.cli("store", "update", store, "--no-push-schedule", check=True)
    assert failed["state"] == "failed"
    ds = failed["logical_date"][:10]
    first = next(
        t for t in api.task_instances(rollout_dag_id(bad), failed["dag_run_id"]) if t["task_id"] == "start_of_push_job"
    )
    assert (first["state"], first["try_number"]) == ("failed", 1)
    log = deployment.home(env.config) / "logs" / f"dag_id={rollout_dag_id(bad)}" / f"run_id={failed['dag_run_id']}"
    said = (log / "task_id=start_of_push_job" / "attempt=1.log").read_text()
    assert f"input path {tmp_path}/missing/{ds}/ does not exist" in said
    # ... and kept as the step's XCom `failure`, where `venice rollout status` and `venice push` read it.
    reason = api.xcom(rollout_dag_id(bad), failed["dag_run_id"], "start_of_push_job", "failure")
    assert reason == f"input path {tmp_path}/missing/{ds}/ does not exist"
    assert stores.describe_store(env.meta, bad).versions == ()

    run = urllib.parse.quote(stopped["dag_run_id"])
    states = api.task_states(rollout_dag_id(good), stopped["dag_run_id"])
    assert states["schema_registration"] == "success" and states["pre_version_creation_abort"] == "failed", states
    pinned = api.get(
        f"/api/v2/dags/{rollout_dag_id(good)}/dagRuns/{run}/taskInstances/start_of_push_job/xcomEntries/return_value"
    )
    assert pinned["value"] == str(tmp_path / "data" / stopped["logical_date"][:10])
    assert stores.describe_store(env.meta, good).versions == ()
