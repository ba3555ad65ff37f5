"""`venice davinci sql`: read-only SQL on a Da Vinci client's DuckDB file. On a file no client runs on, it opens the
file read-only; beside a real `venice davinci run` ingesting nearline writes, it asks the client through its socket
(the file's lock keeps every other process out); writes and multiple statements are refused, a bad query is one
error line and the client goes on; a killed client's socket falls back to the file and does not stop a restart."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb

from tests.support.jobs import RecordsJob
from tests.support.platform import VENICE, PlatformEnv
from tests.support.reads import holds, wait_for
from tests.support.slow_asker import SlowAsker
from venice_core.controller import stores
from venice_core.nearline.writer import OnlineWriter

REGION = "dc-1"
REFUSED = [  # statement -> what its one error line says
    ("INSERT INTO \"s_v1\" VALUES ('z', 'z', 0, NULL)", "INSERT refused"),
    ('DELETE FROM "s_v1"', "DELETE refused"),
    ("CREATE TABLE t (a INT)", "CREATE refused"),
    ("ATTACH '{dir}/other.duckdb'", "ATTACH refused"),
    ("COPY (SELECT 1) TO '{dir}/out.csv'", "COPY refused"),
    ("SET threads = 1", "SET refused"),
    ("PRAGMA enable_profiling", "PRAGMA refused"),
    ("CHECKPOINT", "CALL refused"),
    # A SELECT that checkpoints, writes in a CTE, runs SQL of its own or reads a file: refused by DuckDB's parse tree.
    ("SELECT * FROM checkpoint()", "checkpoint() refused"),
    ("FROM force_checkpoint()", "force_checkpoint() refused"),
    ('WITH x AS (DELETE FROM "s_v1" RETURNING *) SELECT count(*) FROM x', "DELETE inside the query refused"),
    ("SELECT * FROM query('DELETE FROM \"s_v1\"')", "query() refused"),
    ("SELECT * FROM read_csv('{dir}/dv.duckdb')", "read_csv() refused"),
    ("SELECT * FROM '{dir}/out.csv'", "as a file refused"),
    ("EXPLAIN ANALYZE INSERT INTO \"s_v1\" VALUES ('z', 'z', 0, NULL)", "EXPLAIN refused"),
    ('SELECT 1; DROP TABLE "s_v1"', "one read-only statement at a time, got 2"),
    ("  ", "no SQL statement given"),
]


def _error(result: subprocess.CompletedProcess[str]) -> str:
    """The command's one `error:` line (asserting there is exactly one)."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and result.returncode != 0, (result.returncode, result.stdout, result.stderr)
    return errors[0]


