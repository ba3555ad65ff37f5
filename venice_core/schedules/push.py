"""A store's scheduled push: `venice store update --push-schedule CRON|daily --push-input TEMPLATE`.

- When: a `venice_core.schedules.runs.Schedule` (a cron or `daily`, only inside the working-hours calendar): the store's
  rollout DAG, `venice_push__<store>`, runs on the plugin's `BusinessHoursTimetable` instead of only when
  triggered.
- `input_template`: the input of a scheduled run, a Jinja template that Airflow renders with the run's context
  (`/data/users/{{ ds }}/`: `ds` is the run's logical date, as in any Airflow template;
  `venice_plugin.scheduled_push`). A template a store is given (`check_input_template`) is rendered once here with a
  sample of what a run provides, as Airflow renders it (StrictUndefined): a variable no run provides (a typo such
  as `{{ dss }}`) and a relative path are refused then, not when a scheduled run fails. A stored template is only
  parsed again when read (`check_template`), so one set before these checks stays readable.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any, ClassVar

from venice_core.errors import ConfigError
from venice_core.schedules.runs import Schedule

EXAMPLE = "'/data/users/{{ ds }}/'"


def check_template(template: str) -> str:
    """A push input template that parses as Jinja (as Airflow's template environment has it): ConfigError if not."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    text = template.strip()
    if not text:
        raise ConfigError(f"the push input template is empty: give the input path, e.g. {EXAMPLE}")
    try:
        SandboxedEnvironment(extensions=["jinja2.ext.do"]).parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"the push input template {template!r} is not valid Jinja: {exc.message}") from None
    return text


class _RunValue:
    """What a run provides but a sample cannot know (a Variable, a connection, the run's params, its task
    instance...): any attribute, key or call of it is one too, and it renders empty."""

    def __getattr__(self, name: str) -> _RunValue:
        if name.startswith("_") or name in ("unsafe_callable", "alters_data"):  # what the sandbox asks of a callable
            raise AttributeError(name)
        return self

    def __getitem__(self, _key: object) -> _RunValue:
        return self

    def __call__(self, *_args: object, **_kwargs: object) -> _RunValue:
        return self

    def __iter__(self) -> Any:
        return iter(())

    def __str__(self) -> str:
        return ""


def _ds_add(ds: str, days: int) -> str:
    return (datetime.strptime(ds, "%Y-%m-%d") + timedelta(days=days)).strftime("%Y-%m-%d")


def _ds_format(ds: str, input_format: str, output_format: str) -> str:
    return datetime.strptime(ds, input_format).strftime(output_format)


def sample_context() -> dict[str, Any]:
    """What a scheduled run's template is rendered with (Airflow's task context), with sample values: the dates
    and their strings for a run at 2026-01-05 09:00 UTC (pendulum's, as Airflow gives them, when it is
    installed), Airflow's `macros` (`ds_add`, `ds_format`, `datetime`, `timedelta`, ...), and what only a run knows
    as `_RunValue`s."""
    import json
    import random
    import time
    import uuid

    try:
        import pendulum

        logical_date: datetime = pendulum.datetime(2026, 1, 5, 9, tz="UTC")
    except ImportError:  # (Airflow brings it)
        from datetime import UTC

        logical_date = datetime(2026, 1, 5, 9, tzinfo=UTC)
    end = logical_date + timedelta(days=1)
    ds, ts = logical_date.strftime("%Y-%m-%d"), logical_date.isoformat()
    run = _RunValue()
    macros = SimpleNamespace(
        ds_add=_ds_add,
        ds_format=_ds_format,
        datetime=datetime,
        timedelta=timedelta,
        json=json,
        time=time,
        uuid=uuid,
        random=random.random,
        dateutil=run,
        datetime_diff_for_humans=run,
        ds_format_locale=run,
    )
    dated = {
        "logical_date": logical_date,
        "ds": ds,
        "ds_nodash": ds.replace("-", ""),
        "ts": ts,
        "ts_nodash": logical_date.strftime("%Y%m%dT%H%M%S"),
        "ts_nodash_with_tz": ts.replace("-", "").replace(":", ""),
        "data_interval_start": logical_date,
        "data_interval_end": end,
        "prev_data_interval_start_success": logical_date - timedelta(days=1),
        "prev_data_interval_end_success": logical_date,
        "prev_start_date_success": logical_date - timedelta(days=1),
        "prev_end_date_success": logical_date - timedelta(days=1),
        "partition_date": logical_date,
    }
    unknown = (
        "conn dag dag_run inlet_events inlets map_index_template outlet_events outlets params partition_key task "
        "task_instance task_instance_key_str task_reschedule_count task_state_store test_mode ti "
        "triggering_asset_events var"
    )
    return {
        **dated,
        "macros": macros,
        "run_id": f"scheduled__{ts}",
        **dict.fromkeys(unknown.split(), run),
    }


def _airflow_filters() -> dict[str, Any]:
    """Airflow's own template filters (`{{ logical_date | ds }}`)."""
    return {
        "ds": lambda d: d.strftime("%Y-%m-%d"),
        "ds_nodash": lambda d: d.strftime("%Y%m%d"),
        "ts": lambda d: d.isoformat(),
        "ts_nodash": lambda d: d.strftime("%Y%m%dT%H%M%S"),
        "ts_nodash_with_tz": lambda d: d.isoformat().replace("-", "").replace(":", ""),
    }


def check_input_template(template: str) -> str:
    """A push input template a store is given: valid Jinja (`check_template`), then rendered once with
    `sample_context` as Airflow renders it (StrictUndefined): ConfigError for a variable no run provides (with the
    nearest one it does: `{{ dss }}`), anything else it cannot be rendered with, or a relative path (a run's task
    runs elsewhere than the command that set it)."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    text = check_template(template)
    env = SandboxedEnvironment(extensions=["jinja2.ext.do"], undefined=jinja2.StrictUndefined)
    env.filters.update(_airflow_filters())
    context = sample_context()
    try:
        rendered = env.from_string(text).render(context).strip()
    except jinja2.UndefinedError as exc:
        said = (exc.message or "a variable is undefined").replace("'types.SimpleNamespace object'", "macros")
        name = re.fullmatch(r"'(\w+)' is undefined", said)
        near = difflib.get_close_matches(name.group(1), sorted(context), n=1) if name else []
        hint = (
            f"did you mean '{near[0]}'?"
            if near
            else "a run provides ds, ds_nodash, ts, logical_date, "
            + ("data_interval_start, data_interval_end, macros, ...")
        )
        raise ConfigError(
            f"the push input template {template!r} uses what an Airflow run does not provide: {said} ({hint})"
        ) from None
    except Exception as exc:  # noqa: BLE001 - whatever the template's own expressions raise
        raise ConfigError(f"the push input template {template!r} cannot be rendered for a run: {exc}") from None
    if rendered and not rendered.startswith("/") and "://" not in rendered:  # (`spark.inputs.input_files.is_remote`)
        raise ConfigError(
            f"the push input template {template!r} is a relative path (a run renders it like {rendered!r}): give "
            f"an absolute path or a URL, e.g. {EXAMPLE}"
        )
    return text


@dataclass(frozen=True)
class PushSchedule(Schedule):
    input_template: str = field(kw_only=True)

    KIND: ClassVar[str] = "push"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_template(self.input_template)
