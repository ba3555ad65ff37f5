"""The rollout page's read model over a real metadata store, with the run's task instances given as Airflow would
report them (no Airflow)."""

from __future__ import annotations

import subprocess
import sys
import uuid

from tests.support.topics import InMemoryTopics
from venice_core.config import ClusterConfig
from venice_core.controller import stores, versions
from venice_core.meta import MetadataStore
from venice_core.meta.models import HookInvocationRecord
from venice_core.model.status import ExecutionStatus
from venice_core.rollout.names import push_job_id
from venice_core.rollout.view import Answer, Stop, TaskRun, dag_order, rollout_view

KEY = '"string"'
VALUE = '{"type":"record","name":"V","fields":[{"name":"a","type":"int"}]}'
RUN = "manual__2026-11-22T21:00:00+00:00"
T0 = 1_800_000_000.0


def _ingest(meta: MetadataStore, store: str, number: int, region: str, records: int) -> None:
    for partition in (0, 1):
        versions.report_partition(meta, store, number, region, partition, ExecutionStatus.COMPLETED, 10, records)


def _answer(meta: MetadataStore, store: str, at: float, function: str, region: str | None, outcome: str, **kw) -> None:
    with meta.session() as session:
        session.add(
            HookInvocationRecord(
                store_name=store,
                version=2,
                push_job_id=push_job_id(store, RUN),
                hook_class=kw.pop("hook", "tests.hooks.FailWhereConfigured"),
                function=function,
                region=region,
                outcome=outcome,
                queue_wait_seconds=0.0,
                duration_seconds=0.1,
                created_at=at,
                **kw,
            )
        )


def _chain(*specs: tuple[str, str, float | None]) -> list[TaskRun]:
    """Tasks run one after another, each upstream of the next."""
    tasks, previous = [], frozenset()
    for task_id, state, started in specs:
        tasks.append(TaskRun(task_id, state, 1, None if started is None else T0 + started, previous))
        previous = frozenset({task_id})
    return tasks


def _aborted_at_dc_1(meta: MetadataStore, config: ClusterConfig) -> str:
    """Version 1 everywhere; version 2 (this run's) swapped in dc-0, then a WAIT past the maximum at dc-1's pre swap."""
    store = f"view_{uuid.uuid4().hex[:8]}"
    stores.create_store(meta, config, store, KEY, VALUE, partitions=2)
    topics = InMemoryTopics()
    versions.create_version(meta, config, store, "earlier-push", topics=topics)
    for region in config.region_names:
        _ingest(meta, store, 1, region, 5)
        versions.swap_region(meta, store, region, 1)
    versions.finish_push(meta, store, 1)
    versions.create_version(meta, config, store, push_job_id(store, RUN), topics=topics)
    versions.record_push_counts(meta, store, 2, {"0": 10, "1": 10})
    _ingest(meta, store, 2, "dc-0", 10)
    _ingest(meta, store, 2, "dc-1", 4)
    versions.swap_region(meta, store, "dc-0", 2)
    versions.stop_push(meta, store, 2, "aborted by a hook at pre_store_version_swap in dc-1 (still WAIT after 12s)")
    return store


