"""Airflow DAGs: one rollout DAG per store (`venice_push__<store>`), triggered by `venice push`, `venice repush` or
from the UI (and run on the store's working hours when it sets `--push-schedule`), and a scheduled repush DAG
(`venice_repush__<store>`) for each store that sets `--repush-schedule`.

The store list is read from the metadata store when the file is parsed (that is what makes a DAG appear shortly
after `venice store create`); everything else happens in the tasks, in `venice_plugin.rollout` and
`venice_plugin.repush_dag`. A task process parses this file too, to run one task: Airflow's parsing context names
its DAG, and only that DAG is built (a rollout DAG has about 80 tasks: building every store's would cost every task
start time that grows with the stores).
"""

from __future__ import annotations

import logging

from airflow.sdk import get_parsing_context
from venice_plugin.platform_config import use_platform_config
from venice_plugin.rollout import build_rollout_dag

from venice_core.config import load_config
from venice_core.controller.store_description import StoreSettings
from venice_core.controller.stores import list_stores, store_settings
from venice_core.errors import VeniceError
from venice_core.meta import MetadataStore
from venice_core.rollout.names import REPUSH_DAG_PREFIX, ROLLOUT_DAG_PREFIX, store_of


def _stores(only: str | None) -> list[StoreSettings]:
    config = load_config()
    meta = MetadataStore(config.metadata_db_url)
    try:
        names = [only] if only is not None else list_stores(meta)
        return [store_settings(meta, name) for name in names]
    except VeniceError as exc:  # not migrated yet (no DAGs until `venice up` has run), or the store is gone
        logging.getLogger(__name__).warning("no rollout DAGs: %s", exc)
        return []
    finally:
        meta.dispose()


use_platform_config()  # the platform's config for `airflow` run with AIRFLOW_HOME alone
_running = get_parsing_context().dag_id  # set in a task process: the DAG of the task it runs
_config = load_config()
_rollouts, _repushes = True, True
if _running is None:
    _wanted = _stores(None)
elif _running.startswith(ROLLOUT_DAG_PREFIX):
    _wanted, _repushes = _stores(store_of(_running)), False
elif _running.startswith(REPUSH_DAG_PREFIX):
    _wanted, _rollouts = _stores(_running.removeprefix(REPUSH_DAG_PREFIX)), False
else:  # another DAG of the folder
    _wanted = []
for _settings in _wanted:
    if _rollouts:
        _dag = build_rollout_dag(_settings.name, _settings.rollout_order, _config, _settings.push)
        globals()[_dag.dag_id] = _dag
    if _repushes and _settings.repush is not None:
        from venice_plugin.repush_dag import build_repush_dag  # only where a store has a schedule: a costly import

        _dag = build_repush_dag(_settings.name, _settings.repush)
        globals()[_dag.dag_id] = _dag
