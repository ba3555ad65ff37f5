"""Orchestration overhead of a rollout through Airflow, against the floor of Airflow itself, in the same run.

The rollout is a store's DAG run with a small push and built-in hooks that all PROCEED (no hook waits). Its overhead is
the run's wall time minus the work that is not orchestration: the Spark job (the spark_push task) and the wait for
ingestion (the ingestion_complete sensors). The floor is a chain of as many trivial tasks as the rollout runs, run
by the same Airflow (as many as the rollout ran: a first rollout counts them). Both are then run twice, alternating,
and the second of each is reported.

    .venv/bin/python -m bench.orchestration_overhead [--records 1000]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bench.harness import SCHEMAS, sandbox_platform
from scripts.generate_dataset import generate
from venice_core.config import ClusterConfig
from venice_core.controller import stores
from venice_core.embedded import airflow
from venice_core.meta import MetadataStore
from venice_core.orchestration.airflow import pushes, store_dags
from venice_core.orchestration.airflow.api import AirflowApi
from venice_core.rollout.names import rollout_dag_id

FLOOR_DAG = "venice_orchestration_floor"
# Real hooks at every step, answering PROCEED without waiting (no delay configured, no health URL).
HOOKS = {
    "venice.store.lifecycle.hooks": "venice_core.hooks.builtin.MinDelayBetweenRegions,"
    "venice_core.hooks.builtin.HealthCheck"
}
NOT_ORCHESTRATION = ("spark_push", "ingestion_complete")  # task ids (or their last part) whose time is excluded

FLOOR_DAG_FILE = '''"""A chain of {n} trivial tasks: Airflow's own cost per dependent task (benchmark only)."""
import pendulum
from airflow.sdk import DAG, chain, task

with DAG(dag_id="{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):

    @task
    def step() -> None:
        return None

    chain(*[step.override(task_id=f"step_{{i:02d}}")() for i in range({n})])
'''


@dataclass
class RunTiming:
    wall: float
    tasks: list[tuple[str, float, float]]  # task id, seconds after the run started, duration

    @property
    def excluded(self) -> float:
        return sum(d for t, _, d in self.tasks if t.rsplit(".", 1)[-1] in NOT_ORCHESTRATION)

    @property
    def overhead(self) -> float:
        return self.wall - self.excluded


def _seconds(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def timing(api: AirflowApi, dag_id: str, run_id: str) -> RunTiming:
    run = api.run(dag_id, run_id)
    start = _seconds(run["start_date"])
    tasks = sorted(
        (t["task_id"], _seconds(t["start_date"]) - start, _seconds(t["end_date"]) - _seconds(t["start_date"]))
        for t in api.task_instances(dag_id, run_id)
        if t["state"] == "success" and t["start_date"] and t["end_date"]  # the branches skip the paths not taken
    )
    return RunTiming(_seconds(run["end_date"]) - start, sorted(tasks, key=lambda t: t[1]))


def run_floor(api: AirflowApi) -> RunTiming:
    run_id = api.trigger(FLOOR_DAG, {})
    while api.run_state(FLOOR_DAG, run_id) not in ("success", "failed"):
        time.sleep(1)
    assert api.run_state(FLOOR_DAG, run_id) == "success"
    return timing(api, FLOOR_DAG, run_id)


def run_rollout(api: AirflowApi, config: ClusterConfig, meta: MetadataStore, store: str, data: Path) -> RunTiming:
    request = pushes.RolloutRequest(store, {}, progress=lambda _line: None)
    pushes.push(config, meta, request, str(data), "key", "value")
    dag_id = rollout_dag_id(store)
    run = api.latest_run(dag_id)
    assert run is not None, f"no run of {dag_id} after a rollout"
    return timing(api, dag_id, run["dag_run_id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1000)
    args = parser.parse_args()
    with sandbox_platform(HOOKS) as (config, meta, home):
        store = "orchestration_bench"
        stores.create_store(
            meta,
            config,
            store,
            (SCHEMAS / "user_key.avsc").read_text(),
            (SCHEMAS / "user_value_v1.avsc").read_text(),
            partitions=1,
        )
        data = generate(home / "input", args.records, files=1)
        dags = Path(tempfile.mkdtemp(prefix="venice-bench-dags-"))  # the floor's DAG file, beside no other
        store_dags.sync_store(config, meta, store)  # the store's rollout DAG, as `venice store create` writes it
        try:
            print(f"  {airflow.start(config, dags_folder=dags)}")
            api = AirflowApi(config)
            while not api.has_dag(rollout_dag_id(store)):
                time.sleep(2)
            # A first rollout (which also warms Airflow up) says how many tasks a rollout runs: the floor is a
            # chain of as many.
            rollout_tasks = len(run_rollout(api, config, meta, store, data).tasks)
            (dags / f"{FLOOR_DAG}.py").write_text(FLOOR_DAG_FILE.format(n=rollout_tasks, dag_id=FLOOR_DAG))
            while not api.has_dag(FLOOR_DAG):
                time.sleep(2)
            runs = []
            for _ in range(2):
                floor = run_floor(api)
                rollout = run_rollout(api, config, meta, store, data)
                runs.append((floor, rollout))
        finally:
            airflow.stop(config)
            shutil.rmtree(dags, ignore_errors=True)
    floor, rollout = runs[-1]
    assert len(rollout.tasks) == rollout_tasks == len(floor.tasks), (len(rollout.tasks), len(floor.tasks))
    print(f"\nRollout of {args.records} records through Airflow, {rollout_tasks} dependent tasks (second run of two)")
    print(f"  {'task':<38} {'starts at':>9} {'runs':>7}")
    for task_id, at, duration in rollout.tasks:
        mark = "  (excluded)" if task_id.rsplit(".", 1)[-1] in NOT_ORCHESTRATION else ""
        print(f"  {task_id:<38} {at:>8.1f}s {duration:>6.2f}s{mark}")
    per_task = rollout.overhead / rollout_tasks
    floor_per_task = floor.wall / rollout_tasks
    print(
        f"\n  rollout wall {rollout.wall:.1f}s - Spark and ingestion {rollout.excluded:.1f}s = overhead "
        f"{rollout.overhead:.1f}s ({per_task:.2f}s per task)"
    )
    print(
        f"  floor: chain of {rollout_tasks} trivial tasks {floor.wall:.1f}s ({floor_per_task:.2f}s per task; "
        f"each task runs {sum(d for _, _, d in floor.tasks) / rollout_tasks:.2f}s)"
    )
    print(f"  ratio overhead / floor: {rollout.overhead / floor.wall:.2f}x (target <= 1.5x)")
    for number, (f, r) in enumerate(runs, 1):
        print(f"  run {number}: floor {f.wall:.1f}s, rollout {r.wall:.1f}s, overhead {r.overhead:.1f}s")


if __name__ == "__main__":
    main()
