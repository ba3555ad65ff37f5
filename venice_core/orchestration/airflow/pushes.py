"""`venice push` and `venice repush` through Airflow: every refusal made before Airflow is asked, then a run of the
store's rollout DAG triggered (saying at once that it queues behind a run in flight, or refusing with `--no-queue`)
and followed (`run_following`); a failure summarised from the version's status or the hooks' last answer; a run an
operator deleted ends its push."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from venice_core.config import ClusterConfig
from venice_core.controller import repush_config, versions
from venice_core.controller.stores import describe_store
from venice_core.errors import VeniceError
from venice_core.hooks.executor import Outcome
from venice_core.hooks.records import describe, invocations
from venice_core.meta import MetadataStore
from venice_core.orchestration.airflow import store_dags
from venice_core.orchestration.airflow.api import AirflowApi
from venice_core.orchestration.airflow.run_following import (
    DagPaused,
    FollowView,
    PlainView,
    RolloutFailed,
    RunDeleted,
    RunFollower,
    trigger_and_follow,
    unpause_hint,
    wait_for_dag,
)
from venice_core.rollout.names import (
    ENDED_IN_AIRFLOW,
    SOURCE_FILES_PARAM,
    SOURCE_KAFKA_PARAM,
    ended_in_airflow,
    push_job_id,
    rollout_dag_id,
)
from venice_core.rollout.push_confs import check_push_confs
from venice_core.spark.inputs.input_schema import check_push_input
from venice_core.utils.waiting import poll_until

FAILURE_CALLBACK_TIMEOUT_SECONDS = 30


class RunInFlight(VeniceError):
    http_status = 409


@dataclass(frozen=True)
class RolloutRequest:
    """A push or a repush through the store's DAG, and how it is followed: `progress` the lines said (when no
    `view` is given), `timeout` the run's, `queue` False to refuse rather than queue behind a run in flight; `api`
    the Airflow asked (the config's by default)."""

    store: str
    confs: dict[str, str]
    progress: Callable[[str], None] = print
    timeout: float = 3600
    queue: bool = True
    view: FollowView | None = None
    api: AirflowApi | None = None

    def follow_view(self) -> FollowView:
        """The view the run is followed in: the one given, else plain lines to `progress`."""
        return self.view or PlainView(self.progress)


def push(
    config: ClusterConfig,
    meta: MetadataStore,
    request: RolloutRequest,
    input_path: str,
    key_field: str,
    value_field: str,
) -> int:
    """Trigger the store's rollout run and follow it; the number of the version every region serves at the end.

    While another run of the store's DAG is in flight, the new run queues behind it (the DAG runs one at a time):
    said at once, or refused before anything is triggered when `queue` is False."""
    check_push_confs(request.confs)  # before Airflow is asked anything
    check_push_input(meta, request.store, input_path, key_field, value_field)
    params = {
        "source": SOURCE_FILES_PARAM,
        "input": input_path,
        "key_field": key_field,
        "value_field": value_field,
        "conf": request.confs,
    }
    return _run_rollout(config, meta, request, params)


def repush(config: ClusterConfig, meta: MetadataStore, request: RolloutRequest) -> int:
    """`venice repush` through the store's DAG: the repush checked here (its confs, its source: every refusal
    before Airflow is asked anything), then a run of the store's DAG with `source=kafka`, followed like a push. The
    run resolves its source again when it creates the version (a run queued behind another push repushes the
    version current then). A run in flight is queued behind (or refused with `queue` False), as for a push."""
    from venice_core.rollout.local import prepare_repush

    view = request.follow_view()
    request = replace(request, view=view)  # the same view follows the run
    store = request.store
    _, source, _ = prepare_repush(config, meta, store, request.confs, check_in_flight=False)
    view.line(f"repushing '{store}' (now from version {source.version} in {source.region}, {source.topic})")
    params = {"source": SOURCE_KAFKA_PARAM, "input": repush_config.REPUSH_INPUT, "conf": dict(request.confs)}
    return _run_rollout(config, meta, request, params)


def _run_rollout(config: ClusterConfig, meta: MetadataStore, request: RolloutRequest, params: dict[str, Any]) -> int:
    """Trigger a run of the store's DAG with `params` and follow it to its end."""
    store, timeout = request.store, request.timeout
    view = request.follow_view()
    api = request.api or AirflowApi(config)
    dag = rollout_dag_id(store)
    built_from = store_dags.current_rollout(config, meta, store)
    wait_for_dag(
        dag,
        functools.partial(store_dags.dag_is_current, api, dag, built_from),
        functools.partial(store_dags.ask_to_parse, api, [dag]),
        view,
        "is the store new, or just changed?",
    )
    if api.dag_paused(dag):  # named now, rather than a run left queued until someone unpauses the DAG
        raise DagPaused(f"the DAG {dag} is paused in Airflow: nothing was triggered; {unpause_hint(dag)}")
    in_flight = api.active_runs(dag)
    if in_flight and not request.queue:
        raise RunInFlight(
            f"a rollout of '{store}' is in flight (run {in_flight[-1]}); not queueing behind it (--no-queue)"
        )
    try:
        run_id = trigger_and_follow(
            api,
            meta,
            store,
            dag,
            params,
            view,
            timeout,
            failed=lambda follower: _failed(meta, store, follower),
            timed_out=lambda run_id: RolloutFailed(f"rollout run {run_id} did not finish within {timeout:.0f}s"),
            queued_behind=in_flight[-1] if in_flight else None,
            job_id=lambda run_id: push_job_id(store, run_id, params),
        )
    except RunDeleted as deleted:
        ended = _end_deleted_run(meta, store, deleted.job_id, deleted.run_id, str(deleted))
        raise RunDeleted(ended, deleted.run_id, deleted.job_id) from None
    job_id = push_job_id(store, run_id, params)
    version = describe_store(meta, store).version_of_push(job_id)
    if version is None:  # a run succeeds only past its version's creation: an operator marked it success
        raise RolloutFailed(
            f"rollout run {run_id} was marked success in Airflow before it created a version; nothing was pushed"
        )
    if ENDED_IN_AIRFLOW in version.reason:  # marked success by hand, not rolled out
        ended = f"version {version.number} is {version.status}"
        raise RolloutFailed(f"{version.reason} before its rollout ended; {ended}")
    return max(describe_store(meta, store).serving().values())


def _failed(meta: MetadataStore, store: str, follower: RunFollower) -> RolloutFailed:
    """A failed rollout run's error, once the push has ended (`_wait_until_push_ended`)."""
    _wait_until_push_ended(meta, store, follower.job_id)
    return RolloutFailed(failure_summary(meta, store, follower.job_id, follower.failures()))


def _end_deleted_run(meta: MetadataStore, store: str, job_id: str, run_id: str, said: str) -> str:
    """A followed run an operator deleted in Airflow: its push, if one is in flight, ends now (the store takes the
    next push); what became of it, for the error."""
    row = versions.version_of_push(meta, store, job_id)
    if row is None:
        return said
    versions.stop_push(meta, store, row.number, ended_in_airflow(run_id, "deleted"))
    version = describe_store(meta, store).version(row.number)
    return f"{said}; version {row.number} is {version.status if version else 'gone'}"


def _wait_until_push_ended(meta: MetadataStore, store: str, job_id: str) -> None:
    """A run failed by a step's own error is ended by the DAG's failure callback, which Airflow runs shortly after
    the run fails: wait for it, so the summary says what became of the version."""
    poll_until(
        lambda: versions.version_of_push(meta, store, job_id) is None,
        timeout=FAILURE_CALLBACK_TIMEOUT_SECONDS,
        interval=0.5,
    )


def failure_summary(meta: MetadataStore, store: str, job_id: str, failures: dict[str, str | None]) -> str:
    """Where the run (of push job `job_id`) failed, what became of its version, and why: the reason the version
    records, else the hooks' last answer that stopped the push, else the reason each failed step kept
    (`failure_reasons`: a missing input, a refused conf), said once."""
    version = describe_store(meta, store).version_of_push(job_id)
    said = version.reason if version is not None else ""
    stops = (
        []
        if version is not None
        else [r for r in invocations(meta, job_id) if r.outcome not in (None, Outcome.PROCEED)]
    )
    explained = bool(said or stops)
    named = [f"{task}: {why}" if why and not explained else task for task, why in failures.items()]
    if version is not None and ENDED_IN_AIRFLOW in said:  # an operator's hand, not a step: say that first
        at = f" (at {', '.join(named)})" if named else ""
        return f"{said}{at}; version {version.number} is {version.status}"
    where = f"rollout run failed at {'; '.join(named) or 'a task'}"
    if version is not None:
        return f"{where}; version {version.number} is {version.status}" + (f": {said}" if said else "")
    if not stops:
        return f"{where}; no version was created"
    detail = stops[-1].error or stops[-1].reason
    return f"{where}; no version was created: {describe(stops[-1])}" + (f" ({detail})" if detail else "")
