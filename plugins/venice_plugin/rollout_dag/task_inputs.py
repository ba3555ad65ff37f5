"""What a step of the rollout DAG works on in its task: the run's request, the version it created, the run's
`HookDecisions` (refused once its push has stopped or ended), and the failure it keeps for the CLI to show."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from venice_core.config import ClusterConfig
from venice_core.controller import push_jobs, repush_config, stores
from venice_core.controller.hook_decisions import HookDecisions
from venice_core.errors import ConfigError, RolloutStopped
from venice_core.meta import MetadataStore
from venice_core.meta.context import metadata
from venice_core.rollout.names import FAILURE_XCOM, SOURCE_KAFKA_PARAM, push_job_id, run_confs
from venice_core.rollout.push_confs import check_user_confs
from venice_core.rollout.steps import CreatedVersion, PushRequest, StepInputs
from venice_plugin.error_policy import airflow_errors
from venice_plugin.scheduled_push import run_input


def result_file(config: ClusterConfig, job_id: str) -> Path:
    return config.data_dir / "push-results" / f"{job_id}.json"


def request(store: str, context: dict[str, Any]) -> PushRequest:
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


def created_version(context: dict[str, Any]) -> CreatedVersion | None:
    data = context["ti"].xcom_pull(task_ids="create_version")
    return CreatedVersion.from_json(data) if data else None


@contextmanager
def step_inputs(
    store: str, context: dict[str, Any], region: str | None = None, stopping: bool = False
) -> Iterator[StepInputs]:
    """A step's inputs in this task: the run's rollout (its DB connections released when the task is done). A push
    that has already stopped raises the recorded stop, but in the tasks that stop it (`stopping`: applying a stop
    again is harmless, and completes one a failure cut short); a stop is final (no retry). A step an operator cleared
    in Airflow runs only while its push goes on (`_refuse_if_push_ended`). A step that fails on a
    VeniceError keeps its reason as the XCom `failure` (`keep_failure`), then fails as `error_policy` says."""
    created = created_version(context)
    with airflow_errors(lambda error: keep_failure(context, str(error))), metadata() as (config, meta):
        rollout = HookDecisions(
            config,
            meta,
            store,
            push_job_id(store, context["run_id"], context["params"]),
            stores.store_settings(meta, store).hook_configs,
            progress=print,
            version=created.number if created else None,
        )
        was_cleared = cleared(context)
        if was_cleared:
            _refuse_if_push_ended(meta, rollout.push_job_id, context["run_id"])
        if not stopping:
            rollout.ensure_not_stopped(cleared=was_cleared)
        yield StepInputs(rollout, request(store, context), created, region)


def cleared(context: Any) -> bool:
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
