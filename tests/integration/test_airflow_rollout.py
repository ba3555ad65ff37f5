"""Rollouts through real Airflow (`airflow standalone`): `venice push` triggers the store's DAG run over the
session's platform; the hooks answer, fail or time out as the store-level configs tell them, and the cluster
config (re-read by every task) sets the failure policy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from scripts.generate_dataset import generate
from tests.integration.test_push_e2e import _assert_serves, _expected, _write
from tests.support.browser import rollout_tab, status_without_valid_token
from tests.support.da_vinci import heartbeating_instance
from tests.support.jobs import RecordsJob
from tests.support.platform import PlatformEnv
from venice_core.client import ReadClient
from venice_core.config import load_config
from venice_core.controller import da_vinci, stores
from venice_core.embedded import airflow
from venice_core.embedded.airflow import AirflowApi
from venice_core.hooks.records import metrics_text
from venice_core.jobs.airflow_push import dag_id
from venice_core.meta import MetadataStore
from venice_core.meta.models import HookInvocationRecord
from venice_core.pubsub import admin

pytestmark = [pytest.mark.spark, pytest.mark.airflow]
REPO = Path(__file__).parents[2]
HOOKS = "tests.hooks_fixtures.sample_hooks"
INTERVAL = 2.0
CLUSTER_SETTINGS = {
    "venice.store.lifecycle.hooks": f"{HOOKS}.AnswerFromConfig,{HOOKS}.FailWhereConfigured,"
    "venice_core.hooks.builtin.ManualApproval",
    "venice.store.lifecycle.hooks.wait.interval.seconds": str(INTERVAL),
    "venice.store.lifecycle.hooks.timeout.seconds": "2",
    "venice.store.lifecycle.hooks.configs.slow.seconds": "4",
    "venice.store.lifecycle.hooks.configs.manual.approval.regions": "",  # stores opt in
    "rollout.step.retry.delay.seconds": "2",
}


def _write_settings(env: PlatformEnv, base: str, overrides: dict[str, str]) -> None:
    settings = {**CLUSTER_SETTINGS, "venice.store.lifecycle.hooks.configs.state.dir": str(env.home / "hook-state")}
    settings.update(overrides)
    env.properties.write_text(base + "".join(f"{k}={v}\n" for k, v in settings.items()))


@contextmanager
def cluster_settings(env: PlatformEnv, **overrides: str) -> Iterator[None]:
    """Change the cluster config for one test: Airflow's tasks read it afresh, as after an operator's edit."""
    base = env.properties.read_text().split("venice.store.lifecycle.hooks=")[0]
    _write_settings(env, base, overrides)
    try:
        yield
    finally:
        _write_settings(env, base, {})


def _metric(env: PlatformEnv, name: str, **labels: str) -> float:
    """One counter of `venice metrics` (0 when absent)."""
    text = metrics_text(env.meta)
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    match = re.search(rf"^{name}{{{re.escape(wanted)}}} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def _invocations(env: PlatformEnv, store: str, function: str, region: str) -> list[HookInvocationRecord]:
    meta = MetadataStore(env.config.metadata_db_url)
    try:
        with meta.session() as session:
            r = HookInvocationRecord
            query = select(r).where(r.store_name == store, r.function == function, r.region == region)
            return list(session.scalars(query.order_by(r.id)))
    finally:
        meta.dispose()


@pytest.fixture(scope="module")
def airflow_env(platform_env: PlatformEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformEnv]:
    """Airflow over the session's platform, with the test hooks configured (PROCEED unless a store says
    otherwise) and `venice push` going through Airflow, its default when Airflow is enabled."""
    properties = tmp_path_factory.mktemp("airflow") / "venice.properties"
    base = platform_env.properties.read_text().replace("airflow.enabled=false", "airflow.enabled=true")
    env = {**platform_env.env, "VENICE_CONFIG": str(properties), "PYTHONPATH": str(REPO)}
    _write_settings(PlatformEnv(platform_env.home, properties, env), base, {})
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(REPO)  # Airflow's task processes import the test hook module
    config = load_config({"VENICE_CONFIG": str(properties)})
    try:
        airflow.start(config)
        yield PlatformEnv(platform_env.home, properties, env)
    finally:
        airflow.stop(config)
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous


def test_rollback_after_a_swap_returns_each_swapped_region_to_its_previous_version(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """ROLLBACK at dc-1's post swap: dc-0 and dc-1, which had swapped, go back to version 1; dc-2 never swaps. (An
    ABORT through Airflow is covered by the WAIT-past-the-maximum and ABORT-policy runs below, a hook's explicit
    ABORT at pre swap by the local rollout's tests.)"""
    store = airflow_env.create_user_store("af")
    airflow_env.push(store, RecordsJob(_expected(generate(tmp_path / "v1", 300, files=1, seed=0))))  # v1, directly
    airflow_env.cli(
        "store", "update", store, "--hook-config", "answer.post_store_version_swap.dc-1=ROLLBACK", check=True
    )
    result = airflow_env.venice("push", store, "--input", str(generate(tmp_path / "v2", 300, files=1)), timeout=900)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "failed at dc_1.post_swap; version 2 is ROLLED_BACK" in result.stderr
    assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}  # each region back where it was


