"""The cluster profile, chosen by name as a user chooses it (`venice --profile cluster up`, on the profile's own
ports, with a home of the tests' own for its data dir), started once for the cluster tests (`tests/cluster/`) and
stopped at their end, and the dataset their pushes write. Where network namespaces can be made (root), the tests run
on the hosts profile instead (`venice --profile hosts up`: the same processes, each on a host of its own), the
stricter form, and its network faults with them (`test_hosts_faults.py`)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.generate_dataset import generate
from tests.support.cluster import RECORDS
from tests.support.inputs import expected_records
from tests.support.platform import PlatformEnv
from tests.support.profiles import CLUSTER_PROFILE, as_a_user, assert_ports_free, profile_env, stopped_at_the_end
from venice_core.security import principals


@pytest.fixture(scope="package")
def cluster() -> Iterator[PlatformEnv]:
    """The cluster profile (or the hosts profile, `CLUSTER_PROFILE`), up for the cluster tests (its home outside
    pytest's temp tree: PostgreSQL runs as its own user). Started with the flag (`venice --profile NAME up`); the
    tests' commands name it by `VENICE_PROFILE`."""
    home = Path(tempfile.mkdtemp(prefix="venice-cluster-"))
    try:
        with as_a_user(home) as user:
            env = profile_env(user, CLUSTER_PROFILE)
            assert_ports_free(env.config, CLUSTER_PROFILE)
            with stopped_at_the_end(env):
                started = time.monotonic()
                up = subprocess.run(
                    ["venice", "--profile", CLUSTER_PROFILE, "up"],
                    env=user,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                assert up.returncode == 0, up.stdout + up.stderr
                print(f"{CLUSTER_PROFILE} profile up in {time.monotonic() - started:.0f} s")
                with principals.acting_as(env.config, principals.ADMIN):  # the tests read its topics as the admin
                    yield env
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="package")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    data = generate(tmp_path_factory.mktemp("cluster-data") / "users", RECORDS, files=4)
    return data, expected_records(data)
