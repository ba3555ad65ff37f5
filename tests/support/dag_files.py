"""A DAG file parsed as Airflow parses it, without a scheduler: by the dag-processor, or by a task process that runs
one DAG (Airflow's parsing context)."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.definitions.context import _AIRFLOW_PARSING_CONTEXT_DAG_ID

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
