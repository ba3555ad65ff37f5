"""The pipelines' upgrade DAGs without a running Airflow: the DAG file parsed against a metadata store of the
test's own (one `venice_upgrade__<pipeline>` per pipeline; a task process builds only its own), the tasks and their
order (drain, wait until stopped cleanly, branch: start the new run and wait until it consumes, or alert), and the
branch's choice (a failed drain alerts and starts nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from venice_plugin.upgrade_dag import ALERT, DRAINED, START, next_after_drain

from tests.support.dag_files import parse_dag_file
from venice_core.config import ClusterConfig
from venice_core.controller import streams
from venice_core.meta import MetadataStore

DAG_FILE = Path(__file__).parents[2] / "dags" / "venice_streams.py"


def _parse(monkeypatch: pytest.MonkeyPatch, running: str | None = None) -> dict[str, Any]:
    return parse_dag_file(monkeypatch, DAG_FILE, ("venice_upgrade__",), running)


def test_one_upgrade_dag_per_pipeline_drain_then_start_or_alert(
    platform: tuple[ClusterConfig, MetadataStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, meta = platform
    assert _parse(monkeypatch) == {}
    for name in ("clicks", "views"):
        streams.new_run(meta, name, "s", "dc-0", "events", {})
    dags = _parse(monkeypatch)
    assert sorted(dags) == ["venice_upgrade__clicks", "venice_upgrade__views"]
    assert sorted(_parse(monkeypatch, running="venice_upgrade__views")) == ["venice_upgrade__views"]
    assert _parse(monkeypatch, running="venice_push__views") == {}
    dag = dags["venice_upgrade__clicks"]
    downstream = {t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks}
    assert downstream == {
        "drain": ["wait_drained"],
        "wait_drained": ["alert", "drain_outcome"],
        "drain_outcome": ["alert", "drained", "start_new_run"],
        "start_new_run": ["wait_consuming"],
        "wait_consuming": [],
        "drained": [],
        "alert": [],
    }
    assert set(dag.params) == {"upgrade", "args", "drain_timeout_seconds"}
    assert next_after_drain("drained", upgrade=True) == START
    assert next_after_drain("drained", upgrade=False) == DRAINED
    assert next_after_drain("failed: drain timed out after 5s", upgrade=True) == ALERT