def test_a_rollout_proceeds_past_failing_hooks_re_asks_on_wait_and_waits_for_da_vinci_instances(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """One DAG run through every step. Policy PROCEED (Venice's contract): a hook that raises in dc-0 and one that
    times out in dc-1 are recorded and counted, and the rollout goes on; in dc-2 the hook answers WAIT twice, and
    the sensor re-asks each interval. A Da Vinci instance registered in dc-1 (heartbeating, as a client does) has
    dc-1's ingestion gate opened, and holds dc-1's Da Vinci swap until it reports the version ingested; the other
    regions have no instance and do not wait. The push's configs (`venice push --conf`) reach the Spark job: its
    input holds a key twice with different values, which `allow.duplicate.key=true` lets through. Then every
    region serves the input."""
    store = airflow_env.create_user_store("afp")
    failing = ("hook_class", f"{HOOKS}.FailWhereConfigured"), ("function", "pre_store_version_swap")
    before = {
        m: _metric(airflow_env, m, **dict(failing))
        for m in ("venice_hook_failures_total", "venice_hook_timeouts_total")
    }
    stores.update_store(
        airflow_env.meta,
        airflow_env.config,
        store,
        hook_configs={
            "fail.pre_store_version_swap.dc-0": "raise",
            "fail.pre_store_version_swap.dc-1": "timeout",
            "answer.pre_store_version_swap.dc-2": "WAIT*2",
        },
    )
    data = generate(tmp_path / "in", 500, files=1)
    twice = [{"key": "twice", "name": "n", "age": age, "score": 1.0} for age in (1, 2)]
    pq.write_table(
        pa.Table.from_pylist(twice, pq.read_schema(next(data.glob("*.parquet")))), data / "part-twice.parquet"
    )
    meta = airflow_env.meta
    with heartbeating_instance(meta, store, "dc-1", "client-a") as client:
        push = airflow_env.venice_background("push", store, "--input", str(data), "--conf", "allow.duplicate.key=true")
        try:
            _wait_for_step(airflow_env, store, "dc_1.da_vinci_swap", "up_for_reschedule", push)
            assert da_vinci.gate_open(meta, store, 1, "dc-1")
            assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 0, "dc-2": 0}
            client.ingested(1)
            out, err = push.communicate(timeout=600)
        finally:
            if push.poll() is None:
                push.kill()
    assert push.returncode == 0, out + err
    assert "dc_2.post_swap: success" in out and "end_of_push_job: success" in out
    assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    expected = _expected(data)
    assert expected.pop("twice")["age"] in (1, 2)  # one of the two, as the input allowed
    _assert_serves(airflow_env, store, expected)
    for region in airflow_env.config.region_names:
        assert ReadClient("127.0.0.1", airflow_env.config.server_port(region)).get(store, "twice")["age"] in (1, 2)

    assert "FailWhereConfigured answered PROCEED at pre_store_version_swap in dc-0: RuntimeError: " in out
    assert "FailWhereConfigured answered PROCEED at pre_store_version_swap in dc-1: timed out after 2s" in out
    assert out.count("AnswerFromConfig answered WAIT at pre_store_version_swap in dc-2") == 2
    assert (
        _metric(airflow_env, "venice_hook_failures_total", **dict(failing))
        >= before["venice_hook_failures_total"] + 1  # +1 per ask (a retried poke asks again)
    )
    assert (
        _metric(airflow_env, "venice_hook_timeouts_total", **dict(failing))
        >= before["venice_hook_timeouts_total"] + 1  # +1 per ask (a retried poke asks again)
    )
    asked = _invocations(airflow_env, store, "pre_store_version_swap", "dc-2")
    answers = [i.outcome for i in asked if i.hook_class.endswith("AnswerFromConfig")]
    # A poke that Airflow's reschedule race (apache/airflow#71172) fails after it PROCEEDed is retried and asks again.
    assert answers[:3] == ["WAIT", "WAIT", "PROCEED"] and set(answers[3:]) <= {"PROCEED"}, answers
    times = [i.created_at for i in asked if i.hook_class.endswith("AnswerFromConfig")][:3]
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    assert all(INTERVAL <= gap < INTERVAL + 30 for gap in gaps), gaps  # re-asked after the interval, not before


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


