"""The shape of a store's rollout DAG, built without a running Airflow: the steps of `rollout.steps.STEPS`, in
their order, every decision a sensor that branches itself to the next step, its `abort` or (where the hook may
answer it) its `rollback`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG, PokeReturnValue
from airflow.sdk.exceptions import DownstreamTasksSkipped
from venice_plugin.rollout_dag import DecisionSensor, PushJobOperator, build_rollout_dag, short_error

from venice_core.config import ClusterConfig, load_config
from venice_core.embedded import airflow
from venice_core.rollout.steps import StepKind, plan

REGIONS = ["dc-0", "dc-1", "dc-2"]


def _config(tmp_path: Path, extra: str = "") -> ClusterConfig:
    properties = tmp_path / "venice.properties"
    properties.write_text("rollout.step.retries=3\nrollout.step.retry.delay.seconds=7\n" + extra)
    return load_config({"VENICE_CONFIG": str(properties)})


def _expected_ids(manual_approval: bool) -> list[str]:
    """Every task the step list asks for, in the order one process runs the steps (`plan`)."""
    ids: list[str] = []
    for step, region in plan(REGIONS):
        if step.kind is StepKind.APPROVAL and not manual_approval:
            continue
        prefix = _prefix(region)
        ids.append(prefix + step.name)
        if step.kind is StepKind.DECISION:
            ids += [f"{prefix}{step.name}_abort"]
            ids += [f"{prefix}{step.name}_rollback"] if step.can_rollback else []
    return ids


def _prefix(region: str | None) -> str:
    return f"{region.replace('-', '_')}." if region else ""


def _ordered(dag: DAG, before: str, after: str) -> bool:
    """`after` is downstream of `before`."""
    return after in dag.get_task(before).get_flat_relative_ids(upstream=False)


@pytest.mark.parametrize("manual_approval", [False, True])
def test_the_dag_renders_every_step_of_the_list_in_order(tmp_path: Path, manual_approval: bool) -> None:
    hooks = "venice.store.lifecycle.hooks=venice_core.hooks.builtin.ManualApproval\n" if manual_approval else ""
    dag = build_rollout_dag("users", REGIONS, _config(tmp_path, hooks))
    expected = _expected_ids(manual_approval)
    plumbing = {f"{r.replace('-', '_')}.{t}" for r in REGIONS for t in ("not_admitted", "region_done")}
    assert set(dag.task_ids) == set(expected) | plumbing
    steps = [i for i in expected if not i.endswith(("_abort", "_rollback"))]
    in_chain = [i for i in steps if not i.endswith("da_vinci_ingestion_gate")]  # the gates run beside the chain
    for before, after in zip(in_chain, in_chain[1:], strict=False):
        assert _ordered(dag, before, after), (before, after)
    for region in ("dc_0", "dc_1", "dc_2"):  # every gate after version creation, holding its region's Da Vinci swap
        assert _ordered(dag, "create_version", f"{region}.da_vinci_ingestion_gate")
        assert _ordered(dag, f"{region}.da_vinci_ingestion_gate", f"{region}.da_vinci_ingestion")
        # The region's Da Vinci clients swap after every gate of the region's swap, right before its servers.
        assert _ordered(dag, f"{region}.pre_swap", f"{region}.da_vinci_swap")
        assert _ordered(dag, f"{region}.da_vinci_swap", f"{region}.server_swap")
        assert not _ordered(dag, f"{region}.da_vinci_ingestion_gate", "spark_push")


def test_each_decision_branches_to_its_next_step_abort_and_rollback(tmp_path: Path) -> None:
    dag = build_rollout_dag("users", REGIONS, _config(tmp_path))
    assert dag.get_task("dc_1.pre_swap").downstream_task_ids == {
        "dc_1.da_vinci_swap",
        "dc_1.pre_swap_abort",
        "dc_1.pre_swap_rollback",
    }
    assert dag.get_task("dc_2.post_swap").downstream_task_ids == {
        "dc_2.region_done",
        "dc_2.post_swap_abort",
        "dc_2.post_swap_rollback",
    }
    assert dag.get_task("dc_0.admitted").downstream_task_ids == {"dc_0.ingestion_complete", "dc_0.not_admitted"}
    assert dag.get_task("dc_1.region_done").trigger_rule == "none_failed_min_one_success"
    decisions = {f"{p}{s.name}" for s, r in plan(REGIONS) if s.kind is StepKind.DECISION for p in [_prefix(r)]}
    assert {t.task_id for t in dag.tasks if isinstance(t, DecisionSensor)} == decisions
    assert {(t.mode, t.inherits_from_skipmixin) for t in dag.tasks if t.task_id in decisions} == {("reschedule", True)}


def test_every_step_is_retried_as_configured_and_the_push_job_is_spark_submit(tmp_path: Path) -> None:
    dag = build_rollout_dag("users", ["dc-0", "dc-1"], _config(tmp_path))
    plumbing = {t.task_id for t in dag.tasks if t.task_type == "EmptyOperator"}
    # Every step, the stops included (applying a stop again is harmless, and completes one a failure cut short).
    assert {(t.retries, t.retry_delay.total_seconds()) for t in dag.tasks if t.task_id not in plumbing} == {(3, 7.0)}
    # A step that fails for good ends the push at once, not when the whole run has ended.
    assert {t.on_failure_callback[0].__name__ for t in dag.tasks if t.task_id not in plumbing} == {
        "end_push_at_failed_step"
    }
    assert isinstance(dag.get_task("spark_push"), PushJobOperator)


def test_the_push_job_goes_to_the_specs_master_with_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`spark_default` names the config's master (`embedded.airflow.spark_connection`) in client mode; the operator
    submits with the spec's py-files to the spec's master: the config's, or the push's own `spark.master`."""
    config = _config(tmp_path, "spark.master=spark://127.0.0.1:7377\n")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", airflow.spark_connection(config))
    operator = PushJobOperator(task_id="spark_push", store="users")
    operator.py_files = "/cache/venice_core-0.zip"
    command = operator._get_hook()._build_spark_submit_command("push.py")
    assert command[command.index("--master") + 1] == "spark://127.0.0.1:7377"
    assert command[command.index("--py-files") + 1] == "/cache/venice_core-0.zip"
    assert command[command.index("--deploy-mode") + 1] == "client"
    operator.master = "local[1]"
    command = operator._get_hook()._build_spark_submit_command("push.py")
    assert command[command.index("--master") + 1] == "local[1]"


