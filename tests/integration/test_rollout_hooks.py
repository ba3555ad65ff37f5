"""A push rolled out region by region with lifecycle hooks, against the real platform (Spark, Kafka, servers).

The hooks are configured in a properties file of their own over the same platform (same data dir and ports),
as an operator would configure them; the store-level configs tell the test hook what to answer where."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from scripts.generate_dataset import generate
from tests.integration.test_push_e2e import _expected
from tests.support.platform import PlatformEnv
from venice_core.client import ReadClient

pytestmark = pytest.mark.slow
REPO = Path(__file__).parents[2]
HOOKS = "tests.hooks_fixtures.sample_hooks"


def _hooked(platform_env: PlatformEnv, tmp_path: Path, hooks: str, **settings: str) -> PlatformEnv:
    properties = tmp_path / "hooked.properties"
    lines = {
        "venice.store.lifecycle.hooks": hooks,
        "venice.store.lifecycle.hooks.wait.interval.seconds": "1",
        **settings,
    }
    properties.write_text(platform_env.properties.read_text() + "".join(f"{k}={v}\n" for k, v in lines.items()))
    env = {**platform_env.env, "VENICE_CONFIG": str(properties), "PYTHONPATH": str(REPO)}
    return PlatformEnv(platform_env.home, properties, env)


def _store_with_v1(env: PlatformEnv, tmp_path: Path) -> tuple[str, dict]:
    store = env.create_user_store("roll", 1)
    first = generate(tmp_path / "v1", 300, files=1, seed=0)
    env.venice("push", store, "--input", str(first), check=True)
    return store, _expected(first)


def _version_status(env: PlatformEnv, store: str, number: int) -> str:
    info = json.loads(env.venice("store", "show", store, "--json", check=True).stdout)
    return next(v["status"] for v in info["versions"] if v["number"] == number)


def test_abort_at_the_second_regions_pre_swap(platform_env: PlatformEnv, tmp_path: Path) -> None:
    env = _hooked(platform_env, tmp_path, f"{HOOKS}.AnswerFromConfig")
    store, _ = _store_with_v1(env, tmp_path)
    env.venice("store", "update", store, "--hook-config", "answer.pre_store_version_swap.dc-1=ABORT", check=True)
    second = generate(tmp_path / "v2", 300, files=1, seed=1)
    result = env.venice("push", store, "--input", str(second))
    assert result.returncode == 3
    assert result.stderr.strip() == (
        "error: aborted by a lifecycle hook at pre_store_version_swap in dc-1; the new version serves in dc-0"
    )
    assert env.serving(store) == {"dc-0": 2, "dc-1": 1, "dc-2": 1}
    assert _version_status(env, store, 2) == "PARTIALLY_ONLINE"
    client = ReadClient("127.0.0.1", env.config.server_port("dc-0"))
    key = next(iter(_expected(second)))
    assert client.get(store, key) == _expected(second)[key]
    # The aborted push is over: the next one may start.
    env.venice("store", "update", store, "--remove-hook-config", "answer.pre_store_version_swap.dc-1", check=True)
    env.venice("push", store, "--input", str(second), check=True)
    assert set(env.serving(store).values()) == {3}


def test_wait_twice_then_proceed_waits_the_interval(platform_env: PlatformEnv, tmp_path: Path) -> None:
    env = _hooked(
        platform_env,
        tmp_path,
        f"{HOOKS}.WaitTwiceBeforeEachSwap",
        **{"venice.store.lifecycle.hooks.wait.interval.seconds": "2"},
    )
    store = env.create_user_store("wait", 1)
    started = time.monotonic()
    result = env.venice("push", store, "--input", str(generate(tmp_path / "v1", 100, files=1)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("hooks answered WAIT at pre_store_version_swap") == 6  # twice in each region
    assert time.monotonic() - started >= 3 * 2 * 2  # two intervals of 2 s per region
    assert set(env.serving(store).values()) == {1}
    metrics = env.venice("metrics", check=True).stdout
    assert (
        f'venice_hook_outcomes_total{{function="pre_store_version_swap",hook_class="{HOOKS}.'
        f'WaitTwiceBeforeEachSwap",outcome="WAIT"}}'
    ) in metrics
