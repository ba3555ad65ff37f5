"""A store's scheduled push: `venice store update --push-schedule CRON|daily --push-input TEMPLATE`.

- When: a `venice_core.schedule.Schedule` (a cron or `daily`, only inside the working-hours calendar): the store's
  rollout DAG, `venice_push__<store>`, runs on the plugin's `BusinessHoursTimetable` instead of only when
  triggered.
- `input_template`: the input of a scheduled run, a Jinja template that Airflow renders with the run's context
  (`/data/users/{{ ds }}/`: `ds` is the run's logical date, as in any Airflow template;
  `venice_plugin.scheduled_push`). Checked here as Jinja only: a variable Airflow does not know fails the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from venice_core.errors import ConfigError
from venice_core.schedule import Schedule


def check_template(template: str) -> str:
    """A push input template that parses as Jinja (as Airflow's template environment has it): ConfigError if not."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    text = template.strip()
    if not text:
        raise ConfigError("the push input template is empty: give the input path, e.g. '/data/users/{{ ds }}/'")
    try:
        SandboxedEnvironment(extensions=["jinja2.ext.do"]).parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"the push input template {template!r} is not valid Jinja: {exc.message}") from None
    return text


@dataclass(frozen=True)
class PushSchedule(Schedule):
    input_template: str = field(kw_only=True)

    KIND: ClassVar[str] = "push"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_template(self.input_template)
