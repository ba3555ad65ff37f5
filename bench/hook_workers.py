"""The lifecycle hooks' worker processes: a round of hook calls, each forked into a worker of its own
(`venice_core.hooks.executor`), against the same calls made in this process, in a process the size of an Airflow
task's (it imports Airflow's task runner and the platform's DAG code first, as a sensor's task process has). Prints
the process's memory, then milliseconds per round and per call, wall and CPU (this process's and its workers', which
a loaded machine moves less), and the ratio last.

    .venv/bin/python -m bench.hook_workers [--rounds 50] [--regions 3] [--threads 4] [--no-airflow]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import cpu_now, report, rss_mb
from venice_core.config import FailurePolicy, HookSettings
from venice_core.hooks import HookContext
from venice_core.hooks.executor import HookExecutor
from venice_core.hooks.loader import load_hooks

BUILTIN = "venice_core.hooks.builtin"
HOOKS = tuple(f"{BUILTIN}.{name}" for name in ("MinDelayBetweenRegions", "SwapWindow", "HealthCheck", "ManualApproval"))
FUNCTION = "pre_store_version_swap"


def import_a_task_process() -> None:
    """What an Airflow task process running a rollout step has imported."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "plugins"))
    import airflow.sdk.execution_time.task_runner  # noqa: F401
    import venice_plugin.rollout_dag  # noqa: F401


def timed(run: Callable[[], object], times: int) -> tuple[float, float]:
    """Wall and CPU seconds (this process's and its reaped children's) of `times` runs."""
    wall, cpu = time.perf_counter(), cpu_now() + cpu_now(resource.RUSAGE_CHILDREN)
    for _ in range(times):
        run()
    return time.perf_counter() - wall, cpu_now() + cpu_now(resource.RUSAGE_CHILDREN) - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--regions", type=int, default=3, help="contexts per round (each asks every hook)")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--no-airflow", action="store_true", help="do not import Airflow first")
    args = parser.parse_args()
    if not args.no_airflow:
        import_a_task_process()
    settings = HookSettings(HOOKS, args.threads, 60, 60, FailurePolicy.PROCEED, {})
    hooks = load_hooks(settings)
    executor = HookExecutor(settings, hooks)
    base = HookContext(cluster="bench", store="users", version=1)
    contexts = [dataclasses.replace(base, region=f"dc-{i}") for i in range(args.regions)]
    calls = args.rounds * len(contexts) * len(hooks)

    def in_this_process() -> None:
        for ctx in contexts:
            for _path, hook in hooks:
                getattr(hook, FUNCTION)(ctx)

    in_process, in_process_cpu = timed(in_this_process, args.rounds)
    executor.invoke_all(FUNCTION, contexts)  # warm
    in_workers, in_workers_cpu = timed(lambda: executor.invoke_all(FUNCTION, contexts), args.rounds)
    one = HookExecutor(settings, hooks[:1])
    one_call, one_call_cpu = timed(lambda: one.invoke(FUNCTION, base), args.rounds)

    def ms(seconds: float, per: int) -> str:
        return f"{seconds / per * 1e3:.2f} ms"

    print(f"process: {rss_mb(os.getpid()):.0f} MB resident ({'no Airflow' if args.no_airflow else 'Airflow task'})")
    report(
        f"{args.rounds} rounds of {len(contexts)} x {len(hooks)} calls, {args.threads} threads (project: in workers; "
        "baseline: in this process)",
        [
            ("per round, wall", ms(in_workers, args.rounds), ms(in_process, args.rounds)),
            ("per round, CPU", ms(in_workers_cpu, args.rounds), ms(in_process_cpu, args.rounds)),
            ("per call, wall", ms(in_workers, calls), ms(in_process, calls)),
            ("a round of one call, wall", ms(one_call, args.rounds), "-"),
            ("a round of one call, CPU", ms(one_call_cpu, args.rounds), "-"),
        ],
    )
    print(f"workers / in this process, per round (wall): {in_workers / in_process:.0f}x")


if __name__ == "__main__":
    main()
