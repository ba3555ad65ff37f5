"""Thousands of stores in Airflow: every store's DAGs present, and what they cost Airflow's dag-processors.

For each store count N, a sandbox metadata store gets N stores (every tenth with a scheduled repush, so a repush
DAG too), their DAG files are written as `venice up` writes them (`orchestration.airflow.store_dags`), and the
platform's embedded Airflow starts on them. Measured with Airflow's own parsing:

- the first full parse: the time until every DAG is in Airflow's database, and the CPU of the dag-processors
  (their managers and the parse processes they fork);
- the steady state: the dag-processors' CPU per minute with nothing changing, against the floor, the same
  dag-processors with no stores at all (a ratio near 1 is the target: unchanged stores cost nothing);
- a new store's DAG: from `create_store` (and what `venice store create` then does) until the DAG is in Airflow's
  database, and a deleted store's until it is gone (stale);
- a task's parse: a process with the plugin loaded (as an executor's worker forks its tasks) parsing one store's
  DAG file as Airflow's task runner does, at this N;
- the Browse > Rollouts page: its first page, and filtered to one store, signed in.

Targets at 3,000 stores: every DAG present; steady-state CPU under 10% of a core; a new store's DAG within 30 s;
a task's parse under 0.5 s; the page under 2 s.

    .venv/bin/python -m bench.dag_scale [--stores 100,1000,3000] [--steady-seconds 120]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.harness import SCHEMAS, running_pid
from tests.support.sandbox import write_sandbox_config
from venice_core.config import ENV_CONFIG, ClusterConfig, load_config
from venice_core.controller import stores
from venice_core.deployment import airflow as deployment
from venice_core.embedded import airflow
from venice_core.meta import MetadataStore
from venice_core.orchestration.airflow import store_dags
from venice_core.orchestration.airflow.api import AirflowApi
from venice_core.rollout.names import REPUSH_DAG_PREFIX, ROLLOUT_DAG_PREFIX, rollout_dag_id

DAG_PROCESSORS = ("dag-processor", airflow.STORE_DAG_PROCESSOR)
REPUSH_EVERY = 10  # one store in this many has a scheduled repush (its own DAG)
FULL_PARSE_TIMEOUT_SECONDS = 3600.0
NEW_DAG_TIMEOUT_SECONDS = 120.0


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of a running process and of its children it has waited for (the parse processes)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def dag_processor_cpu(config: ClusterConfig) -> float:
    """CPU seconds of both dag-processors (the stores' one, and the one of dags/) and their parse processes."""
    return sum(
        tree_cpu_seconds(running_pid(process))
        for name, process in zip(airflow.COMPONENTS, airflow.processes(config), strict=True)
        if name in DAG_PROCESSORS
    )


def dag_absent(api: AirflowApi, dag_id: str) -> bool:
    return not api.has_dag(dag_id)


def wait(condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.25) -> float:
    """Seconds until `condition` holds."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{what}: not within {timeout:.0f}s")
        time.sleep(poll)
    return time.monotonic() - started


def create_stores(
    config: ClusterConfig, meta: MetadataStore, count: int, prefix: str = "s", repush_every: int = REPUSH_EVERY
) -> list[str]:
    key = (SCHEMAS / "user_key.avsc").read_text()
    value = (SCHEMAS / "user_value_v1.avsc").read_text()
    names = [f"{prefix}{i:05d}" for i in range(count)]
    for index, name in enumerate(names):
        stores.create_store(meta, config, name, key, value, partitions=1)
        if repush_every and index % repush_every == 0:
            stores.update_store(meta, config, name, repush_schedule="daily", repush_ttl_seconds="86400")
    return names


TASK_PARSE = """
import json, sys, time
from pathlib import Path
import airflow  # loads the plugin, as an executor's worker has it before it forks a task
from airflow.dag_processing.dagbag import BundleDagBag
path = Path(sys.argv[1])
started = time.perf_counter()
bag = BundleDagBag(  # as Airflow's task runner parses a task's DAG file
    dag_folder=str(path), safe_mode=False, load_op_links=False, bundle_path=path.parent, bundle_name=sys.argv[2]
)
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "dags": sorted(bag.dags), "errors": list(bag.import_errors)}))
"""


def browse_seconds(config: ClusterConfig, api: AirflowApi, total: int, query: str = "", runs: int = 3) -> float:
    """The best of `runs` loads of the Browse > Rollouts page (its first page, or filtered by `query`), signed in,
    each checked to list `total` stores in all and a row for each store its first page names."""
    url = f"{deployment.base_url(config)}/venice/rollout/" + (f"?q={urllib.parse.quote(query)}" if query else "")
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(url, headers=api.headers), timeout=60) as response:
            page = response.read().decode()
        best = min(best, time.perf_counter() - started)
        pager = re.search(r"Stores 1-(\d+) of (\d+)", page)
        shown, listed = (int(pager[1]), int(pager[2])) if pager else (0, 0)
        if listed != total or page.count("<tr data-store=") != shown:
            raise RuntimeError(f"{url} listed {listed} stores ({shown} shown), not {total}")
    return best


def task_parse_seconds(config: ClusterConfig, store: str, runs: int = 3) -> float:
    """The best of `runs` parses of the store's file by a process that runs a task of its rollout DAG."""
    env = {**airflow.environment(config), "_AIRFLOW_PARSING_CONTEXT_DAG_ID": rollout_dag_id(store)}
    path = store_dags.folder(config) / store_dags.file_name(rollout_dag_id(store))
    best = float("inf")
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", TASK_PARSE, str(path), deployment.STORES_BUNDLE],
            env=env,
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            raise RuntimeError(f"task parse of {path} failed:\n{out.stderr[-2000:]}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if result["dags"] != [rollout_dag_id(store)] or result["errors"]:
            raise RuntimeError(f"task parse of {path}: {result}")
        best = min(best, result["seconds"])
    return best


@dataclass
class Figures:
    stores: int
    dags: int
    present: int
    full_parse_seconds: float
    full_parse_cpu: float
    steady_cpu_per_minute: float
    new_dag_seconds: list[float]
    deleted_dag_seconds: list[float]
    task_parse_seconds: float
    browse_seconds: tuple[float, float]


class NoTopics:
    """The stores here never push: no topics to create or delete (no Kafka runs)."""

    def create_topic(
        self, bootstrap: str, topic: str, partitions: int, replication_factor: int = 1, min_insync_replicas: int = 1
    ) -> None:
        return None

    def delete_topics(self, bootstrap: str, topics: list[str]) -> None:
        return None


def measure(count: int, steady_seconds: float, changes: int) -> Figures:
    with tempfile.TemporaryDirectory(prefix="venice-dag-scale-") as tmp:
        properties = write_sandbox_config(Path(tmp) / "home", {"airflow.enabled": "true"})
        os.environ[ENV_CONFIG] = str(properties)
        config = load_config()
        meta = MetadataStore(config.metadata_db_url)
        meta.migrate()
        try:
            started = time.monotonic()
            names = create_stores(config, meta, count)
            synced = store_dags.sync(config, meta)
            written = len(synced.changes.written)
            print(f"  {count} stores created, {written} DAG files written in {time.monotonic() - started:.1f}s")
            expected = {ROLLOUT_DAG_PREFIX: count, REPUSH_DAG_PREFIX: len(range(0, count, REPUSH_EVERY))}
            started = time.monotonic()
            print(f"  {airflow.start(config)}")
            api = AirflowApi(config)
            cpu_at_start = dag_processor_cpu(config)

            def all_present() -> bool:
                return all(api.count_dags(prefix) == n for prefix, n in expected.items())

            full = wait(all_present, FULL_PARSE_TIMEOUT_SECONDS, f"{sum(expected.values())} DAGs", poll=2.0)
            full += time.monotonic() - started - full  # from Airflow's start
            full_cpu = dag_processor_cpu(config) - cpu_at_start
            print(f"  every DAG present {full:.1f}s after Airflow's start ({full_cpu:.1f} CPU-s of the dag-processors)")

            time.sleep(10)  # the last parse results written
            before = dag_processor_cpu(config)
            time.sleep(steady_seconds)
            steady = (dag_processor_cpu(config) - before) / steady_seconds * 60
            print(f"  steady state: {steady:.2f} CPU-s a minute ({steady / 60:.1%} of a core)")

            new_times, deleted_times = [], []
            for index in range(changes):
                name = f"new{index:03d}"
                begun = time.monotonic()
                create_stores(config, meta, 1, prefix=name, repush_every=0)
                store_dags.store_changed(config, meta, f"{name}00000", api)  # as `venice store create` does
                new = rollout_dag_id(f"{name}00000")
                wait(functools.partial(api.has_dag, new), NEW_DAG_TIMEOUT_SECONDS, "new DAG")
                new_times.append(time.monotonic() - begun)
                gone = names[index * 7 + 1]
                begun = time.monotonic()
                stores.delete_store(meta, config, gone, topics=NoTopics())
                store_dags.store_changed(config, meta, gone, api)  # as `venice store delete` does
                wait(functools.partial(dag_absent, api, rollout_dag_id(gone)), NEW_DAG_TIMEOUT_SECONDS, "deleted DAG")
                deleted_times.append(time.monotonic() - begun)
            print(
                f"  new store's DAG in {', '.join(f'{s:.1f}' for s in new_times)} s; "
                f"deleted store's gone in {', '.join(f'{s:.1f}' for s in deleted_times)} s"
            )
            task = task_parse_seconds(config, names[0]) if names else 0.0
            if names:
                print(f"  a task's parse of its store's file: {task * 1000:.0f} ms")
            browse = (
                browse_seconds(config, api, count),
                browse_seconds(config, api, 1 if names else 0, query=names[-1] if names else "x"),
            )
            print(f"  Browse > Rollouts: first page {browse[0]:.2f}s, filtered to one store {browse[1]:.2f}s")
            present = sum(api.count_dags(prefix) for prefix in expected)
            return Figures(
                count,
                sum(expected.values()),
                present,
                full,
                full_cpu,
                steady,
                new_times,
                deleted_times,
                task,
                browse,
            )
        finally:
            airflow.stop(config)
            meta.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", default="100,1000,3000", help="comma-separated store counts")
    parser.add_argument("--steady-seconds", type=float, default=120.0)
    parser.add_argument("--changes", type=int, default=3, help="stores created and deleted at each count")
    args = parser.parse_args()
    counts = [int(n) for n in args.stores.split(",")]
    print("floor: the dag-processors with no stores")
    floor = measure(0, args.steady_seconds, 0)
    results = []
    for count in counts:
        print(f"{count} stores")
        results.append(measure(count, args.steady_seconds, args.changes))
    print(
        "\nstores  DAGs present  full parse (wall, CPU)  steady CPU/min (x floor)  new DAG  deleted  task parse  browse"
    )
    for f in results:
        ratio = f.steady_cpu_per_minute / max(floor.steady_cpu_per_minute, 1e-9)
        print(
            f"{f.stores:>6}  {f.present:>5}/{f.dags:<6}  {f.full_parse_seconds:7.1f}s {f.full_parse_cpu:8.1f}s"
            f"      {f.steady_cpu_per_minute:6.2f}s ({ratio:4.2f}x)"
            f"        {max(f.new_dag_seconds, default=0):5.1f}s  {max(f.deleted_dag_seconds, default=0):5.1f}s"
            f"  {f.task_parse_seconds * 1000:6.0f} ms  {f.browse_seconds[0]:5.2f}s"
        )
    print(f"floor (no stores): steady {floor.steady_cpu_per_minute:.2f} CPU-s a minute")


if __name__ == "__main__":
    main()
