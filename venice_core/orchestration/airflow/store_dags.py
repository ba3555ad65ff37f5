"""The stores' DAG files: one small generated file per DAG of a store (`venice_push__<store>.py`, and
`venice_repush__<store>.py` for a store with a scheduled repush) in a DAG bundle of the platform's own
(`<airflow home>/store_dags/`, parsed by a dag-processor of its own: `airflow.STORE_DAG_PROCESSOR`).

Why a file per DAG (ARCHITECTURE.md, "Thousands of stores"): a store created, changed or deleted then costs one
DAG's parse, an unchanged store none, and no parse ever holds more than one DAG; a DAG exists exactly while its
file does (Airflow deactivates the DAGs of a file that is gone at its next look at the bundle).

A file holds its DAG's spec (`rollout.store_dag_spec`) as a JSON string literal: data, whatever a store holds. It
is written only when its text changes, atomically (the dag-processor reads the old text or the new), one writer at
a time. The store dag-processor watches no file: after a change the platform asks Airflow to parse each rewritten
file, and waits until the DAG Airflow serves carries the new text's fingerprint (`wait_until_parsed`: Airflow
drops a request for a file it is parsing, and a parse that read the old text may finish after the write); a new
file is found at its next look at the folder (every 10 s), and the DAG of a file that is gone deactivated then."""

from __future__ import annotations

import fcntl
import functools
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.controller.store_description import StoreSettings
from venice_core.controller.stores import all_store_settings, check_name, store_settings
from venice_core.deployment import airflow as deployment
from venice_core.embedded import airflow
from venice_core.errors import ComponentError, StoreNotFound
from venice_core.host.cache import staging
from venice_core.meta import MetadataStore
from venice_core.orchestration.airflow import dag_parsing
from venice_core.orchestration.airflow.api import AirflowApi
from venice_core.rollout.names import REPUSH_DAG_PREFIX, ROLLOUT_DAG_PREFIX, repush_dag_id, rollout_dag_id
from venice_core.rollout.store_dag_spec import DagSpec, RepushDagSpec, RolloutDagSpec, encode, fingerprint

SUFFIX = ".py"
HEADER = "written by the platform (venice_core/orchestration/airflow/store_dags.py); an edit here is lost"
# How long `venice store update` waits for Airflow to serve the store's changed DAGs (a first parse of a new file
# waits for the dag-processor's next look at the folder, every 10 s), and how often it asks again meanwhile.
PARSED_TIMEOUT_SECONDS = 60.0
ASK_AGAIN_SECONDS = 3.0


def folder(config: ClusterConfig) -> Path:
    """The bundle's folder, in the Airflow home."""
    return deployment.stores_folder(config)


def file_name(dag_id: str) -> str:
    """A DAG's file, relative to the bundle: named by the DAG."""
    return f"{dag_id}{SUFFIX}"


def specs(settings: StoreSettings) -> list[DagSpec]:
    """The specs of the store's DAGs: its rollout DAG's, and its scheduled repush DAG's when it has one."""
    rollout: list[DagSpec] = [RolloutDagSpec(settings.name, tuple(settings.rollout_order), settings.push)]
    return rollout + ([RepushDagSpec(settings.name, settings.repush)] if settings.repush is not None else [])


def source(spec: DagSpec) -> str:
    """The DAG file of a spec, calling its builder in `venice_plugin.store_dags`. Every text from the store in it is
    a Python literal made by `repr`. Airflow looks for "airflow" and "dag" in a file before it parses it."""
    doc = f"The Airflow DAG {spec.dag_id}: {HEADER}."
    return f"{doc!r}\n\nfrom venice_plugin.store_dags import {spec.BUILDER}\n\ndag = {spec.BUILDER}({encode(spec)!r})\n"


def dag_files(settings: StoreSettings) -> dict[str, str]:
    """The store's DAG files, by name."""
    return {file_name(spec.dag_id): source(spec) for spec in specs(settings)}


@dataclass
class Changes:
    """The files a sync wrote (`new`, `rewritten`) and removed; `fingerprints` of what each written one holds, by
    DAG id."""

    new: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    fingerprints: dict[str, str] = field(default_factory=dict)

    @property
    def written(self) -> list[str]:
        return self.new + self.rewritten

    def __bool__(self) -> bool:
        return bool(self.written or self.removed)

    def rewritten_dags(self) -> dict[str, str]:
        """The fingerprint of each rewritten file's DAG, by DAG id."""
        return {name.removesuffix(SUFFIX): self.fingerprints[name.removesuffix(SUFFIX)] for name in self.rewritten}


