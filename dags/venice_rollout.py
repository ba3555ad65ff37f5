"""Airflow DAGs: one rollout DAG per store (`venice_push__<store>`), triggered by `venice push` or from the UI.

The store list is read from the metadata store when the file is parsed (that is what makes a DAG appear shortly
after `venice store create`); everything else happens in the tasks, in `venice_plugin.rollout`. A task process
parses this file too, to run one task: Airflow's parsing context names its DAG, and only that store's DAG is built
(each has about 80 tasks: building every store's would cost every task start time that grows with the stores).
"""

from __future__ import annotations

import logging

from airflow.sdk import get_parsing_context
from venice_plugin.rollout import build_rollout_dag

from venice_core.config import load_config
from venice_core.controller.stores import list_stores, store_settings
from venice_core.errors import VeniceError
from venice_core.jobs.airflow_push import DAG_PREFIX, store_of
from venice_core.meta import MetadataStore


def _stores(only: str | None) -> list[tuple[str, list[str]]]:
    config = load_config()
    meta = MetadataStore(config.metadata_db_url)
    try:
        names = [only] if only is not None else list_stores(meta)
        return [(name, store_settings(meta, name).rollout_order) for name in names]
    except VeniceError as exc:  # not migrated yet (no DAGs until `venice up` has run), or the store is gone
        logging.getLogger(__name__).warning("no rollout DAGs: %s", exc)
        return []
    finally:
        meta.dispose()


_running = get_parsing_context().dag_id  # set in a task process: the DAG of the task it runs
_config = load_config()
if _running is None:
    _wanted = _stores(None)
elif _running.startswith(DAG_PREFIX):
    _wanted = _stores(store_of(_running))
else:  # another DAG of the folder
    _wanted = []
for _store, _order in _wanted:
    _dag = build_rollout_dag(_store, _order, _config)
    globals()[_dag.dag_id] = _dag
