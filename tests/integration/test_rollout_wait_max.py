"""A step that keeps answering WAIT past `venice.store.lifecycle.hooks.wait.max.seconds` ends in an explicit ABORT,
counted from the first persisted invocation, so the limit holds across sensor pokes in separate processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update

from venice_core.config import load_config
from venice_core.controller.rollout import Rollout
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
    meta.migrate()
    said: list[str] = []
    rollout = Rollout(config, meta, "users", "push-1", {"answer.pre_store_version_swap": "WAIT"}, progress=said.append)
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
    with pytest.raises(RolloutStopped, match=r"pre_store_version_swap in dc-1 \(still WAIT after 4\ds, the maximum"):
        rollout.apply(decision, "pre_store_version_swap", "dc-1")
    assert said[-1].startswith("pre_store_version_swap kept answering WAIT for 4")
    # Another region's streak is its own.
    assert rollout.decide("pre_store_version_swap", "dc-2") is None