def test_a_run_aborted_at_the_second_region(meta: MetadataStore, config: ClusterConfig) -> None:
    store = _aborted_at_dc_1(meta, config)
    _answer(meta, store, T0 + 1.5, "pre_start_of_push_job", None, "PROCEED")
    _answer(meta, store, T0 + 2.5, "pre_store_version_creation", "dc-1", "PROCEED")
    _answer(meta, store, T0 + 10.5, "pre_store_version_swap", "dc-0", "WAIT", error="RuntimeError: no")
    _answer(meta, store, T0 + 10.6, "pre_store_version_swap", "dc-0", "PROCEED", hook="tests.hooks.AnswerFromConfig")
    _answer(meta, store, T0 + 12.5, "pre_store_version_swap", "dc-0", "PROCEED")
    for at in (20.5, 22.5, 24.5):
        _answer(
            meta, store, T0 + at, "pre_store_version_swap", "dc-1", "WAIT", error="timed out after 2s", timed_out=True
        )
        _answer(meta, store, T0 + at, "pre_store_version_swap", "dc-1", "PROCEED", hook="tests.hooks.AnswerFromConfig")
    tasks = _chain(
        ("start_of_push_job", "success", 1),
        ("create_version", "success", 2),
        ("dc_0.admitted", "success", 9),
        ("dc_0.pre_swap", "success", 10),
        ("dc_0.server_swap", "success", 13),
        ("dc_1.admitted", "success", 19),
        ("dc_1.approval", "success", 19.5),  # only dc-1 asks a person
        ("dc_1.pre_swap", "failed", 20),
        ("dc_1.server_swap", "upstream_failed", 30),
        ("dc_2.admitted", "upstream_failed", 30),
        ("dc_2.pre_swap", "upstream_failed", 30),
        ("dc_2.server_swap", "upstream_failed", 30),
        ("end_of_push_job", "upstream_failed", 30),
    )

    view = rollout_view(meta, store, RUN, "failed", list(reversed(tasks)))  # any order in, the DAG's order out

    assert [(r.region, r.current, r.backup) for r in view.regions] == [("dc-0", 2, 1), ("dc-1", 1, 0), ("dc-2", 1, 0)]
    assert view.version is not None and view.version.status == "PARTIALLY_ONLINE"
    assert view.version.reason.startswith("aborted by a hook at pre_store_version_swap in dc-1")
    assert [s.name for s in view.job_steps] == ["start_of_push_job", "create_version", "end_of_push_job"]
    assert view.columns == ("admitted", "approval", "pre_swap", "server_swap")
    dc0, dc1, dc2 = view.regions
    assert dc0.steps["pre_swap"].answers == (
        Answer("FailWhereConfigured", "pre_store_version_swap", "dc-0", "WAIT", "RuntimeError: no"),
        Answer("AnswerFromConfig", "pre_store_version_swap", "dc-0", "PROCEED", ""),
        Answer("FailWhereConfigured", "pre_store_version_swap", "dc-0", "PROCEED", ""),
    )
    assert dc1.steps["pre_swap"].state == "failed" and dc1.steps["pre_swap"].answers == (
        Answer("FailWhereConfigured", "pre_store_version_swap", "dc-1", "WAIT", "timed out after 2s", count=3),
        Answer("AnswerFromConfig", "pre_store_version_swap", "dc-1", "PROCEED", "", count=3),
    )
    assert dc1.stop == Stop("ABORT", "pre_swap", view.version.reason)  # a WAIT past the maximum is an ABORT
    assert dc0.stop is None and dc2.stop is None and "approval" not in dc2.steps
    assert [a.function for a in view.job_steps[0].answers] == ["pre_start_of_push_job"]
    assert [(a.function, a.region) for a in view.job_steps[1].answers] == [("pre_store_version_creation", "dc-1")]
    assert (dc0.progress.records, dc0.progress.total, dc0.progress.percent) == (20, 20, 100.0)
    assert (dc1.progress.records, dc1.progress.percent) == (8, 40.0)
    assert dc2.progress.records == 0 and view.unplaced == ()


def test_a_hooks_rollback_and_a_decision_task_name_the_decision(meta: MetadataStore, config: ClusterConfig) -> None:
    """A hook's explicit ROLLBACK is the stop's decision; so is a branch's `abort`/`rollback` task that ran."""
    store = _aborted_at_dc_1(meta, config)
    _answer(meta, store, T0 + 20.5, "post_store_version_swap", "dc-1", "ROLLBACK", reason="error rate up")
    tasks = _chain(("dc_0.post_swap", "success", 10), ("dc_1.post_swap", "failed", 20))
    assert rollout_view(meta, store, RUN, "failed", tasks).regions[1].stop.decision == "ROLLBACK"

    def branch(region: str, taken: str, start: float) -> list[TaskRun]:
        """pre_swap, then its branch task, which takes one of server_swap, pre_swap_abort, pre_swap_rollback
        (siblings, in the order of their ids)."""
        sensor, choose = _chain(
            (f"{region}.pre_swap", "success", start), (f"{region}.pre_swap_branch", "success", start + 1)
        )
        after = frozenset({choose.task_id})
        return [sensor, choose] + [
            TaskRun(f"{region}.{step}", state if step == taken else "skipped", 1, T0 + start + 2, after)
            for step, state in (("server_swap", "success"), ("pre_swap_abort", "failed"), ("pre_swap_rollback", "-"))
        ]

    branched = rollout_view(
        meta, store, RUN, "failed", branch("dc_0", "server_swap", 10) + branch("dc_1", "pre_swap_abort", 20)
    )
    reason = "aborted by a hook at pre_store_version_swap in dc-1 (still WAIT after 12s)"
    assert branched.regions[1].stop == Stop("ABORT", "pre_swap", reason) and branched.regions[0].stop is None
    # The branch no region took is no column; the one dc-1 took is.
    assert branched.columns == ("pre_swap", "pre_swap_branch", "pre_swap_abort", "server_swap")


