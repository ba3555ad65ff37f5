"""A store's DAGs, each built by its generated DAG file (`venice_core.orchestration.airflow.store_dags`) from the
spec the file holds (`venice_core.rollout.store_dag_spec`): the rollout DAG (`venice_push__<store>`, triggered by
`venice push`, `venice repush` or from the UI, and run on the store's working hours when it sets
`--push-schedule`) and the scheduled repush DAG (`venice_repush__<store>`, for a store that sets
`--repush-schedule`). A parse reads nothing else of the store; a task process parses its DAG's file too, to run
one task, and builds that one DAG. The DAG's doc ends with the spec's fingerprint: what the platform reads back
to know that Airflow has this text."""

from __future__ import annotations

import json

from airflow.sdk import DAG

from venice_core.config import load_config
from venice_core.rollout.store_dag_spec import RepushDagSpec, RolloutDagSpec, doc_line
from venice_plugin.platform_config import use_platform_config


def _signed(dag: DAG, text: str) -> DAG:
    dag.doc_md = f"{dag.doc_md}\n\n{doc_line(text)}" if dag.doc_md else doc_line(text)
    return dag


def rollout_dag(text: str) -> DAG:
    """The rollout DAG of the store `text` (a `RolloutDagSpec`) describes."""
    from venice_plugin.rollout_dag import build_rollout_dag  # imported already where the plugin is loaded

    spec = RolloutDagSpec.of(json.loads(text))
    use_platform_config()  # the platform's config for `airflow` run with AIRFLOW_HOME alone
    return _signed(build_rollout_dag(spec.store, list(spec.rollout_order), load_config(), spec.push), text)


def repush_dag(text: str) -> DAG:
    """The scheduled repush DAG of the store `text` (a `RepushDagSpec`) describes."""
    from venice_plugin.repush_dag import build_repush_dag  # only where a store has a schedule: a costly import

    spec = RepushDagSpec.of(json.loads(text))
    use_platform_config()  # its tasks read the platform's metadata store
    return _signed(build_repush_dag(spec.store, spec.repush), text)
