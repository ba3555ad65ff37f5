"""The rollout DAG: `rollout.steps.STEPS` rendered as Airflow tasks, one store per DAG.

- An ACTION is a task; a CONDITION (a region's ingestion) a sensor; the Spark push a `SparkSubmitOperator`.
- A DECISION is a sensor in reschedule mode that asks the hooks at each poke (WAIT = poke again after
  `wait.interval.seconds`, no worker slot held, for as long as it is answered; past a `wait.max.seconds` an operator
  set, the poke itself answers ABORT) and is
  its own branch (`DecisionSensor`): it takes the next step on PROCEED, or the step's `<step>_abort` /
  `<step>_rollback` task, which applies the stop and fails the run. The grid shows which way each rollout went.
- Each region is a task group: `admitted` branches past a region that version creation left out (to
  `not_admitted`), and `region_done` joins both ways, so the next region starts after either.
- The Da Vinci ingestion gate is asked for every region at version creation; a region it left WAITing has its
  gate sensor, which runs beside the rest and holds that region's Da Vinci swap.

Deliberate stops (ABORT, ROLLBACK, a WAIT past its maximum, input the push job refuses) fail for good
(AirflowFailException). A step that fails on its own (a broker briefly unreachable, a lost Spark executor,
Airflow's stale-event race on reschedule sensors) is retried `rollout.step.retries` times: every step can run again.
A step that fails keeps why as its XCom `failure`, which `venice rollout status` and `venice push` show (a run that
failed before a version existed has no version to say it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pendulum
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import (
    DAG,
    Asset,
    BaseSensorOperator,
    BranchMixIn,
    Context,
    Param,
    PokeReturnValue,
    TaskGroup,
    XComArg,
    task,
)
from airflow.sdk.bases.operator import BaseOperator
from airflow.sdk.definitions.xcom_arg import PlainXComArg
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from venice_core.config import ClusterConfig
from venice_core.controller import push_jobs, stores, versions
from venice_core.controller.rollout import Decision, Rollout
from venice_core.errors import ConfigError, RolloutStopped, VeniceError
from venice_core.hooks.builtin import ManualApproval
from venice_core.meta import MetadataStore
from venice_core.meta.context import metadata
from venice_core.rollout.compression_dictionary import TrainedDictionary
from venice_core.rollout.names import (
    FAILURE_XCOM,
    SOURCE_FILES_PARAM,
    SOURCE_KAFKA_PARAM,
    asset_uri,
    push_job_id,
    region_group,
    rollout_dag_id,
    run_confs,
    store_of,
)
from venice_core.rollout.push_confs import check_user_confs
from venice_core.rollout.steps import (
    STEPS,
    CreatedVersion,
    PushRequest,
    Scope,
    Step,
    StepInputs,
    StepKind,
    job_request,
    stop,
)
from venice_core.schedules.push import PushSchedule
from venice_core.spark import repush_config
from venice_core.spark.job_result import JobResult, refusal
from venice_core.spark.submit import push_job_spec
from venice_plugin.scheduled_push import run_input
from venice_plugin.timetables import BusinessHoursTimetable

NOT_ADMITTED, REGION_DONE = "not_admitted", "region_done"
# A decision sensor's Airflow timeout: ten years, i.e. none (see `_Renderer`).
DECISION_SENSOR_TIMEOUT_SECONDS = 10 * 365 * 24 * 3600


# The step `PushJobOperator` runs, whose XCom is the job's result.
SPARK_STEP = next(s.name for s in STEPS if s.kind is StepKind.SPARK)


def result_file(config: ClusterConfig, job_id: str) -> Path:
    return config.data_dir / "push-results" / f"{job_id}.json"


def _request(store: str, context: dict[str, Any]) -> PushRequest:
    """The run's request: `venice push --conf`s, and `source=kafka` (a repush) as `source.kafka=true`. A scheduled
    run (or one triggered without an input) pushes the store's `--push-input` rendered for it (`run_input`). The
    run's `conf` is a user's (the trigger form's): a key the platform sets itself is refused there."""
    params = context["params"]
    asked = {str(k): str(v) for k, v in (params.get("conf") or {}).items()}
    check_user_confs(asked, repush=params.get("source") == SOURCE_KAFKA_PARAM)
    given = params.get("input") or repush_config.REPUSH_INPUT  # (a repush's own runs name the store's data so)
    if given != repush_config.REPUSH_INPUT and repush_config.is_repush(run_confs(params)):  # as `venice push --input`
        raise ConfigError(
            "the form's input is for a push: a repush (source=kafka, or source.kafka=true) reads the store's own "
            "data; leave the input empty"
        )
    return PushRequest(store, run_input(store, context), params["key_field"], params["value_field"], run_confs(params))


def _created(context: dict[str, Any]) -> CreatedVersion | None:
    data = context["ti"].xcom_pull(task_ids="create_version")
    return CreatedVersion.from_json(data) if data else None


@contextmanager
def _inputs(
    store: str, context: dict[str, Any], region: str | None = None, stopping: bool = False
) -> Iterator[StepInputs]:
    """A step's inputs in this task: the run's rollout (its DB connections released when the task is done). A push
    that has already stopped raises the recorded stop, but in the tasks that stop it (`stopping`: applying a stop
    again is harmless, and completes one a failure cut short); a stop is final (no retry). A step an operator cleared
    in Airflow runs only while its push goes on (`_refuse_if_push_ended`). A step that fails on a
    VeniceError keeps its reason as the XCom `failure` (`keep_failure`)."""
    created = _created(context)
    try:
        with metadata() as (config, meta):
            rollout = Rollout(
                config,
                meta,
                store,
                push_job_id(store, context["run_id"], context["params"]),
                stores.store_settings(meta, store).hook_configs,
                progress=print,
                version=created.number if created else None,
            )
            cleared = _cleared(context)
            if cleared:
                _refuse_if_push_ended(meta, rollout.push_job_id, context["run_id"])
            if not stopping:
                rollout.ensure_not_stopped(cleared=cleared)
            yield StepInputs(rollout, _request(store, context), created, region)
    except VeniceError as error:
        keep_failure(context, str(error))
        if error.retryable:
            raise
        # Decided, refused or broken for good (a hook's decision, input that fits no schema, a region's failed
        # ingestion, a repush refused): a retry would meet it again.
        raise AirflowFailException(str(error)) from error


def _cleared(context: Any) -> bool:
    """Has an operator cleared this run in Airflow (Airflow counts the clears of a run)?"""
    return bool(getattr(context["dag_run"], "clear_number", 0))


def _refuse_if_push_ended(meta: MetadataStore, job: str, run_id: str) -> None:
    """A step of a cleared run whose push has ended (`controller.push_jobs`) runs nothing of it again: a rollout run
    pushes once. Run again, an old run would push its old input over newer data, or swap an old version back in. A
    step cleared while its push goes on (a retry by hand) runs."""
    why = push_jobs.ended(meta, job)
    if why is not None:
        raise RolloutStopped(
            f"run {run_id} was cleared in Airflow after its push ended"
            + (f" ({why})" if why else "")
            + ": a rollout run pushes once; to push again, trigger a new run"
        )


def keep_failure(context: Any, reason: str) -> None:
    """Keep why the step failed as its XCom `failure` (`rollout.names.FAILURE_XCOM`), where `venice rollout
    status` and `venice push` read it through the REST API. A try that is retried starts with its XComs cleared."""
    try:
        context["ti"].xcom_push(key=FAILURE_XCOM, value=reason)
    except Exception as exc:  # noqa: BLE001 - the failure itself is what the task must report
        print(f"could not keep the failure's reason as an XCom: {exc}")


def finish_failed_run(context: Context) -> None:
    """DAG failure callback: a push that stopped on an error is over. Nothing swapped: the version is killed;
    some regions swapped: it stays PARTIALLY_ONLINE. Either way another push may start."""
    _end_push(context, "the rollout run failed")


def end_push_at_failed_step(context: Context) -> None:
    """Task failure callback (a step failed for good, its retries spent): the push ends now, not when the whole
    run does, so the steps still running beside it (a Da Vinci gate that WAITs) stop at their next poke and the
    version says why."""
    error = short_error(str(context.get("exception") or ""))
    _end_push(context, f"{context['ti'].task_id} failed" + (f": {error}" if error else ""))


def short_error(message: str) -> str:
    """An exception's message on one line, kept short: spark-submit's holds its whole command line, then its exit
    code, then (when it printed any before it ended) its last output. A long one keeps its start and its exit code,
    or its end when it names none (the whole message is in the task's log)."""
    error = " ".join(message.split())
    if len(error) <= 200:
        return error
    code = re.search(r"Error code is: -?\d+\.", error)
    return f"{error[:100]} ... {code[0] if code else error[-80:]}"


def _end_push(context: Context, reason: str) -> None:
    dag_run = context["dag_run"]
    store = store_of(dag_run.dag_id)
    with metadata() as (_, meta):
        versions.end_push_job(meta, store, push_job_id(store, dag_run.run_id, dag_run.conf), reason)


class SwapApprovalOperator(HITLOperator):
    """A person approves or rejects a region's swap in the Airflow UI (Required Actions), when the ManualApproval
    hook asks for it; the decision is recorded on the version, where the hook reads it at pre_swap. Regions the
    store's `manual.approval.regions` leaves out pass at once."""

    APPROVE, REJECT = "Approve", "Reject"

    def __init__(self, *, store: str, region: str, **kwargs: Any) -> None:
        version = "{{ ti.xcom_pull(task_ids='create_version')['version'] }}"
        super().__init__(
            subject=f"Swap '{store}' to its new version in {region}?",
            body=f"Version {version} of '{store}' is ingested in {region}. Approve to let the rollout swap it in; "
            "reject to abort the rollout at this region.",
            options=[self.APPROVE, self.REJECT],
            multiple=False,
            **kwargs,
        )
        self.store, self.region = store, region

    def execute(self, context: Any) -> Any:
        with _inputs(self.store, context, self.region) as inputs:
            ctx = inputs.rollout.context(self.region)
            if (
                not ManualApproval(inputs.rollout.config.hooks.configs).needs_approval(ctx)
                or self.region in ctx.approvals
            ):
                return None
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        result = super().execute_complete(context, event)
        user = event.get("responded_by_user") or {}
        created = _created(context)
        with metadata() as (_, meta):
            versions.record_approval(
                meta,
                self.store,
                created.number if created else 0,
                self.region,
                approved=result["chosen_options"] == [self.APPROVE],
                by=user.get("name") or user.get("id") or "an Airflow user",
            )
        return result


class DecisionSensor(BaseSensorOperator, BranchMixIn):
    """A DECISION: asks the hooks at each poke (reschedule mode: a WAIT holds no worker slot) and, once they have
    decided, branches itself: PROCEED follows the next step, ABORT or ROLLBACK the step's `_abort` / `_rollback`
    task, and the others are skipped. One task run per decision, where a sensor and a branch task took two."""

    inherits_from_skipmixin = True

    def __init__(self, *, store: str, step: Step, region: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store, self.step, self.region = store, step, region

    def poke(self, context: Any) -> PokeReturnValue:
        with _inputs(self.store, context, self.region, stopping=True) as inputs:
            # An operator's stop (`venice rollout abort`) takes this decision's abort or rollback way, so the grid
            # shows it; any other stop of the push is raised as it was recorded.
            decision = inputs.rollout.operator_decision()
            if decision is None:
                inputs.rollout.ensure_not_stopped(cleared=_cleared(context))
                decision = self.step.run(inputs)
        return PokeReturnValue(is_done=decision is not None, xcom_value=decision.to_json() if decision else None)

    def execute(self, context: Any) -> dict[str, str]:
        decided: dict[str, str] = super().execute(context)
        # Branching ends the task before Airflow keeps its return value: the stops and `create_version` read it.
        context["ti"].xcom_push(key="return_value", value=decided)
        decision = Decision.from_json(decided)
        if decision.stops:
            way = f"{self.task_id}_{decision.outcome.value.lower()}"
            # (An operator's ROLLBACK at a step whose hooks cannot roll back takes its abort's way: applied the same.)
            self.do_branch(context, way if way in self.downstream_task_ids else f"{self.task_id}_abort")
        else:
            self.do_branch(
                context, sorted(self.downstream_task_ids - {f"{self.task_id}_abort", f"{self.task_id}_rollback"})
            )
        return decided


class PushJobOperator(SparkSubmitOperator):
    """The Spark push job, as `spark.submit.push_job_spec` renders it for this run (the same spec spark-submit
    runs in `venice push --local`), on the spec's master: the config's `spark.master` (which the `spark_default`
    connection names too) unless the push's `spark.master` conf names another. Input it refuses (it writes why to
    its result file) ends the push at once: the version is killed with the job's reason and the step fails without
    retries, since the same input would be refused again. Any other failure is retried like every step."""

    def __init__(self, *, store: str, **kwargs: Any) -> None:
        super().__init__(application="", conn_id="spark_default", **kwargs)
        self.store = store
        self.master: str | None = None  # the spec's, once `execute` has rendered it

    def _get_hook(self) -> SparkSubmitHook:
        """The connection's hook (its deploy mode), submitting to the spec's master: spark-submit takes `--master`
        (the connection's) over a `--conf spark.master`, and the spec's py-files are for its master."""
        hook = super()._get_hook()
        if self.master:
            hook._connection["master"] = self.master
        return hook

    def execute(self, context: Any) -> None:
        """Run the job; its result (what END_OF_PUSH reports) is the task's XCom: the driver writes it to a file on
        this worker's disk, and the step that reads it may run on another Celery worker, on another machine."""
        created = _created(context)
        if created is None:
            raise AirflowFailException("no version was created for this run")
        with _inputs(self.store, context) as inputs:  # a push stopped meanwhile writes nothing more
            results = result_file(inputs.rollout.config, created.push_job_id)
            spec = push_job_spec(inputs.rollout.config, job_request(inputs.request, created), results)
        results.unlink(missing_ok=True)  # a previous try's result is not this one's
        self.application, self.name, self.conf = spec.application, spec.name, dict(spec.conf)
        self.application_args, self._driver_memory = list(spec.args), spec.driver_memory
        self.py_files = ",".join(spec.py_files) or None  # the package the executors import, on a cluster
        self.master = spec.master
        try:
            super().execute(context)
        except Exception as exc:
            refused = refusal(results)
            if not refused:
                raise
            reason = f"the push job refused its input: {refused}"
            with metadata() as (_, meta):
                versions.stop_push(meta, self.store, created.number, reason)
            keep_failure(context, reason)
            raise AirflowFailException(reason) from exc
        try:
            context["ti"].xcom_push(key="return_value", value=JobResult.read(results).to_json())
        finally:
            results.unlink(missing_ok=True)


# Airflow validates every task's copy of the DAG's params each time it serialises the DAG (every parse), and
# jsonschema checks the schema itself against its metaschema first: against 2020-12's (the default, $ref-heavy) that
# was most of a parse (0.8 s of a store's DAG, profiled); against draft 7's it is a quarter. The keywords used here
# mean the same in both.
PARAM_SCHEMA_DRAFT = "http://json-schema.org/draft-07/schema#"


def form_param(default: Any, **schema: Any) -> Param:
    """A trigger-form Param whose schema declares draft 7 (see above): the rollout and upgrade DAGs' params."""
    return Param(default, **{"$schema": PARAM_SCHEMA_DRAFT, **schema})


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
            with _inputs(store, context, region) as inputs:
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
            with _inputs(store, context) as inputs:
                announced = step.run(inputs)
            if announced is None:
                raise AirflowSkipException("the version does not serve in every region: no asset event")
            context["outlet_events"][asset].extra = announced
            return announced

        return _task_of(announce())

    def condition(self, step: Step, region: str | None) -> BaseOperator:
        store = self.store

        @task.sensor(
            task_id=step.name, poke_interval=step.poll_seconds, timeout=step.timeout_seconds, mode="reschedule"
        )
        def wait(**context: Any) -> bool:
            with _inputs(store, context, region) as inputs:
                return bool(step.run(inputs))

        return _task_of(wait())

    def admission(self, step: Step, region: str, admitted_next: str) -> BaseOperator:
        store, group = self.store, region_group(region)

        @task.branch(task_id=step.name)
        def admitted(**context: Any) -> str:
            with _inputs(store, context, region) as inputs:
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
            with _inputs(store, context, region, stopping=True) as inputs:
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
