"""The rollout DAG's failure callbacks: a run or a step that failed ends its push."""

from __future__ import annotations

import re

from airflow.sdk import Context

from venice_core.controller import versions
from venice_core.meta.context import metadata
from venice_core.rollout.names import push_job_id, store_of


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
