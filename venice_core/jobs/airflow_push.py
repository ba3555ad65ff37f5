"""`venice push --airflow`: trigger the store's rollout DAG run and follow it until it ends."""

from __future__ import annotations

import time
from collections.abc import Callable

from venice_core.config import ClusterConfig
from venice_core.controller.stores import describe_store
from venice_core.embedded.airflow import AirflowApi
from venice_core.errors import ComponentError, VeniceError
from venice_core.meta import MetadataStore

DAG_APPEAR_TIMEOUT_SECONDS = 120


class RolloutFailed(VeniceError):
    exit_code = 3


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
    describe_store(meta, store)  # unknown store: one clear error before anything happens
    api = AirflowApi(config)
    dag_id = f"venice_push__{store}"
    deadline = time.monotonic() + DAG_APPEAR_TIMEOUT_SECONDS
    while not api.has_dag(dag_id):
        if time.monotonic() > deadline:
            raise ComponentError(f"Airflow has no DAG {dag_id} (is the store new? the dag-processor picks it up)")
        time.sleep(2)
    run_id = api.trigger(
        dag_id, {"input": input_path, "key_field": key_field, "value_field": value_field, "conf": confs}
    )
    progress(f"triggered {dag_id} run {run_id}")
    seen: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for task_id, state in sorted(api.task_states(dag_id, run_id).items()):
            if seen.get(task_id) != state and state not in ("none", "scheduled", "queued"):
                progress(f"  {task_id}: {state}")
                seen[task_id] = state
        state = api.run_state(dag_id, run_id)
        if state == "success":
            info = describe_store(meta, store)
            return max(v["current"] for v in info["regions"].values())
        if state == "failed":
            latest = describe_store(meta, store)["versions"][-1:]
            failed = [t for t, s in seen.items() if s == "failed"]
            outcome = f"; version {latest[0]['number']} is {latest[0]['status']}" if latest else ""
            reason = f": {latest[0]['reason']}" if latest and latest[0]["reason"] else ""
            raise RolloutFailed(f"rollout run failed at {', '.join(failed) or 'a task'}{outcome}{reason}")
        time.sleep(1)
    raise RolloutFailed(f"rollout run {run_id} did not finish within {timeout:.0f}s")