@contextmanager
def _writing(config: ClusterConfig) -> Iterator[None]:
    """One writer of the folder at a time (two `venice store update` of one store, or one beside `venice up`): the
    settings read and the files written under one lock, so the last settings read are the last written."""
    folder(config).mkdir(parents=True, exist_ok=True)
    with open(folder(config) / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _apply(config: ClusterConfig, wanted: list[DagSpec], present: list[Path], changes: Changes) -> None:
    names = set()
    for spec in wanted:
        path, text = folder(config) / file_name(spec.dag_id), source(spec)
        names.add(path.name)
        try:
            if path.read_text() == text:
                continue
            changes.rewritten.append(path.name)
        except OSError:  # no file yet
            changes.new.append(path.name)
        partial = staging(path)  # not a .py name: the dag-processor never reads a half-written file
        partial.write_text(text)
        os.replace(partial, path)
        changes.fingerprints[spec.dag_id] = fingerprint(encode(spec))
    for path in present:
        if path.name not in names:
            path.unlink(missing_ok=True)
            changes.removed.append(path.name)


def sync_store(config: ClusterConfig, meta: MetadataStore, store: str) -> Changes:
    """The store's DAG files as the metadata store has it: written, rewritten or removed (all of them when the
    store is gone)."""
    check_name("store", store)  # the name is part of the files' paths
    changes = Changes()
    with _writing(config):
        try:
            wanted = specs(store_settings(meta, store))
        except StoreNotFound:
            wanted = []
        dag_ids = (rollout_dag_id(store), repush_dag_id(store))
        present = [path for path in (folder(config) / file_name(d) for d in dag_ids) if path.exists()]
        _apply(config, wanted, present, changes)
    return changes


@dataclass(frozen=True)
class SyncResult:
    stores: int
    changes: Changes

    def summary(self, config: ClusterConfig) -> str:
        changes = self.changes
        return (
            f"DAG files of {self.stores} stores in {folder(config)}: {len(changes.new)} new, "
            f"{len(changes.rewritten)} rewritten, {len(changes.removed)} removed"
        )


def sync(config: ClusterConfig, meta: MetadataStore) -> SyncResult:
    """Every store's DAG files as the metadata store has it, and none of a store that is gone: what `venice up`
    does before Airflow starts (a store changed through the controller's API alone is caught up here)."""
    changes = Changes()
    with _writing(config):
        every = all_store_settings(meta)
        present = [
            path
            for prefix in (ROLLOUT_DAG_PREFIX, REPUSH_DAG_PREFIX)
            for path in folder(config).glob(f"{prefix}*{SUFFIX}")
        ]
        _apply(config, [spec for settings in every for spec in specs(settings)], present, changes)
    return SyncResult(len(every), changes)


def dag_is_current(api: AirflowApi, dag_id: str, expected: str) -> bool:
    """Airflow serves the DAG, not stale, built from the text whose fingerprint is `expected`."""
    try:
        details = api.get(f"/api/v2/dags/{dag_id}/details")
    except ComponentError:  # 404: no such DAG yet
        return False
    return not details.get("is_stale") and expected in (details.get("doc_md") or "")


def ask_to_parse(api: AirflowApi, dag_ids: list[str]) -> None:
    """Ask Airflow to parse these DAGs' files now (a file Airflow knows no DAG of yet is found at the
    dag-processor's next look at the folder)."""
    for dag_id in dag_ids:
        api.request_parse(file_name(dag_id), deployment.STORES_BUNDLE)


def wait_until_parsed(api: AirflowApi, dags: Mapping[str, str], timeout: float = PARSED_TIMEOUT_SECONDS) -> None:
    """Until Airflow serves each DAG (`dags`: the fingerprint its file now holds, by DAG id) as its file now is,
    asking for each file's parse now and again every few seconds; ComponentError past `timeout`."""
    dag_parsing.wait_until_parsed(
        {dag: functools.partial(dag_is_current, api, dag, fp) for dag, fp in dags.items()},
        functools.partial(ask_to_parse, api),
        timeout=timeout,
        ask_every=ASK_AGAIN_SECONDS,
        interval=0.5,
        timeout_error=lambda pending: ComponentError(
            f"Airflow did not parse the new files of {', '.join(pending)} in {timeout:.0f}s"
        ),
    )


def store_changed(config: ClusterConfig, meta: MetadataStore, store: str, api: AirflowApi | None = None) -> None:
    """After `venice store create/update/delete`: the store's DAG files as the store now is; when Airflow runs
    here, each rewritten one parsed before this returns (a new one is found within seconds, a removed one's DAG
    deactivated then). ComponentError when Airflow does not parse it in time (it then has the change at its next
    start)."""
    if not config.airflow.enabled:
        return
    changes = sync_store(config, meta, store)
    if changes.rewritten and airflow.pids(config):
        wait_until_parsed(api or AirflowApi(config), changes.rewritten_dags())


def current_rollout(config: ClusterConfig, meta: MetadataStore, store: str) -> str:
    """The store's DAG files written if they are not as the store is (a store made through the controller's API
    alone has none), and the fingerprint of its rollout DAG's spec: what a push waits to see Airflow serve."""
    sync_store(config, meta, store)
    return fingerprint(encode(specs(store_settings(meta, store))[0]))
