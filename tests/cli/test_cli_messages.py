"""What the CLI says when it cannot go on: one `error:` line that says what to do. Click's usage errors are such a
line too (exit 2, as any bad input), `--help` still works, the platform down is named with what to run, and
`venice status` names the Airflow component that is not running. Nothing runs: Airflow is enabled on a port where
nothing listens."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.metadata import migrated
from tests.support.platform import SCHEMAS, PlatformEnv, make_platform_env
from venice_core.deployment import airflow as deployment
from venice_core.embedded import airflow


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> PlatformEnv:
    env = make_platform_env(tmp_path_factory.mktemp("messages") / "home", {"airflow.enabled": "true"})
    migrated(env.meta)
    schemas = ("--key-schema", str(SCHEMAS / "user_key.avsc"), "--value-schema", str(SCHEMAS / "user_value_v1.avsc"))
    env.cli("store", "create", "users", *schemas, check=True)
    yield env
    env.meta.dispose()


def _one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["store", "update", "users", "--partitions", "abc"],
            "error: invalid value for '--partitions': Input should be a valid integer, unable to parse string as an "
            "integer (see `venice store update --help`)",
        ),
        (
            ["store", "update", "users", "--partitons", "3"],
            "error: no such option: --partitons (Possible options: --partitioner-class, --partitioner-param, "
            "--partitions) (see `venice store update --help`)",
        ),
        (
            ["push", "users"],
            "error: a push needs --input (or --conf source.kafka=true: a repush of the store's own data)",
        ),
        (["no-such-command"], "error: no such command 'no-such-command' (see `venice --help`)"),
    ],
)
def test_a_usage_error_is_one_error_line_and_exit_2(env: PlatformEnv, args: list[str], said: str) -> None:
    result = env.cli(*args)
    assert _one_line(result, 2) == said and result.stdout == ""


def test_help_still_works_and_no_arguments_still_show_it(env: PlatformEnv) -> None:
    helped = env.cli("store", "update", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: venice store update") and not helped.stderr
    bare = env.cli("store")
    assert bare.returncode == 2 and "Usage: venice store" in bare.stderr and "update" in bare.stderr


def test_airflow_down_says_what_to_do(env: PlatformEnv, tmp_path: Path) -> None:
    data = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([{"key": "u1", "value": {"name": "Ada", "age": 36, "score": 1.5}}]), data)
    url = deployment.base_url(env.config)
    said = f"error: Airflow at {url} is unreachable (Connection refused): is the platform up? run `venice up`, or "
    said += "push with --local"
    assert _one_line(env.cli("push", "users", "--input", str(data), "--airflow"), 1) == said
    assert _one_line(env.cli("rollout", "status", "users"), 1) == said


class _Process:
    def __init__(self, pid: int | None) -> None:
        self._pid = pid

    def pid(self) -> int | None:
        return self._pid


def test_status_names_the_airflow_component_that_is_not_running(
    env: PlatformEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = dict(zip(airflow.COMPONENTS, (41, 42, 43, None), strict=True))  # the scheduler is not running
    assert pids["scheduler"] is None
    monkeypatch.setattr(airflow, "processes", lambda _config: [_Process(pid) for pid in pids.values()])
    monkeypatch.setattr(airflow, "is_healthy", lambda _config: True)
    result = env.cli("status")
    assert result.returncode == 1  # a component is not healthy
    line = next(line for line in result.stdout.splitlines() if line.startswith("airflow"))
    assert line.split()[1] == "DOWN"
    assert line.endswith(
        f"pids 41, 42, 43, {deployment.base_url(env.config)} (scheduler not running: 3 of 4 components running)"
    )