def test_hook_failures_under_wait_policy_wait_then_abort_past_the_maximum(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """Policy WAIT: a hook that raises twice in dc-0 holds the swap back two intervals, then the rollout goes on;
    one that keeps timing out in dc-1 holds it until the maximum wait, which ends the rollout with an explicit
    ABORT: dc-0 keeps the new version, dc-1 and dc-2 the old one, and the version says why."""
    store = airflow_env.create_user_store("afw")
    airflow_env.push(store, RecordsJob(_expected(generate(tmp_path / "v1", 50, files=1))))  # v1, directly
    airflow_env.cli(
        "store",
        "update",
        store,
        "--hook-config",
        "fail.pre_store_version_swap.dc-0=raise*2",
        "--hook-config",
        "fail.pre_store_version_swap.dc-1=timeout",
        check=True,
    )
    settings = {
        "venice.store.lifecycle.hooks.failure.policy": "WAIT",
        "venice.store.lifecycle.hooks.wait.max.seconds": "12",
    }
    with cluster_settings(airflow_env, **settings):
        result = airflow_env.venice("push", store, "--input", str(generate(tmp_path / "v2", 50, files=1)), timeout=900)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "rollout run failed at dc_1.pre_swap; version 2 is PARTIALLY_ONLINE: aborted by a hook at " in result.stderr
    assert "pre_store_version_swap in dc-1 (still WAIT after 1" in result.stderr
    assert airflow_env.serving(store) == {"dc-0": 2, "dc-1": 1, "dc-2": 1}
    dc0 = [i for i in _invocations(airflow_env, store, "pre_store_version_swap", "dc-0") if i.version == 2]
    dc0_answers = [(i.outcome, bool(i.error)) for i in dc0 if i.hook_class.endswith("FailWhereConfigured")]
    # A poke failed by Airflow's reschedule race after it PROCEEDed is retried and asks again.
    assert dc0_answers[:3] == [("WAIT", True), ("WAIT", True), ("PROCEED", False)], dc0_answers
    assert set(dc0_answers[3:]) <= {("PROCEED", False)}, dc0_answers
    dc1 = [i for i in _invocations(airflow_env, store, "pre_store_version_swap", "dc-1") if i.version == 2]
    failing = [i for i in dc1 if i.hook_class.endswith("FailWhereConfigured")]
    assert failing and all(i.timed_out and i.outcome == "WAIT" for i in failing)
    assert failing[-1].created_at - failing[0].created_at >= 12 - INTERVAL - 4

    # The run's Rollout tab in the Airflow UI, in a real browser; its page refuses a client without a valid token.
    pages = f"{airflow.base_url(airflow_env.config)}/venice/rollout/"
    for page in (pages, f"{pages}{dag_id(store)}"):
        assert status_without_valid_token(page) == 401 and status_without_valid_token(page, "forged") == 403
    run_id = AirflowApi(airflow_env.config).latest_run(dag_id(store))["dag_run_id"]
    tab = rollout_tab(airflow_env.config, store, run_id, tmp_path)
    assert tab.serving == {"dc-0": "v2", "dc-1": "v1", "dc-2": "v1"} and tab.version_status == "PARTIALLY_ONLINE"
    assert tab.outcomes["dc-1"].startswith("ABORT at pre_swap\naborted by a hook at pre_store_version_swap in dc-1")
    assert "(still WAIT after 1" in tab.outcomes["dc-1"] and tab.outcomes["dc-0"] == tab.outcomes["dc-2"] == ""
    assert "WAIT" in tab.steps["dc-1"] and "timed out after 2s" in tab.steps["dc-1"] and tab.screenshot.exists()
    assert "dc-0 v2, dc-1 v1, dc-2 v1" in tab.listed and "failed" in tab.listed  # Browse > Rollouts


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
        _wait_for_step(airflow_env, store, "spark_push", "running", push)
        _wait_for_data_in_version_topic(airflow_env, store, 1, 2, push)  # the executors are writing
        _crash_and_restart_airflow(airflow_env)

        _wait_for_step(airflow_env, store, "dc_1.approval", "awaiting_input", push)
        assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 0, "dc-2": 0}
        _crash_and_restart_airflow(airflow_env)
        assert _step_state(airflow_env, store, "dc_1.approval") == "awaiting_input"
        approved = airflow_env.cli("rollout", "approve", store, "--region", "dc-1", check=True)
        assert "approved the swap of" in approved.stdout and "its Airflow run goes on" in approved.stdout
        out, err = push.communicate(timeout=900)
    finally:
        if push.poll() is None:
            push.kill()
    assert push.returncode == 0, out + err
    assert "still following the run" in out  # the follower rode out the restarts
    assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    _assert_serves(airflow_env, store, _expected(data))
    status = json.loads(airflow_env.cli("rollout", "status", store, "--json", check=True).stdout)
    assert status["state"] == "success" and status["version"]["status"] == "ONLINE"
    steps = {s["task"]: s for s in status["steps"]}
    assert steps["dc_1.approval"]["state"] == "success"
    assert steps["spark_push"]["tries"] >= 2


