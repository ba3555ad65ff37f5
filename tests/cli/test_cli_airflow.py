"""Airflow's own CLI against the platform's Airflow, none of it running: `venice airflow ARGS...`, and a plain
`airflow` given the platform's AIRFLOW_HOME alone (the home's airflow.cfg holds the platform's settings and names
its venice config). Each `airflow` command costs seconds of CPU: a few only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.leftovers import airflow_parts, leaves_nothing
from tests.support.platform import PlatformEnv
from venice_core.deployment import airflow as deployment

AIRFLOW = str(Path(sys.executable).with_name("airflow"))

# Airflow's CLI, not a running Airflow, but seconds of CPU a command: kept out of the fast tier.
pytestmark = pytest.mark.airflow


def _plain_airflow(env: PlatformEnv, *args: str) -> subprocess.CompletedProcess[str]:
    """The venv's `airflow` with AIRFLOW_HOME as its only setting: no VENICE_* or AIRFLOW__* variable."""
    only_home = {"HOME": os.environ["HOME"], "PATH": "/usr/bin:/bin", "AIRFLOW_HOME": str(deployment.home(env.config))}
    result = subprocess.run([AIRFLOW, *args], env=only_home, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"airflow {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}"
    return result


def _dag_ids(listing: str) -> set[str]:
    """The DAG ids of `airflow dags list -o plain` (its table follows whatever warnings Airflow printed first)."""
    lines = listing.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("dag_id "))
    return {line.split()[0] for line in lines[header + 1 :] if line.strip()}


def test_venice_airflow_and_plain_airflow_see_the_platforms_airflow(
    cli_env: PlatformEnv, capfd: pytest.CaptureFixture[str]
) -> None:
    store = cli_env.create_user_store("airflow_cli")
    dag = f"venice_push__{store}"
    with leaves_nothing(*airflow_parts(cli_env.config)):  # nothing of Airflow's is left running
        # In this process (`venice` imports once); airflow's output goes to the file descriptors, as in a terminal.
        assert cli_env.cli("airflow", "tasks", "list", dag).returncode == 0, capfd.readouterr().err[-3000:]
        tasks = set(capfd.readouterr().out.split())
        assert {"create_version", "dc_0.server_swap", "dc_2.server_swap", "end_of_push"} <= tasks

        # Every bundle of the home's config parsed into its database, then read back from it: the platform's DAG
        # folder, its venice config (the store's DAG), its database, and no example DAGs (`load_examples`).
        _plain_airflow(cli_env, "dags", "reserialize")
        assert _dag_ids(_plain_airflow(cli_env, "dags", "list", "-o", "plain").stdout) == {dag}


def test_a_wrong_argument_is_airflows_own_error(cli_env: PlatformEnv, capfd: pytest.CaptureFixture[str]) -> None:
    assert cli_env.cli("airflow", "tasks", "lisst").returncode == 2  # argparse's usage error, passed on
    assert "airflow tasks command error: argument COMMAND: invalid choice: 'lisst'" in capfd.readouterr().err