def test_sql_on_a_file_no_client_runs_on(cli_env: PlatformEnv, tmp_path: Path) -> None:
    file = tmp_path / "dv.duckdb"
    with duckdb.connect(str(file)) as con:
        con.execute('CREATE TABLE "s_v1" (key VARCHAR PRIMARY KEY, name VARCHAR, score DOUBLE, tags VARCHAR[])')
        con.execute("""INSERT INTO "s_v1" VALUES ('a', 'x', 1.5, ['p', 'q']), ('bb', NULL, 20, NULL)""")
        con.execute('CREATE VIEW "s" AS SELECT * FROM "s_v1"')
    query = 'SELECT * FROM "s" ORDER BY key'

    assert cli_env.cli("davinci", "sql", str(file), query, check=True).stdout.splitlines() == [
        "key  name  score  tags",
        "---  ----  -----  ----------",
        'a    x       1.5  ["p", "q"]',
        "bb   NULL   20.0  NULL",
        "(2 rows)",
    ]
    assert json.loads(cli_env.cli("davinci", "sql", str(file), query, "--json", check=True).stdout) == [
        {"key": "a", "name": "x", "score": 1.5, "tags": ["p", "q"]},
        {"key": "bb", "name": None, "score": 20.0, "tags": None},
    ]
    assert cli_env.cli("davinci", "sql", str(file), query, "--csv", check=True).stdout.splitlines() == [
        "key,name,score,tags",
        'a,x,1.5,"[""p"", ""q""]"',
        "bb,,20.0,",
    ]
    explain = cli_env.cli("davinci", "sql", str(file), 'EXPLAIN ANALYZE SELECT count(*) FROM "s"', check=True)
    assert "explain_value" in explain.stdout.splitlines()[0]

    # Refused by DuckDB's parser before the file is opened (exit 2), not by the read-only connection (exit 1).
    for statement, message in REFUSED:
        result = cli_env.cli("davinci", "sql", str(file), statement.format(dir=tmp_path))
        assert message in _error(result) and result.returncode == 2, (statement, result.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dv.duckdb"]  # nothing attached, copied or left open

    bad = {
        'SELECT * FROM "nosuch"': "Table with name nosuch does not exist!",
        "SELEC 1": 'syntax error at or near "SELEC"',
    }
    for statement, message in bad.items():
        assert message in _error(cli_env.cli("davinci", "sql", str(file), statement)), statement
    assert "no DuckDB file" in _error(cli_env.cli("davinci", "sql", str(tmp_path / "none.duckdb"), "SELECT 1"))
    for args, message in [
        (["SELECT 1 a, 2 a", "--json"], "'a' appear more than once"),
        (["SELECT 1", "--max-rows", "0"], "--max-rows must be 1 or more"),
    ]:
        assert message in _error(cli_env.cli("davinci", "sql", str(file), *args)), args

    # At most --max-rows rows are fetched (10,000 by default): said in the table's footer, on stderr beside CSV.
    many = "SELECT * FROM range(1000000000) AS r(n)"
    assert cli_env.cli("davinci", "sql", str(file), many, "--max-rows", "2", check=True).stdout.splitlines() == [
        "n",
        "-",
        "0",
        "1",
        "(first 2 rows; --max-rows to see more)",
    ]
    cut = cli_env.cli("davinci", "sql", str(file), many, "--csv", check=True)
    assert len(cut.stdout.splitlines()) == 10_001 and "(first 10000 rows; --max-rows to see more)" in cut.stderr
    assert "--json or --csv" in _error(cli_env.cli("davinci", "sql", str(file), "SELECT 1", "--json", "--csv"))

    # A process holding the file without serving SQL (a DuckDB shell, a client inside an application): named.
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(file)!r}); print(1, flush=True); input()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "1"
        assert "serves no SQL endpoint" in _error(cli_env.cli("davinci", "sql", str(file), "SELECT 1"))
    finally:
        holder.kill()
        holder.wait()


