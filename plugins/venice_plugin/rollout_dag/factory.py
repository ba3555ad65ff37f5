"""The rollout DAG's factory: one store's tasks rendered from the step list (`build_rollout_dag`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Asset, TaskGroup, XComArg, task
from airflow.sdk.bases.operator import BaseOperator
from airflow.sdk.definitions.xcom_arg import PlainXComArg
from airflow.sdk.exceptions import AirflowSkipException

from venice_core.config import ClusterConfig
from venice_core.controller.hook_decisions import Decision
from venice_core.hooks.builtin import ManualApproval
from venice_core.rollout.compression_dictionary import TrainedDictionary
from venice_core.rollout.names import SOURCE_FILES_PARAM, SOURCE_KAFKA_PARAM, asset_uri, region_group, rollout_dag_id
from venice_core.rollout.steps import STEPS, CreatedVersion, Scope, Step, StepKind, stop
from venice_core.schedules.push import PushSchedule
from venice_core.spark.specs.job_result import JobResult
from venice_plugin.form_params import form_param
from venice_plugin.rollout_dag.callbacks import end_push_at_failed_step, finish_failed_run
from venice_plugin.rollout_dag.operators import PushJobOperator, SwapApprovalOperator
from venice_plugin.rollout_dag.sensors import DecisionSensor
from venice_plugin.rollout_dag.task_inputs import step_inputs
from venice_plugin.timetables import BusinessHoursTimetable

NOT_ADMITTED, REGION_DONE = "not_admitted", "region_done"
# A decision sensor's Airflow timeout: ten years, i.e. none (see `_Renderer`).
DECISION_SENSOR_TIMEOUT_SECONDS = 10 * 365 * 24 * 3600


# The step `PushJobOperator` runs, whose XCom is the job's result.
SPARK_STEP = next(s.name for s in STEPS if s.kind is StepKind.SPARK)


def _task_of(output: XComArg) -> BaseOperator:
    """The task a TaskFlow call added to the DAG (the call returns the task's output)."""
    assert isinstance(output, PlainXComArg) and isinstance(output.operator, BaseOperator)
    return output.operator


class _Renderer:
    """Builds one store's tasks from the step list."""

    def __init__(self, store: str, config: ClusterConfig) -> None:
        self.store, self.config = store, config
        hooks = config.hooks
        # A WAIT is asked again for as long as it is answered (VIP-4): a maximum wait, where an operator set one (the
        # cluster's or a store's), is enforced by the poke itself, as an explicit ABORT naming it. So the sensor's
        # own timeout (Airflow's default is 7 days) must never end a rollout first.
        self.decision_sensor: dict[str, Any] = {
            "poke_interval": hooks.wait_interval_seconds,
            "timeout": DECISION_SENSOR_TIMEOUT_SECONDS,
            "mode": "reschedule",
        }
        self.manual_approval = f"{ManualApproval.__module__}.{ManualApproval.__name__}" in hooks.class_paths

    def action(self, step: Step, region: str | None) -> BaseOperator:
        store = self.store

        @task(task_id=step.name)
        def run(**context: Any) -> Any:
            with step_inputs(store, context, region) as inputs:
                if step.name == "end_of_push":  # the Spark step's XCom (it may have run on another worker)
                    inputs.job_result = JobResult.from_json(context["ti"].xcom_pull(task_ids=SPARK_STEP))
                if step.admitted_by:
                    decided = Decision.from_json(context["ti"].xcom_pull(task_ids=step.admitted_by))
                    inputs.admitted = decided.regions
                if step.dictionary_from:  # a ZSTD_WITH_DICT store's trained dictionary (None for any other)
                    trained = context["ti"].xcom_pull(task_ids=step.dictionary_from)
                    inputs.dictionary = TrainedDictionary.from_json(trained) if trained else None
                result = step.run(inputs)
            return result.to_json() if isinstance(result, CreatedVersion | TrainedDictionary) else result

        return _task_of(run())

    def announce(self, step: Step) -> BaseOperator:
        """The step that tells the store's consumers: its asset's event (`venice://<cluster>/<store>`), the
        announcement as its extra, which DAGs scheduled on the asset run after. Nothing to announce (not every
        region serves the version): skipped, and no event."""
        store = self.store
        asset = Asset(asset_uri(self.config.cluster_name, store), group="venice")

        @task(task_id=step.name, outlets=[asset])
        def announce(**context: Any) -> dict[str, Any]:
            with step_inputs(store, context) as inputs:
                announced = step.run(inputs)
            if announced is None:
                raise AirflowSkipException("the version does not serve in every region: no asset event")
            context["outlet_events"][asset].extra = announced
            return dict(announced)

        return _task_of(announce())

    def condition(self, step: Step, region: str | None) -> BaseOperator:
        store = self.store

        @task.sensor(
            task_id=step.name, poke_interval=step.poll_seconds, timeout=step.timeout_seconds, mode="reschedule"
        )
        def wait(**context: Any) -> bool:
            with step_inputs(store, context, region) as inputs:
                return bool(step.run(inputs))

        return _task_of(wait())

    def admission(self, step: Step, region: str, admitted_next: str) -> BaseOperator:
        store, group = self.store, region_group(region)

        @task.branch(task_id=step.name)
        def admitted(**context: Any) -> str:
            with step_inputs(store, context, region) as inputs:
                return f"{group}.{admitted_next}" if step.run(inputs) else f"{group}.{NOT_ADMITTED}"

        return _task_of(admitted())

    def decision(self, step: Step, region: str | None) -> BaseOperator:
        """The decision's sensor, and its `_abort` (and `_rollback`) tasks beside the next step."""
        sensor = DecisionSensor(task_id=step.name, store=self.store, step=step, region=region, **self.decision_sensor)
        self.stop(step, region, sensor, "abort")
        if step.can_rollback:
            self.stop(step, region, sensor, "rollback")
        return sensor

    def stop(self, step: Step, region: str | None, sensor: BaseOperator, kind: str) -> BaseOperator:
        store = self.store

        @task(task_id=f"{step.name}_{kind}")
        def apply(decided: dict[str, str], **context: Any) -> None:
            with step_inputs(store, context, region, stopping=True) as inputs:
                stop(inputs, step, Decision.from_json(decided))

        # TaskFlow hands the task the sensor's XCom value (the decision), for which its output stands here.
        return _task_of(apply(cast(dict[str, str], sensor.output)))


def build_rollout_dag(
    store: str, rollout_order: list[str], config: ClusterConfig, push_schedule: PushSchedule | None = None
) -> DAG:
    render = _Renderer(store, config)
    with DAG(
        dag_id=rollout_dag_id(store),
        description=f"Push a dataset to '{store}' and roll it out region by region with lifecycle hooks",
        # A store's scheduled push runs the DAG on its working hours; without one, runs are triggered only.
        schedule=None if push_schedule is None else BusinessHoursTimetable.of(push_schedule),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["venice", "rollout"],
        on_failure_callback=finish_failed_run,
        default_args={
            "on_failure_callback": end_push_at_failed_step,
            "retries": config.rollout.step_retries,
            "retry_delay": timedelta(seconds=config.rollout.step_retry_delay_seconds),
        },
        params={
            "source": form_param(
                SOURCE_FILES_PARAM,
                type="string",
                enum=[SOURCE_FILES_PARAM, SOURCE_KAFKA_PARAM],
                description="files: push the input; kafka: repush the store from its own version topic "
                "(kafka.input.fabric, kafka.input.topic, repush.ttl.enable, ... in conf)",
            ),
            "input": form_param("", type="string", description="Avro, Parquet or JSON files (a push)"),
            "key_field": form_param("key", type="string"),
            "value_field": form_param("value", type="string"),
            "conf": form_param({}, type="object", description="push or repush configs (allow.duplicate.key, ...)"),
        },
    ) as dag:
        groups = {
            region: TaskGroup(group_id=region_group(region), tooltip=f"rollout to {region}") for region in rollout_order
        }
        tail: BaseOperator | None = None  # the last task of the chain so far
        region_steps = [s for s in STEPS if s.scope is Scope.REGION]
        gate_holds: dict[str, dict[str, BaseOperator]] = {}  # region -> held step -> the gate's sensor

        def link(entry: BaseOperator) -> None:
            nonlocal tail
            if tail is not None:
                tail >> entry
            tail = entry

        for step in STEPS:
            if step.scope is Scope.REGION:
                if step is region_steps[0]:
                    for region in rollout_order:
                        with groups[region]:
                            tail = _render_region(render, region, region_steps, tail, gate_holds)
                continue
            if step.scope is Scope.EVERY_REGION:  # beside the chain, from the task before it
                anchor = tail
                assert anchor is not None, f"{step.name} follows a step"
                for region in rollout_order:
                    with groups[region]:
                        sensor = render.decision(step, region)
                    anchor >> sensor
                    gate_holds.setdefault(region, {})[step.holds or ""] = sensor
                continue
            if step.kind is StepKind.SPARK:
                link(PushJobOperator(task_id=step.name, store=store))
            elif step.kind is StepKind.ANNOUNCE:
                link(render.announce(step))
            elif step.kind is StepKind.DECISION:
                link(render.decision(step, None))
            else:
                link(render.action(step, None))
    return dag


def _render_region(
    render: _Renderer,
    region: str,
    steps: list[Step],
    tail: BaseOperator | None,
    gate_holds: dict[str, dict[str, BaseOperator]],
) -> BaseOperator:
    """One region's group: admitted -> the region's steps -> region_done, or admitted -> not_admitted ->
    region_done for a region version creation left out."""
    kept = [s for s in steps if s.kind is not StepKind.APPROVAL or render.manual_approval]
    admission, rest = kept[0], kept[1:]
    admitted = render.admission(admission, region, rest[0].name)
    if tail is not None:
        tail >> admitted
    not_admitted = EmptyOperator(task_id=NOT_ADMITTED)
    done = EmptyOperator(task_id=REGION_DONE, trigger_rule="none_failed_min_one_success")
    admitted >> not_admitted >> done
    previous: BaseOperator = admitted
    for step in rest:
        if step.kind is StepKind.DECISION:
            entry = render.decision(step, region)
        elif step.kind is StepKind.CONDITION:
            entry = render.condition(step, region)
        elif step.kind is StepKind.APPROVAL:
            entry = SwapApprovalOperator(task_id=step.name, store=render.store, region=region)
        else:
            entry = render.action(step, region)
        previous >> entry
        if step.name in gate_holds.get(region, {}):  # a gate that holds this step (the Da Vinci swap)
            gate_holds[region][step.name] >> entry
        previous = entry
    previous >> done
    return done
