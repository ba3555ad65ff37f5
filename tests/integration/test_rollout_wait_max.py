"""Where an operator set `venice.store.lifecycle.hooks.wait.max.seconds` (the cluster's, or a store's hook config),
a step that keeps answering WAIT past it ends in an explicit ABORT naming the limit and who set it, counted from the
first persisted invocation, so the limit holds across sensor pokes in separate processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update

from tests.support.metadata import migrated
from venice_core.config import load_config
from venice_core.controller.hook_decisions import HookDecisions
from venice_core.errors import RolloutStopped
from venice_core.meta import MetadataStore
from venice_core.meta.models import HookInvocationRecord


@pytest.fixture
def rollout(tmp_path: Path):
    properties = tmp_path / "venice.properties"
    properties.write_text(
        f"data.dir={tmp_path}\n"
        "venice.store.lifecycle.hooks=tests.hooks_fixtures.sample_hooks.AnswerFromConfig\n"
        "venice.store.lifecycle.hooks.wait.max.seconds=30\n"
    )
    config = load_config({"VENICE_CONFIG": str(properties)})
    meta = MetadataStore(config.metadata_db_url)
    migrated(meta)
    said: list[str] = []
    rollout = HookDecisions(
        config, meta, "users", "push-1", {"answer.pre_store_version_swap": "WAIT"}, progress=said.append
    )
    yield rollout, meta, said
    meta.dispose()


def test_wait_past_the_maximum_is_an_abort(rollout) -> None:
    rollout, meta, said = rollout
    assert rollout.decide("pre_store_version_swap", "dc-1") is None  # WAIT: asked again later
    assert rollout.decide("pre_store_version_swap", "dc-1") is None
    with meta.session() as session:  # the streak began 40 s ago, as if earlier pokes had been asked then
        session.execute(update(HookInvocationRecord).values(created_at=HookInvocationRecord.created_at - 40))
    decision = rollout.decide("pre_store_version_swap", "dc-1")
    assert decision is not None and decision.outcome == "ABORT"
    with pytest.raises(
        RolloutStopped,
        match=r"pre_store_version_swap in dc-1 \(still WAIT after 4\ds, past the maximum wait of 30s that the cluster "
        r"config sets \(venice.store.lifecycle.hooks.wait.max.seconds\)\)",
    ):
        rollout.apply(decision, "pre_store_version_swap", "dc-1")
    assert said[-1].startswith("pre_store_version_swap kept answering WAIT for 4")
    # Another region's streak is its own.
    assert rollout.decide("pre_store_version_swap", "dc-2") is None


def test_a_stores_own_maximum_wins_over_the_clusters(rollout) -> None:
    rollout, meta, _ = rollout
    rollout.store_hook_configs = {
        "answer.pre_store_version_swap": "WAIT",
        "venice.store.lifecycle.hooks.wait.max.seconds": "3600",
    }
    assert rollout.decide("pre_store_version_swap", "dc-1") is None
    with meta.session() as session:  # past the cluster's 30 s, within the store's hour
        session.execute(update(HookInvocationRecord).values(created_at=HookInvocationRecord.created_at - 40))
    assert rollout.decide("pre_store_version_swap", "dc-1") is None
    with meta.session() as session:
        session.execute(update(HookInvocationRecord).values(created_at=HookInvocationRecord.created_at - 3600))
    decision = rollout.decide("pre_store_version_swap", "dc-1")
    assert decision is not None and decision.outcome == "ABORT"
    assert "past the maximum wait of 3600s that the store's hook config sets" in decision.reason
