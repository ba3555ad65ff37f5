"""A store's scheduled push, without a running Airflow: the store's DAG file written and parsed against a metadata
store of the test's own (the rollout DAG on the BusinessHoursTimetable of the store's `--push-schedule`,
unscheduled without one), and the run's input as the steps build it, from a template context Airflow's own task
runner builds for a run of a given type and logical date (`RuntimeTaskInstance.get_template_context`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG
from airflow.sdk.api.datamodels._generated import DagRun, TIRunContext
from airflow.sdk.exceptions import AirflowFailException
from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
from airflow.timetables.base import DataInterval, TimeRestriction
from venice_plugin.rollout_dag.task_inputs import request as _request
from venice_plugin.timetables import BusinessHoursTimetable

from scripts.generate_dataset import generate
from tests.support.dag_files import parse_store_dags
from venice_core.controller import stores
from venice_core.errors import ConfigError
from venice_core.hooks.records import invocations
from venice_core.rollout.names import push_job_id
from venice_core.rollout.steps import PushRequest
from venice_core.schedules.calendar import CalendarUpdate
from venice_core.schedules.push import PushSchedule

KEY = '"string"'
VALUE = '{"type":"record","name":"V","fields":[{"name":"a","type":"int"}]}'
MONDAY_10 = datetime(2026, 11, 23, 10, tzinfo=UTC)


def _store(platform: Any, prefix: str, template: str | None = None) -> str:
    config, meta = platform
    store = f"{prefix}_{uuid.uuid4().hex[:6]}"
    stores.create_store(meta, config, store, KEY, VALUE, partitions=1)
    if template is not None:
        stores.update_store(meta, config, store, push_schedule="daily", push_input=template)
    return store


def _dag(monkeypatch: pytest.MonkeyPatch, platform: Any, store: str) -> DAG:
    """The store's rollout DAG, as a task process of it builds it."""
    return parse_store_dags(monkeypatch, platform, store)[f"venice_push__{store}"]


class _NoXComYet:
    """The run's task instance before any step has pushed an XCom (a task process asks the supervisor for them);
    what the step pushes is kept in `pushed`."""

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_pull(self, **_: Any) -> None:
        return None

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def _context(dag: DAG, run_type: str, logical_date: datetime | None, conf: dict | None = None) -> dict[str, Any]:
    """The template context Airflow gives the DAG's first step in a run of `run_type` at `logical_date` (None: a
    run triggered without one, as `venice push` triggers). One per DAG built: it sets the task's params from the
    run's conf, as in the task process of one run."""
    task = dag.get_task("start_of_push_job")
    run_after = logical_date or MONDAY_10
    run_id = f"{run_type}__{run_after.isoformat()}"
    run = DagRun(
        dag_id=dag.dag_id,
        run_id=run_id,
        logical_date=logical_date,
        data_interval_start=logical_date,
        data_interval_end=logical_date,
        run_after=run_after,
        start_date=run_after,
        end_date=None,
        run_type=run_type,
        state="running",
        consumed_asset_events=[],
        partition_key=None,
        conf=conf,
    )
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(),
        task_id=task.task_id,
        dag_id=dag.dag_id,
        run_id=run_id,
        try_number=1,
        dag_version_id=uuid.uuid4(),
        map_index=-1,
        task=task,
        start_date=run_after,
        max_tries=0,
    )
    ti._ti_context_from_server = TIRunContext(dag_run=run, max_tries=0)
    return {**ti.get_template_context(), "ti": _NoXComYet()}


def test_the_rollout_dag_runs_on_the_working_hours_of_the_store_push_schedule(
    platform: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, meta = platform
    store = _store(platform, "sched")
    assert not _dag(monkeypatch, platform, store).timetable.can_be_scheduled  # triggered only, as before
    calendar = CalendarUpdate("mon-thu", "8-12", "Europe/Paris", ("2026-12-24",))
    stores.update_store(
        meta, config, store, push_schedule="30 9 * * *", push_input="/data/{{ ds }}/", push_calendar=calendar
    )
    timetable = _dag(monkeypatch, platform, store).timetable
    assert isinstance(timetable, BusinessHoursTimetable)
    assert timetable.serialize() == {
        "days": "mon-thu",
        "hours": "8-12",
        "timezone": "Europe/Paris",
        "holidays": ["2026-12-24"],
        "interval_minutes": 60,
        "cron": "30 9 * * *",
    }
    assert timetable.summary == "cron 30 9 * * *, within 8-12 h on mon-thu (Europe/Paris), 1 holiday"
    stores.update_store(meta, config, store, push_schedule="daily")
    daily = _dag(monkeypatch, platform, store).timetable
    assert daily.summary == "daily at opening, within 8-12 h on mon-thu (Europe/Paris), 1 holiday"
    # The scheduled push makes no repush DAG; turned off, the rollout DAG is triggered only again.
    assert set(parse_store_dags(monkeypatch, platform, store)) == {f"venice_push__{store}"}
    stores.update_store(meta, config, store, push=False)
    assert not _dag(monkeypatch, platform, store).timetable.can_be_scheduled


def test_a_whole_day_every_day_calendar_runs_every_minute_across_midnight() -> None:
    schedule = PushSchedule("* * * * *", "mon-sun", "0-24", input_template="/data/{{ ds }}/")
    timetable = BusinessHoursTimetable.of(schedule)
    assert timetable.summary == "cron * * * * *, within 0-24 h on mon-sun (UTC)"
    restriction = TimeRestriction(earliest=pendulum.datetime(2026, 1, 1, tz="UTC"), latest=None, catchup=True)
    sunday = pendulum.datetime(2026, 11, 29, 23, 58, tz="UTC")
    runs = []
    last = DataInterval.exact(sunday)
    for _ in range(3):
        info = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)
        assert info is not None
        runs.append(info.logical_date)
        last = info.data_interval
    assert runs == [sunday + timedelta(minutes=m) for m in (1, 2, 3)]  # Sunday 23:59, Monday 00:00, 00:01