def test_refused_input_fails_the_push_once_and_the_previous_version_keeps_serving(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """Input the push job refuses ends the rollout at spark_push on the first try (retrying would not change
    it): one error line that names the problem, the version killed with that reason, the old version serving.
    (The same input accepted with `--conf allow.duplicate.key=true` is part of the all-steps run above.)"""
    store = airflow_env.create_user_store("afb", 1)
    good = generate(tmp_path / "good", 100, files=1)
    airflow_env.push(store, RecordsJob(_expected(good)))  # v1, directly
    rows = [{"key": k, "name": "n", "age": age, "score": 1.0} for k, age in (("a", 1), ("a", 2), ("b", 3))]
    bad = _write(tmp_path / "bad", rows)
    result = airflow_env.venice("push", store, "--input", str(bad), timeout=900)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stderr.startswith(
        "error: rollout run failed at spark_push; version 2 is KILLED: "
        "the push job refused its input: duplicate key with different values in the input"
    )
    assert len(result.stderr.splitlines()) == 1
    status = json.loads(airflow_env.cli("rollout", "status", store, "--json", check=True).stdout)
    assert {s["task"]: s["tries"] for s in status["steps"]}["spark_push"] == 1
    assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    _assert_serves(airflow_env, store, _expected(good))


def test_a_step_that_fails_on_its_own_is_retried_then_ends_the_push(airflow_env: PlatformEnv, tmp_path: Path) -> None:
    """The Spark push's JVM is SIGKILLed as it starts (as a lost machine would), on every try: the step fails,
    Airflow retries it after `rollout.step.retry.delay.seconds`, 1 + `rollout.step.retries` tries in all; then the
    run fails and its failure callback kills the version; the previous one keeps serving. (A step that runs again
    and succeeds, writing duplicates that ingestion skips, is the Airflow-crash test above.)"""
    store = airflow_env.create_user_store("afr", 2)
    airflow_env.push(store, RecordsJob(_expected(generate(tmp_path / "v1", 100, files=1))))  # v1, directly
    push = airflow_env.venice_background("push", store, "--input", str(generate(tmp_path / "v2", 100, files=1)))
    out, err = _kill_spark_push(store, push, times=3)
    assert push.returncode == 3, out + err
    assert err == "error: rollout run failed at spark_push; version 2 is KILLED: the rollout run failed\n"
    status = json.loads(airflow_env.cli("rollout", "status", store, "--json", check=True).stdout)
    assert {s["task"]: s["tries"] for s in status["steps"]}["spark_push"] == 3  # 1 + rollout.step.retries
    assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}