def test_a_store_before_any_run_and_answers_before_any_task(meta: MetadataStore, config: ClusterConfig) -> None:
    store = _aborted_at_dc_1(meta, config)
    empty = rollout_view(meta, store)
    assert empty.run_id is None and empty.version is None and empty.columns == () and empty.job_steps == ()
    assert [r.current for r in empty.regions] == [2, 1, 1]

    _answer(meta, store, T0 - 5, "validate_hook_config", None, "PROCEED")
    view = rollout_view(meta, store, RUN, "running", _chain(("start_of_push_job", "running", 1)))
    assert [a.function for a in view.unplaced] == ["validate_hook_config"]


def test_a_sensors_first_poke_belongs_to_it_though_airflow_recorded_a_later_start(
    meta: MetadataStore, config: ClusterConfig
) -> None:
    """Airflow records a rescheduled sensor's start at its last poke (and each reschedule when that poke ended):
    the sensor opened when its upstream task ended."""
    store = _aborted_at_dc_1(meta, config)
    _answer(meta, store, T0 + 10.2, "pre_store_version_swap", "dc-0", "WAIT", reason="not yet")
    _answer(meta, store, T0 + 14.2, "pre_store_version_swap", "dc-0", "PROCEED")
    tasks = [
        TaskRun("dc_0.approval", "success", 1, T0 + 9, ended_at=T0 + 10),
        TaskRun("dc_0.pre_swap", "success", 1, T0 + 10.5, frozenset({"dc_0.approval"}), ended_at=T0 + 14.5),
        TaskRun("dc_0.server_swap", "skipped", 0, T0 + 9.5, frozenset({"dc_0.approval"}), ended_at=T0 + 9.5),
        TaskRun("end_of_push_job", "success", 1, T0 + 16, frozenset({"dc_0.pre_swap"}), ended_at=T0 + 17),
    ]
    _answer(meta, store, T0 + 16.5, "post_store_version_swap", "dc-0", "PROCEED")  # asked by a later top-level step
    view = rollout_view(meta, store, RUN, "running", tasks)
    steps = view.regions[0].steps
    assert steps["approval"].answers == () and steps["server_swap"].answers == ()  # a skipped task asked nothing
    assert [a.outcome for a in steps["pre_swap"].answers] == ["WAIT", "PROCEED"]
    assert (steps["pre_swap"].started_at, steps["pre_swap"].ended_at) == (T0 + 10.5, T0 + 14.5)  # as Airflow's
    assert [a.function for a in view.job_steps[0].answers] == ["post_store_version_swap"]


def test_dag_order_is_topological_then_by_start() -> None:
    a = TaskRun("a", "success", 1, T0 + 5)
    b = TaskRun("b", "success", 1, T0 + 1, frozenset({"a"}))
    c = TaskRun("c", "none", 0, None, frozenset({"a"}))
    d = TaskRun("d", "success", 1, T0 + 2, frozenset({"a"}))
    assert [t.task_id for t in dag_order([c, d, b, a])] == ["a", "b", "d", "c"]


def test_the_read_model_imports_no_airflow() -> None:
    """The layer rule (dags -> plugins -> venice_core): the plugin passes Airflow's task instances in."""
    code = "import sys, venice_core.rollout.view; print(sorted({m.split('.')[0] for m in sys.modules}))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'airflow'" not in loaded and "'fastapi'" not in loaded and "'venice_core'" in loaded
