"""The stores' DAG files (`venice_core.orchestration.airflow.store_dags`): a file per DAG, written only when the
DAG changes, removed with it, and parsed by Airflow's own DagBag into that one DAG."""

from __future__ import annotations

import ast
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from airflow.dag_processing.dagbag import DagBag

from tests.support.topics import InMemoryTopics
from venice_core.controller import stores
from venice_core.controller.store_description import StoreSettings
from venice_core.errors import ComponentError
from venice_core.orchestration.airflow import store_dags
from venice_core.protocol.compression import CompressionStrategy
from venice_core.rollout.store_dag_spec import RolloutDagSpec, doc_line, encode, fingerprint

KEY = '"string"'
VALUE = '{"type":"record","name":"V","fields":[{"name":"a","type":"int"}]}'


def _files(folder: Path) -> dict[str, float]:
    return {path.name: path.stat().st_mtime_ns for path in folder.glob("*.py")}


def test_each_dag_has_a_file_written_only_when_it_changes_and_removed_with_it(platform: Any) -> None:
    config, meta = platform
    names = [f"s{i}_{uuid.uuid4().hex[:6]}" for i in range(3)]
    for name in names:
        stores.create_store(meta, config, name, KEY, VALUE, partitions=1)
    folder = store_dags.folder(config)
    synced = store_dags.sync(config, meta)
    assert synced.stores == 3 and len(synced.changes.written) == 3 and synced.changes.removed == []
    assert set(_files(folder)) == {f"venice_push__{name}.py" for name in names}
    before = _files(folder)
    assert not store_dags.sync(config, meta).changes
    # A setting that shapes no DAG leaves the files as they are: there is nothing to parse again.
    stores.update_store(meta, config, names[0], versions_to_preserve=3)
    assert not store_dags.sync_store(config, meta, names[0]) and _files(folder) == before
    # Its rollout order does: that file is rewritten, and only that one.
    stores.update_store(meta, config, names[1], rollout_order=["dc-2", "dc-1", "dc-0"])
    assert store_dags.sync_store(config, meta, names[1]).written == [f"venice_push__{names[1]}.py"]
    after = _files(folder)
    assert [name for name in after if after[name] != before[name]] == [f"venice_push__{names[1]}.py"]
    assert '"rollout_order": ["dc-2", "dc-1", "dc-0"]' in (folder / f"venice_push__{names[1]}.py").read_text()
    # A repush schedule is a DAG of its own, in a file of its own, gone with the schedule.
    stores.update_store(meta, config, names[1], repush_schedule="daily", repush_ttl_seconds="86400")
    assert store_dags.sync_store(config, meta, names[1]).written == [f"venice_repush__{names[1]}.py"]
    stores.update_store(meta, config, names[1], repush=False)
    assert store_dags.sync_store(config, meta, names[1]).removed == [f"venice_repush__{names[1]}.py"]
    # Deleted: its files go; those of a store that is no more (deleted while no file could be written) too, at the
    # next sync, which keeps any other file of the folder.
    stores.delete_store(meta, config, names[2], topics=InMemoryTopics())
    assert store_dags.sync_store(config, meta, names[2]).removed == [f"venice_push__{names[2]}.py"]
    (folder / "venice_push__ghost.py").write_text("# airflow dag")
    (folder / "notes.py").write_text("kept")
    synced = store_dags.sync(config, meta)
    assert synced.changes.removed == ["venice_push__ghost.py"] and not synced.changes.written
    assert set(_files(folder)) == {f"venice_push__{names[0]}.py", f"venice_push__{names[1]}.py", "notes.py"}


def test_airflow_parses_each_file_into_its_one_dag(platform: Any) -> None:
    config, meta = platform
    plain, scheduled = f"plain_{uuid.uuid4().hex[:6]}", f"sched_{uuid.uuid4().hex[:6]}"
    for name in (plain, scheduled):
        stores.create_store(meta, config, name, KEY, VALUE, partitions=1)
    stores.update_store(meta, config, scheduled, repush_schedule="daily", repush_ttl_seconds="86400")
    store_dags.sync(config, meta)
    folder = store_dags.folder(config)
    # Safe mode, as the dag-processor lists a bundle: a file without "airflow" and "dag" in it would be skipped.
    bag = DagBag(dag_folder=str(folder), safe_mode=True, bundle_path=folder, bundle_name="venice-stores")
    assert bag.import_errors == {}
    assert {dag_id: Path(dag.fileloc).name for dag_id, dag in bag.dags.items()} == {
        dag_id: f"{dag_id}.py"
        for dag_id in (f"venice_push__{plain}", f"venice_push__{scheduled}", f"venice_repush__{scheduled}")
    }
    rollout = bag.dags[f"venice_push__{scheduled}"]
    assert {task_id.split(".")[0] for task_id in rollout.task_ids if "." in task_id} == {"dc_0", "dc_1", "dc_2"}
    # Each DAG's doc names the text it was built from: what the platform waits for Airflow to serve.
    built_from = store_dags.current_rollout(config, meta, scheduled)
    assert rollout.doc_md.endswith(f"settings {built_from} (written by the platform at each store change).")


def test_a_store_name_is_data_in_its_file_never_code() -> None:
    """A store's name is validated before it is stored; even one that was not stays a string literal."""
    evil = "x'''\"\"\"\n__import__('os').system('touch /tmp/pwned') #"
    settings = StoreSettings(evil, 1, CompressionStrategy.NO_OP, ["dc-0"], False, 2, {})
    ((name, text),) = store_dags.dag_files(settings).items()
    assert name == f"venice_push__{evil}.py"
    module = ast.parse(text)
    assert [type(node).__name__ for node in module.body] == ["Expr", "ImportFrom", "Assign"]
    assert evil in (ast.get_docstring(module) or "")
    (call,) = [node for node in ast.walk(module) if isinstance(node, ast.Call)]
    assert ast.unparse(call.func) == "rollout_dag"
    (spec,) = call.args
    assert isinstance(spec, ast.Constant) and json.loads(spec.value)["store"] == evil


class _Airflow:
    """What `wait_until_parsed` asks of Airflow's API: a DAG's details, whose doc shows the fingerprint of the text
    it was built from once `parses` requests were made for its file (a request while its file is being parsed is
    dropped: the first ones here)."""

    def __init__(self, doc: str, parses: int) -> None:
        self.doc, self.parses, self.asked = doc, parses, 0

    def request_parse(self, dag_file: str, bundle: str) -> bool:
        assert bundle == "venice-stores"
        self.asked += 1
        return True

    def get(self, path: str) -> dict[str, Any]:
        return {"is_stale": False, "doc_md": self.doc if self.asked >= self.parses else "built from an old text"}


def test_a_change_is_waited_for_until_airflow_serves_the_new_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_dags, "ASK_AGAIN_SECONDS", 0.0)
    spec = RolloutDagSpec("users", ("dc-0",))
    text = encode(spec)
    airflow = _Airflow(doc_line(text), parses=3)
    store_dags.wait_until_parsed(airflow, {spec.dag_id: fingerprint(text)}, timeout=10)
    assert airflow.asked == 3
    never = _Airflow(doc_line(text), parses=10**9)
    with pytest.raises(ComponentError, match=r"did not parse the new files of venice_push__users in 1s"):
        store_dags.wait_until_parsed(never, {spec.dag_id: fingerprint(text)}, timeout=1)
