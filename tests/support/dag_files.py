"""A DAG file parsed as Airflow parses it, without a scheduler: by the dag-processor, or by a task process that runs
one DAG (Airflow's parsing context)."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.definitions.context import _AIRFLOW_PARSING_CONTEXT_DAG_ID

from venice_core.config import ClusterConfig
from venice_core.meta import MetadataStore
from venice_core.orchestration.airflow import store_dags
from venice_core.rollout.names import repush_dag_id, rollout_dag_id

DAGS = Path(__file__).parents[2] / "dags"


def parse_dag_file(
    monkeypatch: pytest.MonkeyPatch, file: Path, prefixes: tuple[str, ...], running: str | None = None
) -> dict[str, Any]:
    """The file's DAGs whose names start with one of `prefixes` (as a task process running `running` sees them)."""
    if running is not None:
        monkeypatch.setenv(_AIRFLOW_PARSING_CONTEXT_DAG_ID, running)
    try:
        found = runpy.run_path(str(file))
    finally:
        monkeypatch.delenv(_AIRFLOW_PARSING_CONTEXT_DAG_ID, raising=False)
    return {name: value for name, value in found.items() if name.startswith(prefixes)}


def parse_store_dags(
    monkeypatch: pytest.MonkeyPatch, platform: tuple[ClusterConfig, MetadataStore], *names: str
) -> dict[str, Any]:
    """The DAGs of the stores `names`, each from its own file as the platform writes it (`store_dags.sync_store`,
    as `venice store create` and `update` do), parsed as the dag-processor (or a task process of that DAG) does;
    a store that is gone has no file, so no DAG."""
    config, meta = platform
    dags: dict[str, Any] = {}
    for name in names:
        store_dags.sync_store(config, meta, name)
        for dag_id in (rollout_dag_id(name), repush_dag_id(name)):
            path = store_dags.folder(config) / store_dags.file_name(dag_id)
            if path.exists():
                dag = parse_dag_file(monkeypatch, path, ("dag",))["dag"]
                assert dag.dag_id == dag_id  # a file, its one DAG
                dags[dag_id] = dag
    return dags