def test_a_run_pushes_the_template_rendered_for_its_logical_date_or_the_input_it_was_given(
    platform: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config, meta = platform
    template = str(tmp_path / "users" / "{{ ds }}") + "/{{ macros.ds_add(ds, -1) }}-{{ logical_date.hour }}/"
    store = _store(platform, "render", template)

    def request(run_type: str, logical_date: datetime | None, conf: dict | None = None) -> PushRequest:
        return _request(store, _context(_dag(monkeypatch, platform, store), run_type, logical_date, conf))

    rendered = f"{tmp_path}/users/2026-11-23/2026-11-22-10/"
    assert request("scheduled", MONDAY_10).input_path == rendered
    # A triggered run keeps its input; one triggered without an input pushes the template.
    given = request("manual", MONDAY_10, {"input": "/given/input", "key_field": "id", "value_field": "profile"})
    assert (given.input_path, given.key_field, given.value_field) == ("/given/input", "id", "profile")
    assert request("manual", MONDAY_10).input_path == rendered
    assert request("manual", None, {"source": "kafka"}).input_path == ""  # a repush from the form: its topic
    # Without a logical date there is no `ds`, as in any Airflow template: the run fails with why.
    with pytest.raises(ConfigError, match=r"cannot render the push input template .* 'ds' is undefined"):
        request("manual", None)
    stores.update_store(meta, config, store, push=False)
    with pytest.raises(ConfigError, match=f"store '{store}' has no scheduled push any more"):
        request("scheduled", MONDAY_10)


def test_a_run_whose_form_conf_holds_a_key_the_platform_sets_fails_at_its_first_step(
    platform: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The trigger form's `conf` is a user's: a key the platform sets itself there (a repush's pinned end offsets)
    fails the run's first step. `source.kafka=true` is a user's (seed 003's repush switch): the run is a repush, as
    with the DAG's own `source=kafka` param."""
    store = _store(platform, "form")
    dag = _dag(monkeypatch, platform, store)
    first_step = dag.get_task("start_of_push_job")
    conf = {"input": str(tmp_path / "in"), "conf": {"source.kafka": "true", "kafka.input.end.offsets": "{}"}}
    context = _context(dag, "manual", MONDAY_10, conf)
    with pytest.raises(AirflowFailException, match=r"^conf 'kafka.input.end.offsets' is set by the platform, not"):
        first_step.python_callable(**context)
    assert context["ti"].pushed["failure"].startswith("conf 'kafka.input.end.offsets' is set by the platform")
    for params in ({"source": "kafka"}, {"conf": {"source.kafka": "true"}}):
        repush = _request(store, _context(_dag(monkeypatch, platform, store), "manual", MONDAY_10, params))
        assert repush.confs == {"source.kafka": "true"}
    both = {"input": str(tmp_path / "in"), "conf": {"source.kafka": "true"}}  # a push's input and a repush's switch
    with pytest.raises(ConfigError, match=r"^the form's input is for a push: a repush .* leave the input empty$"):
        _request(store, _context(_dag(monkeypatch, platform, store), "manual", MONDAY_10, both))


def test_a_scheduled_run_whose_input_is_missing_fails_at_its_first_step_without_a_version(
    platform: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, meta = platform
    store = _store(platform, "missing", str(tmp_path / "users" / "{{ ds }}") + "/")
    dag = _dag(monkeypatch, platform, store)
    first_step, context = dag.get_task("start_of_push_job"), _context(dag, "scheduled", MONDAY_10)
    missing = tmp_path / "users" / "2026-11-23"
    with pytest.raises(AirflowFailException, match=f"^input path {missing}/ does not exist$"):  # final: no retry
        first_step.python_callable(**context)
    # Why, kept where `venice rollout status` and `venice push` read it (no version exists to say it).
    assert context["ti"].pushed == {"failure": f"input path {missing}/ does not exist"}
    assert stores.describe_store(meta, store).versions == ()
    assert invocations(meta, push_job_id(store, context["run_id"])) == []  # no hook was asked
    generate(missing, 10, files=1)  # the day's dataset lands: the next run's first step goes on
    first_step.python_callable(**context)
    assert stores.describe_store(meta, store).versions == ()
