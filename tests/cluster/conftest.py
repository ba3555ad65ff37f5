"""The cluster profile, started once for the cluster tests (`tests/cluster/`) and stopped at their end, and the
dataset their pushes write."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.generate_dataset import generate
from tests.support.cluster import make_cluster_env
from tests.support.inputs import expected_records
from tests.support.leftovers import leaves_nothing, platform_parts
from tests.support.platform import PlatformEnv

RECORDS = 200_000


@pytest.fixture(scope="package")
def cluster() -> Iterator[PlatformEnv]:
    """The cluster profile, up for the cluster tests (outside pytest's temp tree: PostgreSQL runs as its own user)."""
    home = Path(tempfile.mkdtemp(prefix="venice-cluster-"))
    env = make_cluster_env(home, {"rollout.step.retry.delay.seconds": "2"})  # a step lost with its worker: soon
    config = env.config
    try:
        started = time.monotonic()
        env.venice("up", check=True, timeout=600)
        print(f"cluster profile up in {time.monotonic() - started:.0f} s")
        yield env
    finally:
        with leaves_nothing(*platform_parts(config)):
            env.venice("down", timeout=600)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="package")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    data = generate(tmp_path_factory.mktemp("cluster-data") / "users", RECORDS, files=4)
    return data, expected_records(data)
