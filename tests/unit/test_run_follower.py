"""`venice push` through Airflow, followed from task-instance sequences (a scripted stand-in for Airflow's REST API
over a real metadata store): transitions in the order they happened, skipped steps counted on one line, each
region's ingestion progress, the queue behind a run in flight and `--no-queue`."""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from scripts.generate_dataset import generate
from tests.support.metadata import migrated
from tests.support.platform import RECORDS_INPUT, SCHEMAS, PlatformEnv, make_platform_env
from tests.support.topics import InMemoryTopics
from venice_core.cli.live import LiveView
from venice_core.controller import stores, versions
from venice_core.meta import MetadataStore
from venice_core.meta.models import HookInvocationRecord
from venice_core.model.status import ExecutionStatus
from venice_core.orchestration.airflow import pushes, run_following
from venice_core.orchestration.airflow.api import AirflowRefused
from venice_core.orchestration.airflow.pushes import RolloutRequest, RunInFlight
from venice_core.orchestration.airflow.run_following import (
    DagPaused,
    PlainView,
    RolloutFailed,
    RunDeleted,
    RunFollower,
)
from venice_core.rollout.names import ended_in_airflow, push_job_id

RUN = "manual__2026-11-22T10:00:00"
T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC).timestamp()


def at(seconds: float) -> str:
    """An Airflow timestamp `seconds` after T0, as the REST API writes it."""
    return datetime.fromtimestamp(T0 + seconds, UTC).isoformat().replace("+00:00", "Z")


def ti(task_id: str, state: str | None, start: float | None = None, end: float | None = None, tries: int = 1) -> dict:
    return {
        "task_id": task_id,
        "state": state,
        "start_date": at(start) if start is not None else None,
        "end_date": at(end) if end is not None else None,
        "try_number": tries,
    }


class _EveryText(str):
    """A DAG's doc that names every fingerprint: the DAG is always built from its file's current text."""

    def __contains__(self, _text: object) -> bool:
        return True


class ScriptedAirflow:
    """Airflow's REST API as the follower sees it: each poll answers the next (run state, task instances);
    `failures`: the reason each failed task kept (its XCom `failure`)."""

    def __init__(
        self,
        polls: list[tuple[str, list[dict]]],
        in_flight: list[str] | None = None,
        failures: dict[str, str] | None = None,
    ) -> None:
        self.polls, self.in_flight, self.triggered = polls, in_flight or [], []
        self.failures = failures or {}
        self.index = -1
        self.paused = False  # the DAG, as an operator may pause it
        self.deleted = False  # the run, as an operator may delete it
        self.paused_reads = 0

    def dag_paused(self, dag_id: str) -> bool:
        self.paused_reads += 1
        return self.paused

    def has_dag(self, dag_id: str) -> bool:
        return True

    def get(self, path: str) -> dict:
        assert path.endswith("/details"), path  # a DAG's details: served as its file now is
        return {"is_stale": False, "doc_md": _EveryText("built from its file")}

    def active_runs(self, dag_id: str) -> list[str]:
        return self.in_flight

    def trigger(self, dag_id: str, conf: dict) -> str:
        self.triggered.append(conf)
        return RUN

    def run_state(self, dag_id: str, run_id: str) -> str:
        if self.deleted:
            raise AirflowRefused(f"Airflow answered 404 to GET .../dagRuns/{run_id}", 404)
        self.index = min(self.index + 1, len(self.polls) - 1)
        return self.polls[self.index][0]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        return self.polls[self.index][1]

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str) -> object | None:
        return self.failures.get(task_id) if key == "failure" else None

    def latest_run(self, dag_id: str) -> dict:
        """The run as `venice rollout status` reads it: the last poll's state."""
        state = self.polls[-1][0]
        self.index = len(self.polls) - 1
        return {"dag_run_id": RUN, "state": state, "start_date": at(0), "end_date": at(9), "conf": {}}


@pytest.fixture(autouse=True)
def _polls_without_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripted Airflow answers at once: the follower's 2 s between polls would only make the tests slow."""
    monkeypatch.setattr(run_following, "FOLLOW_POLL_SECONDS", 0.01)
    monkeypatch.setattr(run_following, "PAUSED_CHECK_SECONDS", 0.0)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[PlatformEnv]:
    env = make_platform_env(tmp_path / "home", {"airflow.enabled": "true"})
    migrated(env.meta)
    yield env
    env.meta.dispose()


@pytest.fixture
def store(env: PlatformEnv) -> str:
    name = f"follow_{uuid.uuid4().hex[:8]}"
    key, value = (SCHEMAS / "user_key.avsc").read_text(), (SCHEMAS / "user_value_v1.avsc").read_text()
    stores.create_store(env.meta, env.config, name, key, value, partitions=2)
    return name


