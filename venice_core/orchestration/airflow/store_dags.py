"""The stores' DAG files: one small generated file per DAG of a store (`venice_push__<store>.py`, and
`venice_repush__<store>.py` for a store with a scheduled repush) in a DAG bundle of the platform's own
(`<airflow home>/store_dags/`, parsed by a dag-processor of its own: `airflow.STORE_DAG_PROCESSOR`).

Why a file per DAG (ARCHITECTURE.md, "Thousands of stores"): a store created, changed or deleted then costs one
DAG's parse, an unchanged store none, and no parse ever holds more than one DAG; a DAG exists exactly while its
file does (Airflow deactivates the DAGs of a file that is gone at its next look at the bundle).

A file holds what its DAG is built from (the store's name, rollout order and schedule) as a JSON string literal,
read by `venice_plugin.store_dags`: data, whatever a store holds. It is written only when its text changes, and
atomically (the dag-processor reads the old text or the new). The store dag-processor watches no file: after a
change, the platform asks Airflow to parse each rewritten file (`ask_to_parse`); a new file is found at its next
look at the folder (every 10 s), and the DAG of a file that is gone is deactivated then."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from venice_core.cache import staging
from venice_core.config import ClusterConfig
from venice_core.controller.store_description import StoreSettings
from venice_core.controller.stores import all_store_settings, store_settings
from venice_core.embedded import airflow
from venice_core.errors import StoreNotFound
from venice_core.meta import MetadataStore
from venice_core.orchestration.airflow.api import AirflowApi
from venice_core.rollout.names import REPUSH_DAG_PREFIX, ROLLOUT_DAG_PREFIX, repush_dag_id, rollout_dag_id

SUFFIX = ".py"
HEADER = "written by the platform (venice_core/orchestration/airflow/store_dags.py); an edit here is lost"


def folder(config: ClusterConfig) -> Path:
    """The bundle's folder, in the Airflow home."""
    return airflow.stores_folder(config)


def file_name(dag_id: str) -> str:
    """A DAG's file, relative to the bundle: named by the DAG."""
    return f"{dag_id}{SUFFIX}"


def _source(dag_id: str, builder: str, spec: dict[str, object]) -> str:
    """A DAG file calling `venice_plugin.store_dags.<builder>` with `spec`. Every text from the store in it is a
    Python literal made by `repr`. Airflow looks for "airflow" and "dag" in a file before it parses it."""
    doc = f"The Airflow DAG {dag_id}: {HEADER}."
    text = json.dumps(spec, sort_keys=True)
    return f"{doc!r}\n\nfrom venice_plugin.store_dags import {builder}\n\ndag = {builder}({text!r})\n"


def dag_files(settings: StoreSettings) -> dict[str, str]:
    """The store's DAG files, by name: its rollout DAG's, and its scheduled repush DAG's when it has one."""
    rollout = rollout_dag_id(settings.name)
    files = {
        file_name(rollout): _source(
            rollout,
            "rollout_dag",
            {
                "store": settings.name,
                "rollout_order": list(settings.rollout_order),
                "push": None if settings.push is None else settings.push.to_json(),
            },
        )
    }
    if settings.repush is not None:
        repush = repush_dag_id(settings.name)
        files[file_name(repush)] = _source(
            repush, "repush_dag", {"store": settings.name, "repush": settings.repush.to_json()}
        )
    return files


# A rewritten file whose text before was written this recently may be in a parse now: of the text before (its
# first, when the folder's listing found it, or one asked for). The dag-processor drops a request for a file in a
# parse, and a DAG it does not know yet cannot be asked for: such a file is asked for again a moment later.
RECENT_SECONDS = 15.0
ASK_AGAIN_AFTER_SECONDS = 2.0


@dataclass
class Changes:
    """The files a sync wrote (`new`, `rewritten`: `recent` ones among them) and removed."""

    new: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)
    recent: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def written(self) -> list[str]:
        return self.new + self.rewritten

    def __bool__(self) -> bool:
        return bool(self.written or self.removed)


def _write(path: Path, text: str, changes: Changes) -> None:
    """The file with `text`, written atomically unless it holds it already; recorded in `changes`."""
    try:
        if path.read_text() == text:
            return
        before: float | None = path.stat().st_mtime
    except OSError:  # no file yet
        before = None
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = staging(path)  # not a .py name: the dag-processor never reads a half-written file
    partial.write_text(text)
    os.replace(partial, path)
    if before is None:
        changes.new.append(path.name)
        return
    changes.rewritten.append(path.name)
    if time.time() - before < RECENT_SECONDS:
        changes.recent.append(path.name)


