"""`venice push` through Airflow: trigger the store's rollout DAG run and follow it until it ends."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from venice_core.config import ClusterConfig
from venice_core.controller import versions
from venice_core.controller.stores import describe_store
from venice_core.embedded.airflow import AirflowApi, AirflowUnreachable
from venice_core.errors import ComponentError, VeniceError
from venice_core.hooks.records import describe, invocations, is_notable
from venice_core.meta import MetadataStore

DAG_APPEAR_TIMEOUT_SECONDS = 120
UNREACHABLE_TIMEOUT_SECONDS = 600
FAILURE_CALLBACK_TIMEOUT_SECONDS = 30


class RolloutFailed(VeniceError):
    exit_code = 3


def dag_id(store: str) -> str:
    """The store's rollout DAG."""
    return f"venice_push__{store}"


def push_job_id(store: str, run_id: str) -> str:
    """The push job id of a DAG run (hook invocations and the version record it)."""
    return f"{store}-{re.sub(r'[^A-Za-z0-9_-]', '-', run_id)}"[:128]


def push(
    config: ClusterConfig,
    meta: MetadataStore,
    store: str,
    input_path: str,
    key_field: str,
    value_field: str,
    confs: dict[str, str],
    progress: Callable[[str], None] = print,
    timeout: float = 3600,
) -> int:
    """Trigger the store's rollout run and follow it; the number of the version every region serves at the end."""
    describe_store(meta, store)  # unknown store: one clear error before anything happens
    api = AirflowApi(config)
    dag = dag_id(store)
    deadline = time.monotonic() + DAG_APPEAR_TIMEOUT_SECONDS
    while not api.has_dag(dag):
        if time.monotonic() > deadline:
            raise ComponentError(f"Airflow has no DAG {dag} (is the store new? the dag-processor picks it up)")
        time.sleep(2)
    run_id = api.trigger(dag, {"input": input_path, "key_field": key_field, "value_field": value_field, "conf": confs})
    progress(f"triggered {dag} run {run_id}")
    follower = RunFollower(api, meta, store, run_id, progress)
    deadline = time.monotonic() + timeout
    unreachable_since: float | None = None
    while time.monotonic() < deadline:
        try:
            state = follower.poll()
            unreachable_since = None
        except AirflowUnreachable as exc:  # Airflow restarting: the run goes on when it is back
            if unreachable_since is None:
                unreachable_since = time.monotonic()
                progress(f"  {exc}; still following the run")
            if time.monotonic() - unreachable_since > UNREACHABLE_TIMEOUT_SECONDS:
                raise
            time.sleep(2)
            continue
        if state == "success":
            info = describe_store(meta, store)
            return max(v["current"] for v in info["regions"].values())
        if state == "failed":
            _wait_until_push_ended(meta, store, push_job_id(store, run_id))
            raise RolloutFailed(failure_summary(meta, store, run_id, follower.failed_tasks()))
        time.sleep(1)
    raise RolloutFailed(f"rollout run {run_id} did not finish within {timeout:.0f}s")


def _wait_until_push_ended(meta: MetadataStore, store: str, job_id: str) -> None:
    """A run failed by a step's own error is ended by the DAG's failure callback, which Airflow runs shortly after
    the run fails: wait for it, so the summary says what became of the version."""
    deadline = time.monotonic() + FAILURE_CALLBACK_TIMEOUT_SECONDS
    while versions.version_of_push(meta, store, job_id) is not None and time.monotonic() < deadline:
        time.sleep(0.5)


class RunFollower:
    """Prints each step's state changes and the hooks' non-PROCEED answers as a run goes."""

    def __init__(
        self, api: AirflowApi, meta: MetadataStore, store: str, run_id: str, progress: Callable[[str], None]
    ) -> None:
        self.api, self.meta, self.store, self.run_id, self.progress = api, meta, store, run_id, progress
        self.seen: dict[str, str] = {}
        self.last_invocation = 0

    def poll(self) -> str:
        for task_id, state in sorted(self.api.task_states(dag_id(self.store), self.run_id).items()):
            if self.seen.get(task_id) != state and state not in ("none", "scheduled", "queued"):
                self.progress(f"  {task_id}: {state}")
                if state == "awaiting_input":
                    region = task_id.split(".")[0].replace("_", "-")
                    self.progress(
                        f"    approve or reject in the Airflow UI (Required Actions), or with "
                        f"`venice rollout approve {self.store} --region {region} [--reject]`"
                    )
                self.seen[task_id] = state
        for record in invocations(self.meta, push_job_id(self.store, self.run_id), self.last_invocation):
            self.last_invocation = record.id
            if is_notable(record):
                detail = record.error or record.reason
                self.progress(f"    {describe(record)}" + (f": {detail}" if detail else ""))
        return self.api.run_state(dag_id(self.store), self.run_id)

    def failed_tasks(self) -> list[str]:
        return [t for t, s in self.seen.items() if s == "failed"]


def failure_summary(meta: MetadataStore, store: str, run_id: str, failed_tasks: list[str]) -> str:
    """Where the run failed, and what became of its version (or, if it made none, what the hooks said)."""
    job_id = push_job_id(store, run_id)
    where = f"rollout run failed at {', '.join(failed_tasks) or 'a task'}"
    version = next((v for v in describe_store(meta, store)["versions"] if v["push_job_id"] == job_id), None)
    if version is not None:
        return f"{where}; version {version['number']} is {version['status']}" + (
            f": {version['reason']}" if version["reason"] else ""
        )
    stops = [r for r in invocations(meta, job_id) if r.outcome not in (None, "PROCEED")]
    if not stops:
        return f"{where}; no version was created"
    detail = stops[-1].error or stops[-1].reason
    return f"{where}; no version was created: {describe(stops[-1])}" + (f" ({detail})" if detail else "")
