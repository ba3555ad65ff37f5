"""`venice stream drain` and `venice stream upgrade` through Airflow: trigger the pipeline's
`venice_upgrade__<pipeline>` DAG run (`venice_plugin.upgrade_dag`) and follow it until it ends. What the run would
refuse is refused here first, before Airflow is asked anything."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from venice_core.config import ClusterConfig
from venice_core.controller import streams
from venice_core.deployment import airflow as deployment
from venice_core.embedded import airflow
from venice_core.errors import ComponentError, ConfigError, DrainFailed
from venice_core.meta import MetadataStore
from venice_core.orchestration.airflow.api import AirflowApi
from venice_core.orchestration.airflow.run_following import PlainView, RunFollower, trigger_and_follow, wait_for_dag
from venice_core.rollout.names import upgrade_dag_id
from venice_core.streams import control, upgrade

STREAMS_DAG_FILE = "venice_streams.py"  # in dags/: every stream pipeline's upgrade DAG


def drain_or_upgrade(
    config: ClusterConfig,
    meta: MetadataStore,
    name: str,
    timeout_seconds: float | None = None,
    upgrade_args: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] = print,
    api: AirflowApi | None = None,
    wait_seconds: float = 1800.0,
) -> str:
    """Drain the pipeline (and, with `upgrade_args`, start its new deployment) through its DAG; the drained run's
    id, or the new run's. DrainFailed with the pipeline's cause if the run fails."""
    status = control.pipeline_status(config, meta, name)
    if status.state not in streams.ACTIVE:
        raise ConfigError(f"stream pipeline '{name}' is not running ({status.state}): nothing to drain")
    if upgrade_args is not None:
        upgrade.upgraded_request(meta, config, name, upgrade_args)  # an argument an upgrade cannot set
    if timeout_seconds is not None and timeout_seconds <= 0:
        raise ConfigError("the drain timeout must be positive")
    view = PlainView(progress)
    api = api or AirflowApi(config)
    dag = upgrade_dag_id(name)
    wait_for_dag(
        dag,
        functools.partial(api.has_dag, dag),
        functools.partial(_parse_pipelines_file, config, api),
        view,
        "is the pipeline new?",
    )
    params = {
        "upgrade": upgrade_args is not None,
        "args": dict(upgrade_args or {}),
        "drain_timeout_seconds": timeout_seconds,
    }

    def failed(follower: RunFollower) -> DrainFailed:
        record = streams.get_pipeline(meta, name)
        cause = f"{record.state}: {record.last_error}" if record.last_error else record.state
        where = ", ".join(follower.failed_tasks()) or "a task"
        return DrainFailed(f"{dag} run failed at {where}; pipeline {name} is {cause}")

    trigger_and_follow(
        api,
        meta,
        status.record.store,
        dag,
        params,
        view,
        wait_seconds,
        failed=failed,
        timed_out=lambda run_id: DrainFailed(f"{dag} run {run_id} did not finish within {wait_seconds:.0f}s"),
    )
    return streams.get_pipeline(meta, name).run_id


def _parse_pipelines_file(config: ClusterConfig, api: AirflowApi) -> None:
    """The pipelines' DAG file parsed now: asked for, or, while Airflow knows no DAG of it yet (the first pipeline),
    its modification time renewed, which the dag-processor of dags/ watches (at its next loop)."""
    if not api.request_parse(STREAMS_DAG_FILE):
        with contextlib.suppress(OSError):  # a read-only dags folder: the periodic parse picks it up
            os.utime(Path(deployment.config_value(deployment.home(config), "core", "dags_folder")) / STREAMS_DAG_FILE)


def reparse_stream_dags(config: ClusterConfig) -> None:
    """After a pipeline starts (a new one has no upgrade DAG yet): the pipelines' DAG file parsed within seconds,
    not at the dag-processor's periodic parse. Nothing when Airflow is off or not running here (it parses every
    file at its start), nor when it does not answer (a drain or an upgrade asks again)."""
    if not config.airflow.enabled or not airflow.pids(config):
        return
    with contextlib.suppress(ComponentError):
        _parse_pipelines_file(config, AirflowApi(config))