def follow(env: PlatformEnv, store: str, api: ScriptedAirflow, queued: bool = False) -> tuple[list[str], str]:
    """Poll until the run ends; the lines printed and the run's last state."""
    lines: list[str] = []
    follower = RunFollower(api, env.meta, store, RUN, PlainView(lines.append), queued=queued)
    state = "running"
    while state not in ("success", "failed"):
        state = follower.poll()
    return lines, state


def answer(meta: MetadataStore, store: str, outcome: str, created_at: float, region: str = "dc-1") -> None:
    """A hook's answer recorded as the rollout records them."""
    with meta.session() as session:
        session.add(
            HookInvocationRecord(
                store_name=store,
                push_job_id=push_job_id(store, RUN),
                hook_class="tests.Hook",
                function="pre_store_version_swap",
                region=region,
                outcome=outcome,
                reason="not yet",
                queue_wait_seconds=0.0,
                duration_seconds=0.0,
                created_at=created_at,
            )
        )


def test_transitions_print_in_the_order_they_happened_not_as_listed(env: PlatformEnv, store: str) -> None:
    # One poll sees four changes; the API lists them by task id, which is not the order they happened in.
    answer(env.meta, store, "WAIT", T0 + 4.5)
    api = ScriptedAirflow(
        [
            (
                "success",
                [
                    ti("a.pre_swap", "success", 4, 6),
                    ti("b.create_version", "success", 1, 2),
                    ti("c.spark_push", "success", 2.5, 3.5),
                    ti("d.end", "success", 7, 8),
                ],
            )
        ]
    )
    lines, _ = follow(env, store, api)
    assert lines == [
        "  b.create_version: success",
        "  c.spark_push: success",
        "    Hook answered WAIT at pre_store_version_swap in dc-1: not yet",
        "  a.pre_swap: success",
        "  d.end: success",
    ]


def test_a_waiting_sensor_is_shown_once_not_at_every_poke(env: PlatformEnv, store: str) -> None:
    pokes = [
        ("running", [ti("dc_0.pre_swap", "running", 1)]),
        ("running", [ti("dc_0.pre_swap", "up_for_reschedule", 1, 2)]),
        ("running", [ti("dc_0.pre_swap", "running", 4)]),
        ("running", [ti("dc_0.pre_swap", "up_for_reschedule", 4, 5)]),
        ("running", [ti("dc_0.pre_swap", "up_for_retry", 7, 8)]),
        ("success", [ti("dc_0.pre_swap", "success", 10, 11, tries=2)]),
    ]
    lines, _ = follow(env, store, ScriptedAirflow(pokes))
    assert lines == [
        "  dc_0.pre_swap: running",
        "  dc_0.pre_swap: up_for_reschedule",
        "  dc_0.pre_swap: up_for_retry",
        "  dc_0.pre_swap: success",
    ]


def test_steps_skipped_after_a_stop_are_one_line_and_the_summary_names_the_failed_step(
    env: PlatformEnv, store: str
) -> None:
    later = [ti(f"dc_{r}.step_{i}", "upstream_failed", 9, 9) for r in (1, 2) for i in range(5)]
    later += [ti("dc_1.rollback", "skipped", 8, 8), ti("end_of_push_job", "upstream_failed", 9, 9)]
    polls = [
        ("running", [ti("start_of_push_job", "success", 0, 1), ti("dc_1.pre_swap", "running", 2)]),
        ("failed", [ti("start_of_push_job", "success", 0, 1), ti("dc_1.pre_swap", "failed", 2, 3), *later]),
    ]
    lines: list[str] = []
    with pytest.raises(RolloutFailed) as failed:
        request = RolloutRequest(store, {}, view=PlainView(lines.append), api=ScriptedAirflow(polls))
        pushes.push(env.config, env.meta, request, RECORDS_INPUT, "key", "value")
    assert lines == [
        f"triggered venice_push__{store} run {RUN}",
        "  start_of_push_job: success",
        "  dc_1.pre_swap: running",
        "  dc_1.pre_swap: failed",
        "  12 later steps skipped",
    ]
    assert str(failed.value) == "rollout run failed at dc_1.pre_swap; no version was created"


MISSING = "input path /data/users/2026-11-23/ does not exist"


def _failed_before_a_version() -> list[tuple[str, list[dict]]]:
    """A scheduled run whose input is missing: its first step fails, and every other step is upstream_failed."""
    later = [ti(f"dc_{r}.step_{i}", "upstream_failed", 2, 2) for r in range(3) for i in range(22)]
    return [
        ("running", [ti("start_of_push_job", "running", 0)]),
        ("failed", [ti("start_of_push_job", "failed", 0, 1), *later]),
    ]