def _store_files(config: ClusterConfig, store: str) -> list[Path]:
    """The files there are of the store's DAGs."""
    return [
        path
        for path in (folder(config) / file_name(dag_id(store)) for dag_id in (rollout_dag_id, repush_dag_id))
        if path.exists()
    ]


def _apply(config: ClusterConfig, wanted: dict[str, str], present: list[Path], changes: Changes) -> None:
    for name, text in wanted.items():
        _write(folder(config) / name, text, changes)
    for path in present:
        if path.name not in wanted:
            path.unlink(missing_ok=True)
            changes.removed.append(path.name)


def sync_store(config: ClusterConfig, meta: MetadataStore, store: str) -> Changes:
    """The store's DAG files as the metadata store has it: written, rewritten or removed (all of them when the
    store is gone)."""
    try:
        wanted = dag_files(store_settings(meta, store))
    except StoreNotFound:
        wanted = {}
    changes = Changes()
    _apply(config, wanted, _store_files(config, store), changes)
    return changes


@dataclass(frozen=True)
class SyncResult:
    stores: int
    changes: Changes


def sync(config: ClusterConfig, meta: MetadataStore) -> SyncResult:
    """Every store's DAG files as the metadata store has it, and none of a store that is gone (a store changed
    through the controller's API alone is caught up here)."""
    every = all_store_settings(meta)
    wanted = {name: text for settings in every for name, text in dag_files(settings).items()}
    present = [
        path
        for prefix in (ROLLOUT_DAG_PREFIX, REPUSH_DAG_PREFIX)
        for path in (folder(config).glob(f"{prefix}*{SUFFIX}") if folder(config).is_dir() else [])
    ]
    changes = Changes()
    _apply(config, wanted, present, changes)
    return SyncResult(len(every), changes)


def store_changed(config: ClusterConfig, meta: MetadataStore, store: str, api: AirflowApi | None = None) -> None:
    """After `venice store create/update/delete`: the store's DAG files as the store now is, and a parse asked for
    each rewritten one. Nothing is asked when Airflow is off or not running here (it parses every file at its
    start); ComponentError when it does not answer (the change reaches Airflow at its next periodic parse)."""
    if not config.airflow_enabled:
        return
    changes = sync_store(config, meta, store)
    if airflow.pids(config):
        ask_to_parse(config, changes, api)


def ask_to_parse(config: ClusterConfig, changes: Changes, api: AirflowApi | None = None) -> None:
    """Ask the running Airflow to parse each rewritten file (a new one is found at the next look at the folder,
    a removed one's DAG deactivated then), and each `recent` one again a moment later."""
    if not changes.rewritten:
        return
    api = api or AirflowApi(config)
    for name in changes.rewritten:
        api.request_parse(name, airflow.STORES_BUNDLE)
    if changes.recent:
        time.sleep(ASK_AGAIN_AFTER_SECONDS)
        for name in changes.recent:
            api.request_parse(name, airflow.STORES_BUNDLE)


def nudge(config: ClusterConfig, meta: MetadataStore, store: str, api: AirflowApi) -> None:
    """While a push waits for its store's rollout DAG: the store's files written if missing (a store made through
    the controller's API alone has none), and the rollout DAG's file asked for again (a request that arrived while
    the file was being parsed was dropped)."""
    sync_store(config, meta, store)
    api.request_parse(file_name(rollout_dag_id(store)), airflow.STORES_BUNDLE)


def sync_and_report(config: ClusterConfig) -> str:
    """What `venice up` does once Airflow runs: every store's DAG files synced, and the running Airflow asked to
    parse each rewritten one (a new one it finds, a removed one's DAG it deactivates, at its next look at the
    folder). What it did, in a line."""
    meta = MetadataStore(config.metadata_db_url)
    try:
        result = sync(config, meta)
    finally:
        meta.dispose()
    changes = result.changes
    if airflow.pids(config):
        ask_to_parse(config, changes)
    return (
        f"DAG files of {result.stores} stores in {folder(config)}: {len(changes.new)} new, "
        f"{len(changes.rewritten)} rewritten, {len(changes.removed)} removed"
    )
