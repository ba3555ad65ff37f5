"""Rollouts through real Airflow (`airflow standalone`): `venice push --airflow` triggers the store's DAG run over
the session's platform; the hooks answer from store-level configs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.generate_dataset import generate
from tests.integration.test_push_e2e import _assert_serves, _expected
from tests.support.platform import PlatformEnv
from venice_core.config import load_config
from venice_core.embedded import airflow

pytestmark = pytest.mark.slow
REPO = Path(__file__).parents[2]
HOOKS = "tests.hooks_fixtures.sample_hooks"


@pytest.fixture(scope="module")
def airflow_env(platform_env: PlatformEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformEnv]:
    """Airflow over the session's platform, with a hook configured (PROCEED unless a store says otherwise)."""
    properties = tmp_path_factory.mktemp("airflow") / "venice.properties"
    properties.write_text(
        platform_env.properties.read_text() + f"venice.store.lifecycle.hooks={HOOKS}.AnswerFromConfig\n"
        "venice.store.lifecycle.hooks.wait.interval.seconds=2\n"
    )
    env = {**platform_env.env, "VENICE_CONFIG": str(properties), "PYTHONPATH": str(REPO)}
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(REPO)  # Airflow's task processes import the test hook module
    config = load_config({"VENICE_CONFIG": str(properties)})
    try:
        airflow.start(config)
        yield PlatformEnv(platform_env.home, properties, env)
    finally:
        airflow.stop(config)
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous


def test_all_proceed_rolls_out_everywhere(airflow_env: PlatformEnv, tmp_path: Path) -> None:
    store = airflow_env.create_user_store("af")
    data = generate(tmp_path / "in", 500, files=1)
    result = airflow_env.venice("push", store, "--input", str(data), "--airflow", timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "dc_2.post_swap: success" in result.stdout and "end_of_push_job: success" in result.stdout
    assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    _assert_serves(airflow_env, store, _expected(data))


def test_abort_at_second_region_and_rollback(airflow_env: PlatformEnv, tmp_path: Path) -> None:
    store = airflow_env.create_user_store("af")
    first = generate(tmp_path / "v1", 300, files=1, seed=0)
    airflow_env.venice("push", store, "--input", str(first), check=True)  # v1, directly
    second = generate(tmp_path / "v2", 300, files=1, seed=1)

    airflow_env.venice(
        "store", "update", store, "--hook-config", "answer.pre_store_version_swap.dc-1=ABORT", check=True
    )
    result = airflow_env.venice("push", store, "--input", str(second), "--airflow", timeout=900)
    assert result.returncode == 3
    assert (
        "failed at dc_1.pre_swap; version 2 is PARTIALLY_ONLINE: aborted by a hook at pre_store_version_swap "
        "in dc-1" in result.stderr
    )
    assert airflow_env.serving(store) == {"dc-0": 2, "dc-1": 1, "dc-2": 1}

    airflow_env.venice(
        "store",
        "update",
        store,
        "--remove-hook-config",
        "answer.pre_store_version_swap.dc-1",
        "--hook-config",
        "answer.post_store_version_swap.dc-1=ROLLBACK",
        check=True,
    )
    result = airflow_env.venice("push", store, "--input", str(second), "--airflow", timeout=900)
    assert result.returncode == 3
    assert "version 3 is ROLLED_BACK" in result.stderr
    assert airflow_env.serving(store) == {"dc-0": 2, "dc-1": 1, "dc-2": 1}  # each region back where it was
