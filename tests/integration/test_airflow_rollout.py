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
from tests.support.leftovers import airflow_parts, leaves_nothing
from tests.support.platform import PlatformEnv
from tests.support.topics import read_partition
from tests.support.webhook import Webhook
from venice_core.client import ReadClient
from venice_core.config import load_config
from venice_core.controller import da_vinci, stores
from venice_core.embedded import airflow
from venice_core.embedded.airflow import AirflowApi
from venice_core.embedded.sandbox import free_ports
from venice_core.hooks.api import HOOK_FUNCTIONS, StoreVersionLifecycleEventOutcome
from venice_core.hooks.records import metrics_text
from venice_core.jobs.airflow_push import dag_id
from venice_core.meta import MetadataStore
from venice_core.meta.models import HookInvocationRecord
from venice_core.pubsub import admin

pytestmark = [pytest.mark.spark, pytest.mark.airflow]
REPO = Path(__file__).parents[2]
HOOKS = "tests.hooks_fixtures.sample_hooks"
INTERVAL = 2.0
EVENTS = "venice.store.lifecycle.hooks.configs.lifecycle.events"
EVENTS_TOPIC = "venice-lifecycle-events"
# Every test's runs are recorded (RecordEveryCall) and sent as lifecycle events to a topic and a webhook.
CLUSTER_SETTINGS = {
    "venice.store.lifecycle.hooks": f"{HOOKS}.AnswerFromConfig,{HOOKS}.FailWhereConfigured,"
    f"venice_core.hooks.builtin.ManualApproval,{HOOKS}.RecordEveryCall,venice_core.hooks.events.LifecycleEvents",
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
def events_webhook() -> Iterator[Webhook]:
    """Where the lifecycle-event hook POSTs every run's events."""
    webhook = Webhook()
    try:
        yield webhook
    finally:
        webhook.close()


@pytest.fixture(scope="module")
def airflow_env(
    platform_env: PlatformEnv, events_webhook: Webhook, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PlatformEnv]:
    """Airflow over the session's platform, with the test hooks configured (PROCEED unless a store says
    otherwise) and `venice push` going through Airflow, its default when Airflow is enabled."""
    properties = tmp_path_factory.mktemp("airflow") / "venice.properties"
    bootstrap = platform_env.config.region(platform_env.config.source_region).kafka_bootstrap
    admin.create_topic(bootstrap, EVENTS_TOPIC, 1)
    base = platform_env.properties.read_text().replace("airflow.enabled=false", "airflow.enabled=true")
    base += f"{EVENTS}.topic={EVENTS_TOPIC}\n{EVENTS}.kafka.bootstrap.servers={bootstrap}\n"
    base += f"{EVENTS}.webhook.url={events_webhook.url}\n"
    env = {**platform_env.env, "VENICE_CONFIG": str(properties), "PYTHONPATH": str(REPO)}
    _write_settings(PlatformEnv(platform_env.home, properties, env), base, {})
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


def test_rollback_of_a_first_version_takes_its_branch_and_leaves_no_region_serving_it(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """ROLLBACK at dc-1's post swap of the store's first version: the branch after the sensor takes
    `post_swap_rollback`, which returns dc-0 and dc-1 (they had swapped) to serving no version; dc-2 never swaps,
    and reads say there is no version. (Rolling back to a previous version is the local rollout's test.) The
    store's lifecycle-event webhook is broken: delivery fails and the rollout goes on as the hooks decide."""
    store = airflow_env.create_user_store("af")
    (closed,) = free_ports(1)
    airflow_env.cli(
        "store",
        "update",
        store,
        "--hook-config",
        "answer.post_store_version_swap.dc-1=ROLLBACK",
        "--hook-config",
        f"lifecycle.events.webhook.url=http://127.0.0.1:{closed}/events",
        check=True,
    )
    result = airflow_env.venice("push", store, "--input", str(generate(tmp_path / "v1", 300, files=1)), timeout=900)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "failed at dc_1.post_swap_rollback; version 1 is ROLLED_BACK" in result.stderr
    assert airflow_env.serving(store) == {"dc-0": 0, "dc-1": 0, "dc-2": 0}
    status = json.loads(airflow_env.cli("rollout", "status", store, "--json", check=True).stdout)
    states = {s["task"]: s["state"] for s in status["steps"]}
    assert states["dc_1.post_swap_outcome"] == "success" and states["dc_1.post_swap_rollback"] == "failed"
    assert states["dc_1.post_swap_abort"] == "skipped" and states["dc_1.region_done"] == "skipped"
    assert states["dc_0.region_done"] == "success" and states["end_of_push_job"] == "skipped"
    refused = airflow_env.cli("get", store, "user-000000001", "--region", "dc-0")
    assert refused.returncode != 0 and f"store '{store}' has no current version in dc-0" in refused.stderr
    undelivered = [e for e in _events_from_topic(airflow_env, store) if e["function"] == "post_store_version_swap"]
    assert {e["region"] for e in undelivered} == {"dc-0", "dc-1"}  # the topic still got them


def test_a_rollout_proceeds_past_failing_hooks_re_asks_on_wait_and_waits_for_da_vinci_instances(
    airflow_env: PlatformEnv, events_webhook: Webhook, tmp_path: Path
) -> None:
    """One DAG run through every step. Policy PROCEED (Venice's contract): a hook that raises in dc-0 and one that
    times out in dc-1 are recorded and counted, and the rollout goes on; in dc-2 the hook answers WAIT twice, and
    the sensor re-asks each interval. A Da Vinci instance registered in dc-1 (heartbeating, as a client does) has
    dc-1's ingestion gate opened, and holds dc-1's Da Vinci swap until it reports the version ingested; the other
    regions have no instance and do not wait. The push's configs (`venice push --conf`) reach the Spark job: its
    input holds a key twice with different values, which `allow.duplicate.key=true` lets through, and a new field,
    which the store registers as a new value schema. Then every region serves the input. A recording hook saw all
    14 lifecycle functions in VIP-4's order, and the lifecycle-event hook sent each to a topic and a webhook."""
    store = airflow_env.create_user_store("afp", auto_register_schemas=True)
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
    (part,) = data.glob("*.parquet")  # a new field: the push registers a new value schema through the hooks
    table = pq.read_table(part)
    pq.write_table(table.append_column("city", pa.array(["Oslo"] * table.num_rows)), part)
    twice = [{"key": "twice", "name": "n", "age": age, "score": 1.0, "city": "Oslo"} for age in (1, 2)]
    pq.write_table(pa.Table.from_pylist(twice, pq.read_schema(part)), data / "part-twice.parquet")
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
    # The follower prints in the order things happened: dc-2's WAITs come after dc-1's swap, before dc-2's.
    lines = out.splitlines()
    waits = [i for i, line in enumerate(lines) if "AnswerFromConfig answered WAIT at pre_store_version_swap" in line]
    assert lines.index("  dc_1.post_swap: success") < waits[0] < lines.index("  dc_2.post_swap: success"), out
    for region in airflow_env.config.region_names:  # and each region's ingestion, to the last record
        assert re.search(rf"^  {region} ingestion: [\d,]+ of [\d,]+ records \(100%\)$", out, re.M), out
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

    # Every VIP-4 function was called, in the order of VIP-4's table, each with what the seed gives it.
    _assert_vip4_calls(_recorded_calls(airflow_env, store), version=1, regions=["dc-0", "dc-1", "dc-2"])
    # The lifecycle-event hook sent an event for each to the topic and to the webhook, with the earlier hooks'
    # answers.
    for events in (_events_from_topic(airflow_env, store), [e for e in events_webhook.events if e["store"] == store]):
        assert {e["function"] for e in events} == set(HOOK_FUNCTIONS)
        swap = next(e for e in events if e["function"] == "pre_store_version_swap" and e["region"] == "dc-0")
        assert [o["hook_class"].rsplit(".", 1)[-1] for o in swap["earlier_outcomes"]] == [
            "AnswerFromConfig",
            "FailWhereConfigured",
            "ManualApproval",
            "RecordEveryCall",
        ]


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

    api = airflow.AirflowApi(airflow_env.config)
    last_run = api.latest_run(f"venice_push__{store}")["dag_run_id"]
    started = time.monotonic()
    missing = airflow_env.cli("push", store, "--input", str(tmp_path / "no-such-path"))
    assert time.monotonic() - started < 5
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1 and missing.stderr.startswith("error: ")
    assert "no-such-path" in missing.stderr
    assert api.latest_run(f"venice_push__{store}")["dag_run_id"] == last_run  # nothing triggered
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
    assert (
        "rollout run failed at dc_1.pre_swap_abort; version 2 is PARTIALLY_ONLINE: aborted by a hook at "
        in result.stderr
    )
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
    (The same input accepted with `--conf allow.duplicate.key=true` is part of the all-steps run above.)

    While that run is in flight, a push with `--no-queue` is refused in one line and triggers nothing; a push
    without it says at once that it queues behind the run, and its run starts once that one has ended (where a
    hook, configured meanwhile, stops it at once: a whole second rollout would cost the suite a minute)."""
    store = airflow_env.create_user_store("afb", 1)
    good = generate(tmp_path / "good", 100, files=1)
    airflow_env.push(store, RecordsJob(_expected(good)))  # v1, directly
    rows = [{"key": k, "name": "n", "age": age, "score": 1.0} for k, age in (("a", 1), ("a", 2), ("b", 3))]
    bad = _write(tmp_path / "bad", rows)
    later = generate(tmp_path / "later", 10, files=1, seed=7)
    api, dag = airflow.AirflowApi(airflow_env.config), f"venice_push__{store}"
    push = airflow_env.venice_background("push", store, "--input", str(bad))
    queued: subprocess.Popen[str] | None = None
    try:
        run_id = _read_line(push, "triggered ").split(" run ", 1)[1].strip()  # "triggered <dag> run <run id>"
        _wait_for_step(airflow_env, store, "spark_push", "running", push)
        refused = airflow_env.cli("push", store, "--input", str(later), "--no-queue")
        assert refused.returncode == 1 and refused.stdout == "", refused.stdout + refused.stderr
        assert refused.stderr == (
            f"error: a rollout of '{store}' is in flight (run {run_id}); not queueing behind it (--no-queue)\n"
        )
        assert api.active_runs(dag) == [run_id]  # nothing triggered
        # The run in flight is past start_of_push_job; the next one stops there.
        airflow_env.cli("store", "update", store, "--hook-config", "answer.pre_start_of_push_job=ABORT", check=True)
        queued = airflow_env.venice_background("push", store, "--input", str(later))
        queued_id = _read_line(queued, "triggered ").split(" run ", 1)[1].strip()
        assert _read_line(queued, "") == f"queued behind run {run_id}; following it when it starts"
        out, err = push.communicate(timeout=900)
        assert push.returncode == 3, out + err
        assert err.startswith(
            "error: rollout run failed at spark_push; version 2 is KILLED: "
            "the push job refused its input: duplicate key with different values in the input"
        )
        assert len(err.splitlines()) == 1
        assert {t["task_id"]: t["try_number"] for t in api.task_instances(dag, run_id)}["spark_push"] == 1
        queued_out, queued_err = queued.communicate(timeout=900)
    finally:
        for process in (push, queued):
            if process is not None and process.poll() is None:
                process.kill()
    assert queued.returncode == 3, queued_out + queued_err
    assert f"run {queued_id} started" in queued_out
    assert queued_err.startswith(
        "error: rollout run failed at start_of_push_job; no version was created: "
        "AnswerFromConfig answered ABORT at pre_start_of_push_job"
    )
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


VERSION_FUNCTIONS = [f for f in HOOK_FUNCTIONS if HOOK_FUNCTIONS[f] is StoreVersionLifecycleEventOutcome]
REGION_FUNCTIONS = [f for f in HOOK_FUNCTIONS if "version" in f and "end_of_push" not in f]
BEFORE_VERSION = ["validate_hook_config", "pre_start_of_push_job", "post_start_of_push_job"] + [
    "pre_schema_registration",
    "post_schema_registration",
]


def _recorded_calls(env: PlatformEnv, store: str) -> list[dict]:
    path = env.home / "hook-state" / f"calls-{store}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _assert_vip4_calls(calls: list[dict], version: int, regions: list[str]) -> None:
    """All 14 functions, first called in the order of VIP-4's table (and, within each region, its functions in
    that order), each with the arguments of the seed: a version from version creation on, a region for the
    per-region ones, the job status for those that may WAIT or ROLLBACK, the schemas for schema registration."""
    assert list(dict.fromkeys(c["function"] for c in calls)) == list(HOOK_FUNCTIONS)
    for region in regions:
        in_region = [c["function"] for c in calls if c["region"] == region]
        assert list(dict.fromkeys(in_region)) == REGION_FUNCTIONS, region
    for call in calls:
        function = call["function"]
        assert call["region"] in (regions if function in REGION_FUNCTIONS else [None]), call
        assert call["version"] == (None if function in BEFORE_VERSION else version), call
        if function in VERSION_FUNCTIONS:
            status = call["job_status"]
            assert status["version"] == version and status["regions"] == sorted(regions), call
            created = function != "pre_store_version_creation"
            assert (status["status"] != "NOT_CREATED") is created, call
        if function.endswith("schema_registration"):
            assert {"new_schema", "existing_schemas"} <= set(call["details"]), call


def _events_from_topic(env: PlatformEnv, store: str) -> list[dict]:
    bootstrap = env.config.region(env.config.source_region).kafka_bootstrap
    return [
        e for e in (json.loads(value) for _key, value in read_partition(bootstrap, EVENTS_TOPIC)) if e["store"] == store
    ]


def _read_line(process: subprocess.Popen[str], prefix: str) -> str:
    """The next line of a running command's output that starts with `prefix` (without its newline)."""
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith(prefix):
            return line.rstrip("\n")
    raise AssertionError(f"the command ended without a line starting {prefix!r}: {process.communicate()}")


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
