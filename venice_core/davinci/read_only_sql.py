"""Read-only SQL on a Da Vinci client's DuckDB file (`venice davinci sql`): which statements may run (DuckDB's own
parser decides, never a pattern), and running one into plain JSON values, alike whether the running client answers
(`sql_endpoint`) or the file is opened read-only."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import duckdb

from venice_core.davinci.duckdb_store import DuckDBFileBusy, _json_default
from venice_core.errors import ConfigError, VeniceError


class QueryRefused(VeniceError):
    """A statement that is not one read-only query: refused before anything runs."""

    http_status = 400
    exit_code = 2


class QueryFailed(VeniceError):
    """A query DuckDB could not run (unknown table, syntax, interrupted): its first line."""

    http_status = 400


def _statements(sql: str) -> list[duckdb.Statement]:
    try:
        return duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryFailed(_first_line(exc)) from None


def _is_select(sql: str) -> bool:
    statements = _statements(sql)
    return len(statements) == 1 and statements[0].type == duckdb.StatementType.SELECT


def _explains_a_select(query: str) -> bool:
    """`EXPLAIN [ANALYZE] <one SELECT>`: ANALYZE runs the statement, so what is explained must be a read too."""
    tokens = [t for t in duckdb.tokenize(query) if t[1] != duckdb.token_type.comment][1:]  # past EXPLAIN
    if tokens and query[tokens[0][0] :].split(None, 1)[0].upper() == "ANALYZE":
        tokens = tokens[1:]
    return bool(tokens) and _is_select(query[tokens[0][0] :])


def check(sql: str) -> None:
    """`sql` must be one read-only statement: a SELECT (SHOW, DESCRIBE, SUMMARIZE and `FROM t` parse as one) or
    an EXPLAIN of one; anything else is `QueryRefused` naming it, a syntax error `QueryFailed`."""
    statements = _statements(sql)
    if not statements:
        raise QueryRefused("no SQL statement given")
    if len(statements) > 1:
        raise QueryRefused(f"one read-only statement at a time, got {len(statements)} statements")
    statement = statements[0]
    if statement.type == duckdb.StatementType.SELECT:
        return
    if statement.type == duckdb.StatementType.EXPLAIN and _explains_a_select(statement.query):
        return
    raise QueryRefused(f"{statement.type.name} refused: only read-only queries run here (a SELECT, or EXPLAIN of one)")


def run(cursor: duckdb.DuckDBPyConnection, sql: str, timeout: float | None = None) -> dict[str, Any]:
    """Check `sql`, then run it in a read-only transaction on `cursor` (a snapshot of committed transactions: a
    client's half-applied batch is never seen, and nothing can be written even by a function a SELECT calls),
    interrupted after `timeout` seconds. Returns `{"columns": [...], "rows": [[...], ...]}` of JSON values."""
    check(sql)
    timer = threading.Timer(timeout, cursor.interrupt) if timeout else None
    try:
        cursor.execute("BEGIN TRANSACTION READ ONLY")
        try:
            if timer is not None:
                timer.start()
            cursor.execute(sql)
            columns = [d[0] for d in cursor.description or []]
            rows = cursor.fetchall()
        finally:
            if timer is not None:
                timer.cancel()
            cursor.execute("ROLLBACK")
    except duckdb.InterruptException:
        raise QueryFailed(f"query interrupted after {timeout:.0f}s") from None
    except duckdb.Error as exc:
        raise QueryFailed(_first_line(exc)) from None
    # DuckDB's dates, decimals, blobs as the client's JSON columns are: text (blobs in hex).
    return {"columns": columns, "rows": json.loads(json.dumps(rows, default=_json_default))}


def query_file(path: Path, sql: str) -> dict[str, Any]:
    """`run` on the DuckDB file opened read-only: for when no client runs on it."""
    check(sql)  # refused without opening anything
    if not path.is_file():
        raise ConfigError(f"no DuckDB file {path}")
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise DuckDBFileBusy(
                f"DuckDB file {path} is held by a process that serves no SQL endpoint (a Da Vinci client inside an "
                f"application, a DuckDB shell): query it there ({_first_line(exc)})"
            ) from None
        raise ConfigError(f"cannot open DuckDB file {path}: {_first_line(exc)}") from None
    with con:
        return run(con, sql)


def _first_line(exc: BaseException) -> str:
    """DuckDB's message without its hints and caret lines: one line."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


__all__ = ["QueryFailed", "QueryRefused", "check", "query_file", "run"]