@contextlib.contextmanager
def _client(env: PlatformEnv, store: str, file: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`venice davinci run` on `file`, once it serves SQL; killed on the way out if the test did not stop it."""
    argv = [VENICE, "davinci", "run", store, "--region", REGION, "--duckdb", str(file), "--progress-seconds", "0.5"]
    with log.open("w") as out:
        process = subprocess.Popen(argv, env=env.env, stdout=out, stderr=out, start_new_session=True)

    def serving() -> Any:
        assert process.poll() is None, f"the client exited: {log.read_text()[-1000:]}"
        return "read-only SQL at" in log.read_text() or log.read_text()[-300:]

    try:
        wait_for("the client serving SQL", holds(serving), 60, 0.1)
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _value(i: int) -> dict[str, Any]:
    return {"name": f"n{i}", "age": i % 90, "score": float(i)}


def test_sql_on_a_live_client_while_it_ingests(platform_env: PlatformEnv, tmp_path: Path) -> None:
    env = platform_env
    store = env.create_user_store("dvsql", 2)
    stores.update_store(env.meta, env.config, store, hybrid_rewind_seconds=3600, hybrid_offset_lag_threshold=0)
    env.push(store, RecordsJob({f"b{i}": _value(i) for i in range(300)}))
    file = tmp_path / "dv.duckdb"
    sock = tmp_path / "dv.duckdb.sock"

    def sql(*args: str) -> subprocess.CompletedProcess[str]:
        return env.cli("davinci", "sql", str(file), *args)

    def count() -> int:
        result = sql(f'SELECT count(*) AS n FROM "{store}"', "--csv")
        assert result.returncode == 0, result.stderr
        return int(result.stdout.splitlines()[1])

    def counts(expected: int) -> Any:
        result = sql(f'SELECT count(*) AS n FROM "{store}"', "--csv")
        return result.stdout.splitlines()[1:] == [str(expected)] or (result.stderr or result.stdout)

    with _client(env, store, file, tmp_path / "first.log") as first:
        assert sock.is_socket() and sock.stat().st_mode & 0o777 == 0o600
        wait_for("v1 in the live client's view", holds(lambda: counts(300)), 60, 0.1)
        rows = f"SELECT key, name, age, score FROM \"{store}\" WHERE key IN ('b1', 'b2') ORDER BY key"
        assert json.loads(sql(rows, "--json").stdout) == [{"key": f"b{i}", **_value(i)} for i in (1, 2)]
        assert sql(rows, "--csv").stdout.splitlines() == ["key,name,age,score", "b1,n1,1,1.0", "b2,n2,2,2.0"]

        # Queries while nearline writes are ingested: each sees a snapshot of committed batches (never fewer rows
        # than the one before), and the client keeps ingesting meanwhile.
        writer = OnlineWriter(store, "dc-0", config=env.config, meta=env.meta)
        done = threading.Event()

        def write() -> None:
            for batch in range(20):
                for i in range(batch * 20, batch * 20 + 20):
                    writer.put(f"w{i}", _value(i))
                writer.flush()
                time.sleep(0.05)
            done.set()

        writing = threading.Thread(target=write)
        writing.start()
        seen = []
        try:
            while not done.is_set() or len(seen) < 3:
                seen.append(count())
        finally:
            writing.join()
            writer.close()
        assert seen == sorted(seen) and seen[0] >= 300 and seen[-1] <= 700, seen
        wait_for("the nearline writes in the live client's view", holds(lambda: counts(700)), 30, 0.1)

        # Writes refused, bad queries one error line each; the client goes on answering and holds its data.
        version_table = f"{store}_v1"
        for statement, message in REFUSED:
            result = sql(statement.format(dir=tmp_path).replace('"s_v1"', f'"{version_table}"'))
            assert message in _error(result) and result.returncode == 2, (statement, result.stderr)
        assert "nosuch does not exist" in _error(sql('SELECT * FROM "nosuch"'))
        assert "syntax error" in _error(sql("SELEC 1"))
        assert first.poll() is None and count() == 700
        assert not (tmp_path / "other.duckdb").exists() and not (tmp_path / "out.csv").exists()

        # The live client fetches at most --max-rows rows; a symlink to the file finds the same endpoint.
        cut = sql("SELECT * FROM range(1000000000)", "--max-rows", "3", "--json")
        assert json.loads(cut.stdout) == [{"range": i} for i in range(3)] and "(first 3 rows;" in cut.stderr
        link = tmp_path / "link.duckdb"
        link.symlink_to(file)
        linked = env.cli("davinci", "sql", str(link), f'SELECT count(*) AS n FROM "{store}"', "--csv")
        assert linked.stdout.splitlines() == ["n", "700"], linked.stderr

        # Killed: its socket stays behind, and `sql` falls back to the file, read-only.
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert sock.is_socket()
    assert count() == 700

    # A restart beside the stale socket: removed, served again; Ctrl-C stops it and removes its socket.
    with _client(env, store, file, tmp_path / "second.log") as second:
        assert "left by a client that did not stop cleanly" in (tmp_path / "second.log").read_text()
        assert count() == 700 and sock.is_socket()
        # An asker sending a byte at a time neither holds the endpoint's close nor delays Ctrl-C.
        with SlowAsker(sock, every=0.2):
            assert count() == 700  # asked after the slow asker connected: the client is reading its request
            os.killpg(second.pid, signal.SIGINT)
            started = time.monotonic()
            assert second.wait(timeout=60) == 0, (tmp_path / "second.log").read_text()
            stopped_in = time.monotonic() - started
        assert stopped_in < 20, stopped_in  # it waited for the asker: 60 s and more
    assert not sock.exists()
    assert sql(f'SELECT count(*) AS n FROM "{store}"').stdout.splitlines() == ["  n", "---", "700", "(1 row)"]
