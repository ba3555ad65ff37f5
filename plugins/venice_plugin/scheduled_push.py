"""A scheduled push's input (`venice store update --push-schedule --push-input`, `venice_core.schedules.push`).

A scheduled run of a store's rollout DAG has no input in its params: its steps push the store's template rendered
by Airflow with the run's context (`{{ ds }}`, `{{ logical_date }}`, `{{ data_interval_start }}`, macros: what
they mean in any Airflow template). A run triggered without an input pushes the template too; one triggered with
an input (`venice push`, the UI's form) pushes that, and a repush (`source=kafka`) its own version topic. The
template is read from the metadata store by the run's first step, which pins what it rendered for the later steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jinja2

from venice_core.controller import repush_config, stores
from venice_core.errors import ConfigError
from venice_core.meta.context import metadata
from venice_core.rollout.names import run_confs
from venice_core.rollout.steps import STEPS

SCHEDULED = "scheduled"  # Airflow's DagRunType.SCHEDULED


def is_scheduled(context: Mapping[str, Any]) -> bool:
    return getattr(context.get("dag_run"), "run_type", None) == SCHEDULED


def run_input(store: str, context: Mapping[str, Any]) -> str:
    """The input the run pushes: its params' (a triggered run's), else the store's template rendered for the run.
    ConfigError (final: the run fails at its first step, without retries) when it cannot be rendered. Resolved
    once, by the run's first step (whose XCom the later steps read), so a template edited or a schedule turned off
    meanwhile leaves the push in flight alone."""
    params = context["params"]
    given = str(params.get("input") or "")
    if repush_config.is_repush(run_confs(params)) or (given and not is_scheduled(context)):
        return given  # a repush reads its own version topic; a triggered push, the input it was given
    pinned = context["ti"].xcom_pull(task_ids=STEPS[0].name)  # asked only of runs that push the template
    if pinned is not None:
        return str(pinned)
    with metadata() as (_, meta):
        schedule = stores.store_settings(meta, store).push
    if schedule is None:
        if is_scheduled(context):
            raise ConfigError(f"store '{store}' has no scheduled push any more: run {context['run_id']} has no input")
        return given  # none: the push says it needs its input files
    template = schedule.input_template
    try:
        rendered = str(context["task"].render_template(template, context)).strip()
    except jinja2.TemplateError as exc:
        raise ConfigError(
            f"cannot render the push input template {template!r} of '{store}' for run {context['run_id']}: {exc}"
        ) from None
    if not rendered:
        raise ConfigError(f"the push input template {template!r} of '{store}' renders empty (run {context['run_id']})")
    return rendered