def test_the_reason_a_step_kept_reaches_the_push_and_its_summary(env: PlatformEnv, store: str) -> None:
    """The step's reason (its XCom `failure`) is the summary's, where a run that failed before a version existed
    had only the failed task's name."""
    lines: list[str] = []
    api = ScriptedAirflow(_failed_before_a_version(), failures={"start_of_push_job": MISSING})
    with pytest.raises(RolloutFailed) as failed:
        request = RolloutRequest(store, {}, view=PlainView(lines.append), api=api)
        pushes.push(env.config, env.meta, request, RECORDS_INPUT, "key", "value")
    assert str(failed.value) == f"rollout run failed at start_of_push_job: {MISSING}; no version was created"
    assert lines[-2:] == ["  start_of_push_job: failed", "  66 later steps skipped"]


def test_rollout_status_shows_why_the_run_failed_and_folds_the_steps_not_run(
    env: PlatformEnv, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = ScriptedAirflow(_failed_before_a_version(), failures={"start_of_push_job": MISSING})
    monkeypatch.setattr("venice_core.cli.rollout.AirflowApi", lambda _config: api)
    text = env.cli("rollout", "status", store, check=True).stdout.splitlines()
    assert text[0] == f"{store}: run {RUN} failed (started {at(0)})"
    assert text[2:] == [f"  {'start_of_push_job':<40} failed: {MISSING}", "  66 later steps skipped"]
    report = json.loads(env.cli("rollout", "status", store, "--json", check=True).stdout)
    assert report["error"] == f"start_of_push_job: {MISSING}"
    assert report["steps"][0] == {"task": "start_of_push_job", "state": "failed", "tries": 1, "error": MISSING}
    assert len(report["steps"]) == 67 and "error" not in report["steps"][1]


def test_ingestion_progress_per_region_at_each_tenth(env: PlatformEnv, store: str) -> None:
    config, meta = env.config, env.meta
    number = versions.create_version(meta, config, store, push_job_id(store, RUN), topics=InMemoryTopics()).number

    def ingested(region: str, per_partition: int) -> None:
        for partition in (0, 1):
            status = ExecutionStatus.STARTED
            versions.report_partition(meta, store, number, region, partition, status, per_partition, per_partition)

    steps = [ti("create_version", "success", 0, 1)]
    api = ScriptedAirflow([("running", steps)] * 4 + [("success", steps)])
    lines: list[str] = []
    follower = RunFollower(api, meta, store, RUN, PlainView(lines.append))
    ingested("dc-0", 100)
    follower.poll()  # END_OF_PUSH's counts not known yet: no percentage to show
    versions.record_push_counts(meta, store, number, {"0": 500, "1": 500})
    follower.poll()
    ingested("dc-0", 150)  # 30%: the next tenth
    ingested("dc-1", 20)  # 4%: the same tenth as 0%
    follower.poll()
    follower.poll()  # nothing moved: nothing printed
    for region in config.region_names:
        ingested(region, 500)
    follower.poll()
    assert [line for line in lines if "ingestion" in line] == [
        "  dc-0 ingestion: 200 of 1,000 records (20%)",
        "  dc-1 ingestion: 0 of 1,000 records (0%)",
        "  dc-2 ingestion: 0 of 1,000 records (0%)",
        "  dc-0 ingestion: 300 of 1,000 records (30%)",
        "  dc-0 ingestion: 1,000 of 1,000 records (100%)",
        "  dc-1 ingestion: 1,000 of 1,000 records (100%)",
        "  dc-2 ingestion: 1,000 of 1,000 records (100%)",
    ]


def test_a_push_behind_a_run_in_flight_says_it_queues_then_when_it_starts(env: PlatformEnv, store: str) -> None:
    steps = [ti("start_of_push_job", "success", 0, 1)]
    api = ScriptedAirflow([("queued", []), ("queued", []), ("running", []), ("success", steps)], ["run-1", "run-2"])
    versions.create_version(env.meta, env.config, store, push_job_id(store, RUN), topics=InMemoryTopics())
    lines: list[str] = []
    pushes.push(
        env.config,
        env.meta,
        RolloutRequest(store, {}, view=PlainView(lines.append), api=api),
        RECORDS_INPUT,
        "key",
        "value",
    )
    assert lines == [
        f"triggered venice_push__{store} run {RUN}",
        "queued behind run run-2; following it when it starts",
        f"run {RUN} started",
        "  start_of_push_job: success",
    ]


def test_no_queue_refuses_in_one_line_and_triggers_nothing(
    env: PlatformEnv, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = ScriptedAirflow([("success", [])], in_flight=["run-1"])
    monkeypatch.setattr(pushes, "AirflowApi", lambda _config: api)
    data = generate(tmp_path / "in", 10, files=1)
    result = env.cli("push", store, "--input", str(data), "--airflow", "--no-queue")
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr == (
        f"error: a rollout of '{store}' is in flight (run run-1); not queueing behind it (--no-queue)\n"
    )
    assert api.triggered == [] and result.stdout == ""
    with pytest.raises(RunInFlight):  # the same refusal where the push is called directly
        pushes.push(
            env.config, env.meta, RolloutRequest(store, {}, queue=False, api=api), RECORDS_INPUT, "key", "value"
        )


def test_what_an_operator_does_in_airflow_is_said_in_one_line(env: PlatformEnv, store: str) -> None:
    """A paused DAG is named before anything is triggered, and a followed run whose DAG is paused meanwhile says
    where it holds; a deleted run is said deleted; a run marked success by hand is not taken for a success."""
    api = ScriptedAirflow([("running", [])])
    api.paused = True
    with pytest.raises(DagPaused, match=rf"^the DAG venice_push__{store} is paused in Airflow: nothing was triggered"):
        pushes.push(env.config, env.meta, RolloutRequest(store, {}, api=api), RECORDS_INPUT, "key", "value")
    assert api.triggered == []
    api.paused = False
    follower = RunFollower(api, env.meta, store, RUN, PlainView(lambda _line: None))
    assert follower.poll() == "running"
    api.paused = True
    with pytest.raises(DagPaused, match=rf"paused in Airflow: run {RUN} holds until it is unpaused; unpause it"):
        follower.poll()
    api.paused, api.deleted = False, True
    with pytest.raises(RunDeleted) as deleted:
        follower.poll()
    assert str(deleted.value) == f"rollout run {RUN} was deleted in Airflow by an operator"
    api = ScriptedAirflow([("success", [])])  # marked success before it created a version
    with pytest.raises(RolloutFailed) as nothing_pushed:
        pushes.push(env.config, env.meta, RolloutRequest(store, {}, api=api), RECORDS_INPUT, "key", "value")
    assert str(nothing_pushed.value) == (
        f"rollout run {RUN} was marked success in Airflow before it created a version; nothing was pushed"
    )
    created = versions.create_version(env.meta, env.config, store, push_job_id(store, RUN), topics=InMemoryTopics())
    versions.stop_push(env.meta, store, created.number, ended_in_airflow(RUN, "marked success"))
    api = ScriptedAirflow([("success", [ti("dc_1.pre_swap", "success", 1, 2)])])
    with pytest.raises(RolloutFailed) as not_rolled_out:
        pushes.push(env.config, env.meta, RolloutRequest(store, {}, api=api), RECORDS_INPUT, "key", "value")
    assert str(not_rolled_out.value) == (
        f"rollout run {RUN} was marked success in Airflow by an operator before its rollout ended; version 1 is KILLED"
    )


def test_the_live_view_draws_steps_and_progress_in_a_terminal(env: PlatformEnv, store: str) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    view = LiveView(console)
    view.line("  spark_push: success")
    view.steps({"dc_0.pre_swap": "up_for_reschedule"}, 3)
    view.progress({"dc-0": versions.RegionProgress(250, 1000), "dc-1": versions.RegionProgress(0, None)})
    console.print(view._render())
    drawn = out.getvalue()
    assert "spark_push: success" in drawn
    assert "dc_0.pre_swap up for reschedule" in drawn and "3 steps skipped" in drawn
    assert "250 of 1,000 records (25%)" in drawn and "0 records" in drawn


def test_a_paused_dag_is_asked_about_at_most_every_few_seconds(
    env: PlatformEnv, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DAG's read costs the API server as much as the run's: polls in which no step moved ask it once per
    PAUSED_CHECK_SECONDS, and a pause is still said once that time has passed."""
    monkeypatch.setattr(run_following, "PAUSED_CHECK_SECONDS", 0.3)
    api = ScriptedAirflow([("running", [])])
    follower = RunFollower(api, env.meta, store, RUN, PlainView(lambda _line: None))
    for _ in range(5):
        assert follower.poll() == "running"
    assert api.paused_reads == 1
    api.paused = True
    assert follower.poll() == "running"  # within the spacing: not asked yet
    time.sleep(0.35)
    with pytest.raises(DagPaused):
        follower.poll()
    assert api.paused_reads == 2
