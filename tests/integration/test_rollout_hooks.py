"""A push rolled out region by region with lifecycle hooks (`venice push --local`'s steps, in this process), against
the real broker and region servers. The versions are written with the protocol writer: these tests are about the
rollout, not the Spark job.

The hooks are configured in a properties file of their own over the same platform (same data dir and ports),
as an operator would configure them; the store-level configs tell the test hook what to answer where."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.jobs import RecordsJob
from tests.support.platform import PlatformEnv
from venice_core.client import ReadClient
from venice_core.controller import stores
from venice_core.controller.rollout import RolloutStopped
from venice_core.hooks.records import metrics_text

HOOKS = "tests.hooks_fixtures.sample_hooks"


def _hooked(platform_env: PlatformEnv, tmp_path: Path, hooks: str, **settings: str) -> PlatformEnv:
    properties = tmp_path / "hooked.properties"
    lines = {
        "venice.store.lifecycle.hooks": hooks,
        "venice.store.lifecycle.hooks.wait.interval.seconds": "1",
        **settings,
    }
    properties.write_text(platform_env.properties.read_text() + "".join(f"{k}={v}\n" for k, v in lines.items()))
    return PlatformEnv(platform_env.home, properties, {**platform_env.env, "VENICE_CONFIG": str(properties)})


def _records(count: int, seed: int) -> dict[str, dict]:
    return {f"user-{i:05d}": {"name": f"n{i + seed}", "age": (i + seed) % 90, "score": i / 2} for i in range(count)}


def _version_status(env: PlatformEnv, store: str, number: int) -> str:
    return next(v["status"] for v in stores.describe_store(env.meta, store)["versions"] if v["number"] == number)


def test_abort_at_the_second_regions_pre_swap(platform_env: PlatformEnv, tmp_path: Path) -> None:
    env = _hooked(platform_env, tmp_path, f"{HOOKS}.AnswerFromConfig")
    store = env.create_user_store("roll", 1)
    env.push(store, RecordsJob(_records(300, seed=0)))
    stores.update_store(env.meta, env.config, store, hook_configs={"answer.pre_store_version_swap.dc-1": "ABORT"})
    second = _records(300, seed=1)
    with pytest.raises(RolloutStopped) as stopped:
        env.push(store, RecordsJob(second))
    assert str(stopped.value) == (
        "aborted by a lifecycle hook at pre_store_version_swap in dc-1; the new version serves in dc-0"
    )
    assert stopped.value.exit_code == 3
    assert env.serving(store) == {"dc-0": 2, "dc-1": 1, "dc-2": 1}
    assert _version_status(env, store, 2) == "PARTIALLY_ONLINE"
    client = ReadClient("127.0.0.1", env.config.server_port("dc-0"))
    assert client.get(store, "user-00007") == second["user-00007"]
    # The aborted push is over: the next one may start.
    stores.update_store(env.meta, env.config, store, remove_hook_configs=["answer.pre_store_version_swap.dc-1"])
    env.push(store, RecordsJob(second))
    assert set(env.serving(store).values()) == {3}


def test_wait_twice_then_proceed_waits_the_interval(platform_env: PlatformEnv, tmp_path: Path) -> None:
    env = _hooked(
        platform_env,
        tmp_path,
        f"{HOOKS}.WaitTwiceBeforeEachSwap",
        **{"venice.store.lifecycle.hooks.wait.interval.seconds": "2"},
    )
    store = env.create_user_store("wait", 1)
    said: list[str] = []
    started = time.monotonic()
    env.push(store, RecordsJob(_records(100, seed=0)), progress=said.append)
    assert sum("hooks answered WAIT at pre_store_version_swap" in line for line in said) == 6  # twice per region
    assert time.monotonic() - started >= 3 * 2 * 2  # two intervals of 2 s per region
    assert set(env.serving(store).values()) == {1}
    assert (
        f'venice_hook_outcomes_total{{function="pre_store_version_swap",hook_class="{HOOKS}.'
        f'WaitTwiceBeforeEachSwap",outcome="WAIT"}}'
    ) in metrics_text(env.meta)
