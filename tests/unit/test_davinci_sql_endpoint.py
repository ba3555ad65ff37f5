"""`venice davinci sql`'s pieces without a platform: which statements `read_only_sql.check` refuses (DuckDB's own
parse tree), the row and byte limits of a result, and the endpoint beside a live client (a slow asker bounded by
one deadline and never delaying its close, at most two queries at once, a symlinked path), over an in-memory
DuckDB."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest

from tests.support.reads import wait_for
from tests.support.slow_asker import SlowAsker
from venice_core.cli import rows
from venice_core.davinci import read_only_sql, sql_endpoint
from venice_core.davinci.read_only_sql import QueryFailed, QueryRefused
from venice_core.davinci.sql_endpoint import SqlEndpoint
from venice_core.errors import ConfigError

REFUSED = {
    "SELECT * FROM checkpoint()": "checkpoint() refused",
    "FROM checkpoint()": "checkpoint() refused",
    "FROM force_checkpoint()": "force_checkpoint() refused",
    "EXPLAIN ANALYZE SELECT * FROM checkpoint()": "checkpoint() refused",
    "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x": "DELETE inside the query refused",
    "WITH x AS (INSERT INTO t VALUES (1) RETURNING *) SELECT 1": "INSERT inside the query refused",
    "WITH x AS (UPDATE t SET a = 1 RETURNING *) SELECT 1": "UPDATE inside the query refused",
    "SELECT * FROM query('DELETE FROM t')": "query() refused",
    "SELECT * FROM read_csv('x.csv')": "read_csv() refused",
    "SELECT 1 WHERE 1 IN (SELECT * FROM t, read_parquet('x.parquet'))": "read_parquet() refused",
    "SELECT * FROM t JOIN glob('*') ON true": "glob() refused",
    "SELECT * FROM 'x.csv'": "reading 'x.csv' as a file refused",
    "DESCRIBE 'x.csv'": "reading 'x.csv' as a file refused",
    "CHECKPOINT": "CALL refused",
}
ALLOWED = [
    "SELECT * FROM t",
    "FROM main.t",
    "SHOW TABLES",
    "DESCRIBE t",
    "SUMMARIZE t",
    "EXPLAIN ANALYZE SELECT count(*) FROM t",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
    "SELECT * FROM range(3), duckdb_tables()",
]


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    with duckdb.connect() as connection:
        connection.execute("CREATE TABLE t (a INTEGER)")
        connection.execute("INSERT INTO t SELECT * FROM range(10)")
        yield connection


@pytest.mark.parametrize(("statement", "message"), REFUSED.items())
def test_check_refuses_what_writes_or_reads_files(statement: str, message: str) -> None:
    with pytest.raises(QueryRefused, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_only_sql.check(statement)


def test_check_lets_read_only_queries_through(con: duckdb.DuckDBPyConnection) -> None:
    for statement in ALLOWED:
        read_only_sql.check(statement)
        assert read_only_sql.run(con.cursor(), statement)["columns"], statement


def test_a_result_is_cut_at_max_rows_or_max_bytes(con: duckdb.DuckDBPyConnection) -> None:
    started = time.monotonic()
    result = read_only_sql.run(con.cursor(), "SELECT * FROM range(1000000000000)", max_rows=3)
    assert result == {"columns": ["range"], "rows": [[0], [1], [2]], "truncated": "rows"}
    assert time.monotonic() - started < 5  # fetched 4 rows, not 10^12
    whole = read_only_sql.run(con.cursor(), "SELECT a FROM t ORDER BY a", max_rows=10)
    assert whole["truncated"] is None and len(whole["rows"]) == 10
    cut = read_only_sql.run(con.cursor(), "SELECT a FROM t ORDER BY a", max_bytes=12)  # "[0]" is 3 bytes and one
    assert cut == {"columns": ["a"], "rows": [[0], [1], [2]], "truncated": "bytes"}


def test_rows_refuses_duplicate_columns_for_json_and_notes_a_cut() -> None:
    with pytest.raises(ConfigError, match="'a' appear more than once"):
        rows.as_json(["a", "b", "a"], [[1, 2, 3]])
    assert rows.as_csv(["a", "a"], [[1, 2]]) == "a,a\n1,2"
    note = rows.truncation_note(2, "rows")
    assert note == "(first 2 rows; --max-rows to see more)"
    assert rows.as_table(["a"], [[1], [2]], note).splitlines()[-1] == note
    assert rows.truncation_note(2, None) is None


@contextlib.contextmanager
def _endpoint(file: Path, cursor: object, **options: float) -> Iterator[SqlEndpoint]:
    endpoint = SqlEndpoint(file, cursor, **options).start()  # type: ignore[arg-type]
    try:
        yield endpoint
    finally:
        endpoint.close()


def test_a_slow_asker_has_one_deadline(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    with _endpoint(tmp_path / "dv.duckdb", con.cursor, request_timeout=1.0) as endpoint:
        with SlowAsker(endpoint.path, for_seconds=12) as asker:
            assert asker.cut.wait(8), "the endpoint never cut the slow asker off"
        assert asker.cut_after is not None and asker.cut_after < 5, asker.cut_after  # not reset by every byte


def test_a_slow_asker_does_not_delay_close(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    file = tmp_path / "dv.duckdb"
    endpoint = SqlEndpoint(file, con.cursor).start()
    with SlowAsker(endpoint.path):
        # Asked after the slow asker connected and answered: the endpoint is reading the slow asker's request.
        assert sql_endpoint.ask(file, "SELECT 1 AS one") == {"columns": ["one"], "rows": [[1]], "truncated": None}
        started = time.monotonic()
        endpoint.close()
        assert time.monotonic() - started < 3
    assert not endpoint.path.exists()


def test_at_most_two_queries_at_once(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    file = tmp_path / "dv.duckdb"
    gate, entered = threading.Event(), threading.Semaphore(0)

    def slow_cursor() -> duckdb.DuckDBPyConnection:  # holds its turn until the gate opens
        entered.release()
        gate.wait(10)
        return con.cursor()

    with _endpoint(file, slow_cursor, busy_wait=0.2), ThreadPoolExecutor(2) as pool:
        try:
            running = [pool.submit(sql_endpoint.ask, file, "SELECT 1 AS one") for _ in range(2)]
            assert entered.acquire(timeout=5) and entered.acquire(timeout=5)
            with pytest.raises(QueryFailed, match="busy"):
                sql_endpoint.ask(file, "SELECT 1")
        finally:
            gate.set()
        assert [f.result(timeout=10)["rows"] for f in running] == [[[1]], [[1]]]


def test_the_reply_is_capped_and_a_symlink_finds_the_endpoint(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "real").mkdir()
    file = tmp_path / "real" / "dv.duckdb"
    link = tmp_path / "link.duckdb"
    link.symlink_to(file)
    monkeypatch.setattr(sql_endpoint, "MAX_REPLY_BYTES", 100)
    with _endpoint(link, con.cursor) as endpoint:
        assert endpoint.path == tmp_path / "real" / "dv.duckdb.sock"
        result = sql_endpoint.ask(link, "SELECT * FROM range(1000000)", max_rows=1_000_000)
        assert result is not None and result["truncated"] == "bytes" and 10 < len(result["rows"]) < 30
        assert sql_endpoint.ask(file, "SELECT 42 AS n", max_rows=1) == {
            "columns": ["n"],
            "rows": [[42]],
            "truncated": None,
        }


def test_a_query_whose_asker_hangs_up_is_interrupted(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Ctrl-C on `venice davinci sql` closes its connection: the query stops there, not at its 60 s timeout (it
    held a cursor of the live client and its cores all along)."""
    file = tmp_path / "dv.duckdb"
    with _endpoint(file, con.cursor) as endpoint:
        asker = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        asker.connect(str(endpoint.path))
        endless = "SELECT count(*) FROM range(1000000000) a, range(1000000000) b"
        asker.sendall(json.dumps({"sql": endless}).encode())
        asker.shutdown(socket.SHUT_WR)
        wait_for("the query to run", lambda: endpoint._running, timeout=10, interval=0.05)
        hung_up = time.monotonic()
        asker.close()
        wait_for("the query to be interrupted", lambda: not endpoint._running, timeout=10, interval=0.05)
        assert time.monotonic() - hung_up < 5
        assert sql_endpoint.ask(file, "SELECT 1 AS one") == {"columns": ["one"], "rows": [[1]], "truncated": None}