def _kill_spark_push(store: str, push: subprocess.Popen[str], times: int) -> tuple[str, str]:
    """SIGKILL the store's Spark push JVM as soon as it appears, on `times` tries; then follow the push out."""
    pattern = f"SparkSubmit.*--name venice-push-{store}"
    deadline = time.monotonic() + 600
    try:
        for _ in range(times):
            while subprocess.run(["pkill", "-KILL", "-f", pattern]).returncode != 0:
                assert push.poll() is None, push.communicate()
                assert time.monotonic() < deadline, "the Spark push never started"
                time.sleep(0.5)
            while subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0:
                time.sleep(0.2)  # gone before the next try starts
        return push.communicate(timeout=900)
    finally:
        if push.poll() is None:
            push.kill()


def _wait_for_step(env: PlatformEnv, store: str, task_id: str, state: str, push: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 600
    while _step_state(env, store, task_id) != state:
        assert push.poll() is None, push.communicate()
        assert time.monotonic() < deadline, f"{task_id} never became {state}"
        time.sleep(1)


def _wait_for_data_in_version_topic(
    env: PlatformEnv, store: str, number: int, partitions: int, push: subprocess.Popen[str]
) -> None:
    """Until the source version topic holds more than START_OF_PUSH's segment (3 messages a partition)."""
    source = env.config.region(env.config.source_region)
    deadline = time.monotonic() + 600
    while sum(admin.end_offsets(source.kafka_bootstrap, source.version_topic(store, number), partitions)) <= (
        3 * partitions
    ):
        assert push.poll() is None, push.communicate()
        assert time.monotonic() < deadline, "the push job never wrote"
        time.sleep(0.1)


def _crash_and_restart_airflow(env: PlatformEnv) -> None:
    """SIGKILL all of Airflow, as a crash would (scheduler, API server, dag-processor, triggerer, running tasks),
    and start it again."""
    airflow.process(env.config).kill()
    airflow.start(env.config)


def _step_state(env: PlatformEnv, store: str, task_id: str) -> str | None:
    result = env.cli("rollout", "status", store, "--json")
    if result.returncode != 0:
        return None
    return {s["task"]: s["state"] for s in json.loads(result.stdout)["steps"]}.get(task_id)