def test_version_creation_is_a_sensor_whose_rollback_branch_creates_nothing(tmp_path: Path) -> None:
    """pre_store_version_creation is asked by a sensor in reschedule mode (its WAIT holds no worker slot), which
    branches itself: on to create the version, or to its abort or rollback task instead (VIP-4's ROLLBACK there:
    the whole push stops, nothing is created)."""
    dag = build_rollout_dag("users", REGIONS, _config(tmp_path))
    sensor = dag.get_task("pre_version_creation")
    assert sensor.mode == "reschedule" and sensor.upstream_task_ids == {"compression_dictionary"}
    # A ZSTD_WITH_DICT store's dictionary is trained before: a task of the grid's between schema registration and
    # the decision, whose XCom version creation sends in START_OF_PUSH.
    assert dag.get_task("compression_dictionary").upstream_task_ids == {"schema_registration"}
    assert dag.get_task("pre_version_creation").downstream_task_ids == {
        "create_version",
        "pre_version_creation_abort",
        "pre_version_creation_rollback",
    }


def test_the_last_step_announces_the_store_as_an_airflow_asset(tmp_path: Path) -> None:
    """Each store is an asset, `venice://<cluster>/<store>`: the rollout's last task has it as its outlet, so its
    success (every region serving the version) is the asset event downstream DAGs are scheduled on."""
    config = _config(tmp_path, "cluster.name=prod east\n")
    dag = build_rollout_dag("users", REGIONS, config)
    announce = dag.get_task("announce_version")
    assert [(a.uri, a.group) for a in announce.outlets] == [("venice://prod%20east/users", "venice")]
    assert announce.upstream_task_ids == {"finish_push_job"} and not announce.downstream_task_ids
    assert not [t.task_id for t in dag.tasks if t.outlets and t is not announce]  # one event per rollout


@pytest.mark.parametrize(
    ("answer", "followed"),
    [
        ("PROCEED", ["dc_1.da_vinci_swap"]),
        ("ABORT", ["dc_1.pre_swap_abort"]),
        ("ROLLBACK", ["dc_1.pre_swap_rollback"]),
    ],
)
def test_a_decided_sensor_follows_its_answer_and_keeps_it_for_the_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, followed: list[str]
) -> None:
    """The sensor's branching, with its poke (the hooks) answering at once: the answer is kept as its XCom (the stop
    tasks read it), and every other task after it is skipped."""
    dag = build_rollout_dag("users", REGIONS, _config(tmp_path))
    sensor = dag.get_task("dc_1.pre_swap")
    decided = {"outcome": answer, "reason": "r", "regions": ""}
    monkeypatch.setattr(DecisionSensor, "poke", lambda self, context: PokeReturnValue(True, decided))
    ti = _TaskInstance(sensor)
    with pytest.raises(DownstreamTasksSkipped) as skipped:
        sensor.execute({"ti": ti})
    assert ti.pushed["return_value"] == decided
    assert set(skipped.value.tasks) == {(t, -1) for t in sensor.downstream_task_ids - set(followed)}


class _TaskInstance:
    """What a sensor and its branching ask of a task instance: its task, map index, first poke's date (this is the
    first) and XCom pushes (kept here)."""

    map_index = -1

    def __init__(self, task: Any) -> None:
        self.task, self.pushed = task, {}

    def get_first_reschedule_date(self, context: Any) -> None:
        return None

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def test_a_failed_steps_long_error_keeps_its_start_and_spark_submits_exit_code() -> None:
    """spark-submit's failure holds its command line, its exit code, and its last output when it printed any
    before it was killed: the push's reason keeps the exit code, whatever came after it."""
    command = "spark-submit --master local[2] " + "--conf spark.x=y " * 30
    killed = f"Cannot execute: {command}. Error code is: -9.\nLast spark-submit output:\nWARNING: Using incubator"
    short = short_error(killed)
    assert short.startswith("Cannot execute: spark-submit --master local[2]") and short.endswith(
        " ... Error code is: -9."
    )
    assert short_error(f"Cannot execute: {command}. Error code is: 1.").endswith("... Error code is: 1.")
    other = "x" * 250 + " the end of something else"
    assert short_error(other) == f"{other[:100]} ... {other[-80:]}"
    assert short_error("a\n  short   one") == "a short one"
