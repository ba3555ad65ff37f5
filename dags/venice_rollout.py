"""Airflow DAGs: one rollout DAG per store (`venice_push__<store>`), triggered by `venice push` or from the UI.

The store list is read from the metadata store when the file is parsed (that is what makes a DAG appear shortly
after `venice store create`); everything else happens in the tasks, in `venice_plugin.rollout`.
"""

from __future__ import annotations

import logging

from venice_plugin.rollout import build_rollout_dag

from venice_core.config import load_config
from venice_core.controller.stores import list_stores, store_settings
from venice_core.errors import VeniceError
from venice_core.meta import MetadataStore


def _stores() -> list[tuple[str, list[str]]]:
    config = load_config()
    meta = MetadataStore(config.metadata_db_url)
    try:
        return [(name, store_settings(meta, name).rollout_order) for name in list_stores(meta)]
    except VeniceError as exc:  # the metadata store not migrated yet: no DAGs until `venice up` has run
        logging.getLogger(__name__).warning("no rollout DAGs: %s", exc)
        return []
    finally:
        meta.dispose()


_config = load_config()
for _store, _order in _stores():
    _dag = build_rollout_dag(_store, _order, _config)
    globals()[_dag.dag_id] = _dag
