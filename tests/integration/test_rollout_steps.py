"""Rollout steps over the metadata store (no Kafka, no Airflow). The Da Vinci steps: the ingestion gate opens a
region to its Da Vinci clients, and the Da Vinci swap waits for the region's live instances to have ingested the
version (past the maximum wait, an ABORT). A step of a push already stopped does not act again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import update

from venice_core.config import load_config
from venice_core.controller import da_vinci, stores, versions
from venice_core.controller.rollout import DA_VINCI_SWAP, Decision, Rollout
from venice_core.errors import RolloutStopped
from venice_core.meta import MetadataStore
from venice_core.meta.models import DaVinciInstance, Version, VersionRegionStatus
from venice_core.status import ExecutionStatus, VersionStatus

SCHEMA = '{"type": "record", "name": "V", "fields": [{"name": "x", "type": "int"}]}'


@pytest.fixture
def rollout(tmp_path: Path):
    properties = tmp_path / "venice.properties"
    properties.write_text(f"data.dir={tmp_path}\nvenice.store.lifecycle.hooks.wait.max.seconds=30\n")
    config = load_config({"VENICE_CONFIG": str(properties)})
    meta = MetadataStore(config.metadata_db_url)
    meta.migrate()
    stores.create_store(meta, config, "users", '"string"', SCHEMA, partitions=1)
    with meta.session() as session:  # version 1, ingested by dc-1's servers
        session.add(
            Version(
                store_name="users",
                number=1,
                status=VersionStatus.STARTED.value,
                partition_count=1,
                compression="NO_OP",
                push_job_id="push-1",
                details={},
            )
        )
        session.add(
            VersionRegionStatus(store_name="users", number=1, region="dc-1", status=ExecutionStatus.COMPLETED.value)
        )
    said: list[str] = []
    rollout = Rollout(config, meta, "users", "push-1", {}, progress=said.append, version=1)
    yield rollout, meta, said
    meta.dispose()


def test_the_gate_opens_a_region_to_its_clients(rollout) -> None:
    rollout, meta, _ = rollout
    assert not da_vinci.gate_open(meta, "users", 1, "dc-1")
    assert rollout.decide_da_vinci_gate("dc-1") == Decision("PROCEED")
    assert da_vinci.gate_open(meta, "users", 1, "dc-1") and not da_vinci.gate_open(meta, "users", 1, "dc-2")


def test_only_live_instances_yet_to_ingest_the_version_are_waited_for(rollout) -> None:
    _, meta, _ = rollout
    da_vinci.heartbeat(meta, "users", "dc-1", "ingesting", 1, ExecutionStatus.STARTED)
    da_vinci.heartbeat(meta, "users", "dc-1", "done", 1, ExecutionStatus.COMPLETED)
    da_vinci.heartbeat(meta, "users", "dc-1", "ahead", 2, ExecutionStatus.STARTED)
    da_vinci.heartbeat(meta, "users", "dc-1", "silent")
    da_vinci.heartbeat(meta, "users", "dc-2", "elsewhere")
    with meta.session() as session:
        instance = DaVinciInstance
        session.execute(update(instance).where(instance.instance_id == "silent").values(heartbeat_at=time.time() - 61))
    assert da_vinci.pending(meta, "users", "dc-1", 1) == ["ingesting"]
    assert da_vinci.pending(meta, "users", "dc-1", 1, now=time.time() + 61) == []  # all silent by then


def test_the_swap_waits_for_instances_then_asks_the_hooks(rollout) -> None:
    rollout, meta, said = rollout
    assert rollout.decide_da_vinci_swap("dc-1") == Decision("PROCEED")  # none registered: nothing to wait for
    da_vinci.heartbeat(meta, "users", "dc-1", "client-a", 0)
    assert rollout.decide_da_vinci_swap("dc-1") is None  # asked again later
    assert said[-1] == "waiting for Da Vinci instances in dc-1 to ingest version 1: client-a"
    da_vinci.heartbeat(meta, "users", "dc-1", "client-a", 1, ExecutionStatus.COMPLETED)
    assert rollout.decide_da_vinci_swap("dc-1") == Decision("PROCEED")


def test_waiting_on_instances_past_the_maximum_is_an_abort(rollout) -> None:
    rollout, meta, _ = rollout
    da_vinci.heartbeat(meta, "users", "dc-1", "client-a", 0)
    with meta.session() as session:  # dc-1's servers finished ingesting 40 s ago
        session.execute(update(VersionRegionStatus).values(updated_at=time.time() - 40))
    decision = rollout.decide_da_vinci_swap("dc-1")
    assert decision is not None and decision.outcome == "ABORT"
    with pytest.raises(RolloutStopped, match=r"in dc-1 \(Da Vinci instances client-a had not ingested it after 4\ds"):
        rollout.apply(decision, DA_VINCI_SWAP, "dc-1")


def test_a_step_of_a_stopped_push_raises_the_recorded_stop(rollout) -> None:
    """A retried or re-run step (say Airflow failed a poke that had just aborted) must not ask the hooks anew."""
    rollout, meta, _ = rollout
    rollout.ensure_not_stopped()  # in flight: goes on
    versions.stop_push(meta, "users", 1, "aborted by a hook at pre_store_version_swap in dc-1")
    with pytest.raises(RolloutStopped, match=r"already stopped: version 1 is KILLED: aborted by a hook at pre_store"):
        rollout.ensure_not_stopped()
