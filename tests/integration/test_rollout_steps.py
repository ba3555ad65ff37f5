"""Rollout steps over the metadata store (no Kafka, no Airflow). The Da Vinci steps: the ingestion gate opens a
region to its Da Vinci clients, and the Da Vinci swap (right before the region's servers') lets them serve the
version and waits for the region's live instances to report that they do (past its timeout, the servers swap
without them, and the job status lists them for the hooks asked after). A step of a push already stopped does not
act again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import update

from tests.support.metadata import migrated
from venice_core.config import load_config
from venice_core.controller import da_vinci, stores, versions
from venice_core.controller.hook_decisions import Decision, HookDecisions
from venice_core.errors import RolloutStopped
from venice_core.meta import MetadataStore
from venice_core.meta.models import DaVinciInstance, HookInvocationRecord, Version, VersionRegionStatus
from venice_core.model.status import ExecutionStatus, VersionStatus
from venice_core.rollout.steps import CreatedVersion, PushRequest, StepInputs, step

CREATED = CreatedVersion(1, 1, ["dc-0", "dc-1", "dc-2"], "push-1")

SCHEMA = '{"type": "record", "name": "V", "fields": [{"name": "x", "type": "int"}]}'


@pytest.fixture
def rollout(tmp_path: Path):
    properties = tmp_path / "venice.properties"
    properties.write_text(
        f"data.dir={tmp_path}\ndavinci.swap.timeout.seconds=30\n"
        "venice.store.lifecycle.hooks=tests.hooks_fixtures.sample_hooks.AnswerFromConfig\n"
    )
    config = load_config({"VENICE_CONFIG": str(properties)})
    meta = MetadataStore(config.metadata_db_url)
    migrated(meta)
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
    rollout = HookDecisions(config, meta, "users", "push-1", {}, progress=said.append, version=1)
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


def test_the_swap_lets_the_clients_serve_and_waits_for_them(rollout) -> None:
    rollout, meta, said = rollout
    assert not da_vinci.swap_open(meta, "users", 1, "dc-1")
    assert rollout.da_vinci_clients_serve("dc-1")  # none registered: nothing to wait for
    assert da_vinci.swap_open(meta, "users", 1, "dc-1") and not da_vinci.swap_open(meta, "users", 1, "dc-2")
    da_vinci.heartbeat(meta, "users", "dc-1", "client-a", 1, ExecutionStatus.COMPLETED, serving=0)  # ingested only
    assert not rollout.da_vinci_clients_serve("dc-1")  # checked again later
    assert not rollout.da_vinci_clients_serve("dc-1")
    assert said == ["waiting for Da Vinci instances in dc-1 to serve version 1: client-a"]  # said once
    region = versions.job_status(meta, "users", 1).regions["dc-1"]
    assert region.da_vinci_not_serving == ("client-a",) and region.da_vinci_swap_at is not None
    da_vinci.heartbeat(meta, "users", "dc-1", "client-a", 1, ExecutionStatus.COMPLETED, serving=1)
    assert rollout.da_vinci_clients_serve("dc-1")
    assert versions.job_status(meta, "users", 1).regions["dc-1"].da_vinci_not_serving == ()


def test_a_client_silent_past_the_timeout_holds_the_swap_no_longer_and_is_listed_for_the_hooks(rollout) -> None:
    rollout, meta, said = rollout
    da_vinci.heartbeat(meta, "users", "dc-1", "client-a", 0)
    assert not rollout.da_vinci_clients_serve("dc-1")
    with meta.session() as session:  # the region's clients were let swap 40 s ago
        row = session.get(Version, ("users", 1))
        assert row is not None
        row.update_lifecycle(da_vinci_swaps={"dc-1": time.time() - 40})
    assert rollout.da_vinci_clients_serve("dc-1")
    assert said[-1] == (
        "Da Vinci instances in dc-1 do not serve version 1 after 30s: client-a; dc-1's servers swap without them (the "
        "job status lists them)"
    )
    # What every hook asked from now on sees: the client that does not serve it.
    assert rollout.context("dc-1").job_status.regions["dc-1"].da_vinci_not_serving == ("client-a",)


def test_the_hook_after_the_start_of_da_vinci_ingestion_decides_as_any_decision(rollout) -> None:
    rollout, _, _ = rollout
    rollout.store_hook_configs = {"answer.post_start_of_store_version_ingestion_for_da_vinci": "ABORT"}
    decision = step("da_vinci_ingestion").run(StepInputs(rollout, PushRequest("users", ""), CREATED, "dc-1"))
    assert decision is not None and decision.outcome == "ABORT"
    with pytest.raises(RolloutStopped, match="aborted by a lifecycle hook at post_start_of_store_version_ingestion"):
        rollout.apply(decision, "post_start_of_store_version_ingestion_for_da_vinci", "dc-1")


def test_without_a_configured_maximum_a_wait_is_asked_again_for_as_long_as_it_is_answered(rollout) -> None:
    """VIP-4's WAIT is "re-run this step later": no limit of the platform's own turns it into an ABORT."""
    rollout, meta, _ = rollout
    rollout.store_hook_configs = {"answer.pre_store_version_swap": "WAIT"}
    assert rollout.wait_limit is None
    assert rollout.decide("pre_store_version_swap", "dc-1") is None
    with meta.session() as session:  # the streak began a year ago
        session.execute(update(HookInvocationRecord).values(created_at=HookInvocationRecord.created_at - 366 * 86400))
    assert rollout.decide("pre_store_version_swap", "dc-1") is None


def test_a_step_of_a_stopped_push_raises_the_recorded_stop(rollout) -> None:
    """A retried or re-run step (say Airflow failed a poke that had just aborted) must not ask the hooks anew."""
    rollout, meta, _ = rollout
    rollout.ensure_not_stopped()  # in flight: goes on
    versions.stop_push(meta, "users", 1, "aborted by a hook at pre_store_version_swap in dc-1")
    with pytest.raises(RolloutStopped, match=r"already stopped: version 1 is KILLED: aborted by a hook at pre_store"):
        rollout.ensure_not_stopped()
