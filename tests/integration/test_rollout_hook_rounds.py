"""A rollout step that asks several regions asks them all in one round of the hooks' pool
(`HookDecisions.asked_together`): `pre_store_version_creation` of every region, the Da Vinci gates at version
creation. Each region is still decided from its own answer. Over a metadata store of four regions (no broker: these
steps create no topic)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.platform import PlatformEnv, metadata_env
from venice_core.controller import da_vinci
from venice_core.controller.hook_decisions import HookDecisions
from venice_core.errors import RolloutStopped
from venice_core.hooks.records import invocations
from venice_core.meta.models import Version

HOOKS = "tests.hooks_fixtures.sample_hooks"
REGIONS = ["dc-0", "dc-1", "dc-2", "dc-3"]


@pytest.fixture
def four_regions(tmp_path: Path) -> Iterator[Callable[..., PlatformEnv]]:
    """Makes the platform: its hooks, threads and cluster-level hook configs."""
    made: list[PlatformEnv] = []

    def make(hooks: str, threads: int, **configs: str) -> PlatformEnv:
        settings = {f"venice.store.lifecycle.hooks.configs.{k}": v for k, v in configs.items()}
        settings["venice.store.lifecycle.hooks.threads"] = str(threads)
        env, meta = metadata_env(tmp_path, hooks, regions=",".join(REGIONS), **settings)
        meta.dispose()
        made.append(env)
        return env

    yield make
    for env in made:
        env.meta.dispose()


def test_version_creation_asks_and_informs_every_region_at_once(four_regions: Callable[..., PlatformEnv]) -> None:
    """Four regions, a hook taking 1 s in each, four threads: `pre_store_version_creation` takes about one hook's
    time, every call starting at once (no queue wait), and admits every region; so do the
    `post_store_version_creation` calls once the version is created."""
    slow_hooks = four_regions(f"{HOOKS}.Slow", 4, **{"slow.seconds": "1"})
    rollout = HookDecisions(slow_hooks.config, slow_hooks.meta, "users", "push-1", {}, progress=lambda _line: None)
    started = time.monotonic()
    decision = rollout.decide_version_creation(1, REGIONS)
    assert time.monotonic() - started < 3  # one region after another: 4 s
    assert decision is not None and decision.regions == tuple(REGIONS)
    rollout.version = 1
    started = time.monotonic()
    rollout.inform_regions("post_store_version_creation", REGIONS)
    assert time.monotonic() - started < 3
    for function in ("pre_store_version_creation", "post_store_version_creation"):
        asked = [r for r in invocations(slow_hooks.meta, "push-1") if r.function == function]
        assert [r.region for r in asked] == REGIONS
        assert all(r.queue_wait_seconds < 0.5 and 1 <= r.duration_seconds < 2 for r in asked)


def test_with_one_thread_the_regions_queue(four_regions: Callable[..., PlatformEnv]) -> None:
    slow_hooks = four_regions(f"{HOOKS}.Slow", 1, **{"slow.seconds": "0.5"})
    rollout = HookDecisions(slow_hooks.config, slow_hooks.meta, "users", "push-1", {}, progress=lambda _line: None)
    assert rollout.decide_version_creation(1, REGIONS) is not None
    waits = sorted(r.queue_wait_seconds for r in invocations(slow_hooks.meta, "push-1"))
    assert waits[0] < 0.25 and all(wait >= n * 0.5 for n, wait in enumerate(waits))


def test_da_vinci_gates_are_asked_in_one_round_and_rollback_wins(four_regions: Callable[..., PlatformEnv]) -> None:
    """At version creation the gates of every region are asked at once: the regions that PROCEED open together,
    and a WAIT leaves its region's gate to its own step. A ROLLBACK in a later region stops the push over an ABORT
    in an earlier one (VIP-4's precedence, as within a region), before any gate opens."""
    env = four_regions(f"{HOOKS}.AnswerFromConfig", 4)
    with env.meta.session() as session:  # the version the step has just created (its topics are not needed here)
        session.add(Version(store_name="users", number=1, status="STARTED", partition_count=1, compression="NO_OP"))
    gate = "answer.pre_start_of_store_version_ingestion_for_da_vinci"
    rollout = HookDecisions(env.config, env.meta, "users", "push-1", {f"{gate}.dc-2": "WAIT"}, version=1)
    rollout.open_da_vinci_gates(REGIONS)
    assert [da_vinci.gate_open(env.meta, "users", 1, r) for r in REGIONS] == [True, True, False, True]

    with env.meta.session() as session:
        session.add(Version(store_name="users", number=2, status="STARTED", partition_count=1, compression="NO_OP"))
    configs = {f"{gate}.dc-1": "ABORT", f"{gate}.dc-3": "ROLLBACK"}
    rollout = HookDecisions(env.config, env.meta, "users", "push-2", configs, progress=lambda _line: None, version=2)
    with pytest.raises(RolloutStopped, match="rolled back by a lifecycle hook at .*_for_da_vinci in dc-3"):
        rollout.open_da_vinci_gates(REGIONS)
    assert not any(da_vinci.gate_open(env.meta, "users", 2, r) for r in REGIONS)
    assert [r.region for r in invocations(env.meta, "push-2")] == REGIONS
