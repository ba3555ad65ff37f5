"""What an operator does to a rollout run by hand in Airflow (its UI or REST API), seen as it happens: an Airflow
listener, called in the API server's process when a run is marked failed or success. The run's push ends at once
(`versions.stop_push`: regions already swapped keep the version, it is KILLED where none did), so the store takes
the next push and its Da Vinci clients go back to what their region serves. A run that ends on its own is ended
by the DAG's failure callback instead (`rollout.finish_failed_run`); a cleared run is handled by its steps (a push
that ended runs nothing again: `controller.push_jobs`), a deleted one by `venice push`, which follows the run."""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

from venice_core.controller import versions
from venice_core.meta.context import metadata
from venice_core.rollout.names import ROLLOUT_DAG_PREFIX, ended_in_airflow, push_job_id, store_of

log = logging.getLogger(__name__)
# How Airflow's API says a state was set by hand (`patch_dag_run_state`), not reached by the run.
BY_HAND = "manually set"


@hookimpl
def on_dag_run_failed(dag_run: Any, msg: str) -> None:
    _ended_by_hand(dag_run, msg, "failed")


@hookimpl
def on_dag_run_success(dag_run: Any, msg: str) -> None:
    _ended_by_hand(dag_run, msg, "success")


def _ended_by_hand(dag_run: Any, msg: str, state: str) -> None:
    if BY_HAND not in (msg or "") or not str(dag_run.dag_id).startswith(ROLLOUT_DAG_PREFIX):
        return
    store = store_of(dag_run.dag_id)
    try:
        with metadata() as (_, meta):
            job = push_job_id(store, dag_run.run_id, dag_run.conf)
            stopped = versions.end_push_job(meta, store, job, ended_in_airflow(dag_run.run_id, f"marked {state}"))
            if stopped is not None:
                log.info("%s: version %d's push ended (its run was marked %s by hand)", store, stopped.number, state)
    except Exception:  # a listener must not fail the operator's request; the next push releases the store too
        log.exception("could not end the push of %s's run %s", store, dag_run.run_id)
