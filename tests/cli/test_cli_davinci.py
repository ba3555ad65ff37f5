"""`venice davinci` without a broker: what `run` refuses (one `error:` line, a non-zero exit, no file created) and
what `status` lists (the registered instances, live or gone)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import duckdb

from tests.support.platform import PlatformEnv
from venice_core.controller import da_vinci
from venice_core.davinci.sql_endpoint import SqlEndpoint
from venice_core.model.status import ExecutionStatus


def test_run_refuses_bad_arguments_with_one_error_line(cli_env: PlatformEnv, tmp_path: Path) -> None:
    store = cli_env.create_user_store("dvcli")
    file = tmp_path / "c.duckdb"
    missing = tmp_path / "no" / "such" / "c.duckdb"
    plain = tmp_path / "plain"
    plain.write_text("")
    # FILE.sock not a socket, or served by another live client: refused before the client starts (before the
    # region server is even asked).
    blocked, served = tmp_path / "blocked.duckdb", tmp_path / "served.duckdb"
    Path(f"{blocked}.sock").write_text("")
    cases = [
        (["davinci", "run", store, "--region", "dc-0"], "give --duckdb FILE, or --base-dir DIR"),
        (["davinci", "run", "nope", "--region", "dc-0", "--duckdb", str(file)], "store 'nope'"),
        (["davinci", "run", store, "--region", "dc-7", "--duckdb", str(file)], "unknown region 'dc-7'"),
        (["davinci", "run", store, "--region", "dc-0", "--duckdb", str(file), "--partitions", "a"], "--partitions"),
        (["davinci", "run", store, "--region", "dc-0", "--duckdb", str(file), "--partitions", "5"], "partitions 0-0"),
        # A file in a folder that does not exist: named, before anything starts or is created.
        (["davinci", "run", store, "--region", "dc-0", "--duckdb", str(missing)], f"{missing.parent} does not exist"),
        (["davinci", "run", store, "--region", "dc-0", "--duckdb", str(plain / "c.duckdb")], "is not a folder"),
        # No region server runs here: one clear error, before any file is created.
        (["davinci", "run", store, "--region", "dc-0", "--duckdb", str(file)], "region server of dc-0 at"),
        (["davinci", "run", store, "--region", "dc-0", "--duckdb", str(blocked)], "blocked.duckdb.sock exists and is"),
        (["davinci", "run", store, "--region", "dc-0", "--duckdb", str(served)], "another Da Vinci client serves"),
    ]
    with duckdb.connect() as con, contextlib.closing(SqlEndpoint(served, con.cursor).start()):
        for argv, message in cases:
            result = cli_env.cli(*argv)
            assert result.returncode != 0, (argv, result.stdout)
            errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
            assert len(errors) == 1 and message in errors[0], (argv, result.stderr)
    assert not file.exists() and not (tmp_path / "no").exists()
    assert not blocked.exists() and not served.exists()


def test_status_lists_instances_live_and_gone(cli_env: PlatformEnv) -> None:
    store = cli_env.create_user_store("dvcstatus")
    assert "no Da Vinci instance registered" in cli_env.cli("davinci", "status", store, check=True).stdout
    da_vinci.heartbeat(cli_env.meta, store, "dc-1", "app-1", 3, ExecutionStatus.COMPLETED)
    da_vinci.heartbeat(cli_env.meta, store, "dc-2", "app-2", 2, ExecutionStatus.STARTED)
    with cli_env.meta.session() as session:  # app-2 silent for longer than an instance stays live
        from venice_core.meta.models import DaVinciInstance

        session.get(DaVinciInstance, (store, "dc-2", "app-2")).heartbeat_at -= da_vinci.LIVE_SECONDS + 5
    lines = cli_env.cli("davinci", "status", store, check=True).stdout.splitlines()
    assert len(lines) == 2
    assert "dc-1" in lines[0] and "app-1" in lines[0] and "v3" in lines[0] and "COMPLETED" in lines[0]
    assert " live " in lines[0] and " gone " in lines[1] and "STARTED" in lines[1]
    result = cli_env.cli("davinci", "status", "nope")
    assert result.returncode != 0 and "store 'nope'" in result.stderr
