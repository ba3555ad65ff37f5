"""Airflow DAGs of the streaming pipelines: one `venice_upgrade__<pipeline>` per pipeline (drain, then start the
new deployment), built from the pipelines in the metadata store when the file is parsed; the tasks are in
`venice_plugin.upgrade_dag`. A task process builds only the DAG it runs (Airflow's parsing context)."""

from __future__ import annotations

import logging

from airflow.sdk import get_parsing_context
from venice_plugin.platform_config import use_platform_config
from venice_plugin.upgrade_dag import build_upgrade_dag

from venice_core.config import load_config
from venice_core.controller.streams import list_pipelines
from venice_core.errors import VeniceError
from venice_core.meta import MetadataStore
from venice_core.rollout.names import UPGRADE_DAG_PREFIX, pipeline_of


def _pipelines(only: str | None) -> list[str]:
    meta = MetadataStore(load_config().metadata_db_url)
    try:
        names = [record.name for record in list_pipelines(meta)]
    except VeniceError as exc:  # not migrated yet: no DAGs until `venice up` has run
        logging.getLogger(__name__).warning("no stream upgrade DAGs: %s", exc)
        return []
    finally:
        meta.dispose()
    return [name for name in names if only is None or name == only]


use_platform_config()  # the platform's config for `airflow` run with AIRFLOW_HOME alone
_running = get_parsing_context().dag_id  # set in a task process: the DAG of the task it runs
if _running is None or _running.startswith(UPGRADE_DAG_PREFIX):
    for _name in _pipelines(None if _running is None else pipeline_of(_running)):
        _dag = build_upgrade_dag(_name)
        globals()[_dag.dag_id] = _dag
