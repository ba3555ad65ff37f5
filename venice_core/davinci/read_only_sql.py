"""Read-only SQL on a Da Vinci client's DuckDB file (`venice davinci sql`): which statements may run (DuckDB's own
parser decides, never a pattern), and running one into plain JSON values, alike whether the running client answers
(`sql_endpoint`) or the file is opened read-only."""

from __future__ import annotations

import contextlib
import json
import queue
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import duckdb

from venice_core.davinci.duckdb_store import connect_file, json_default
from venice_core.errors import ConfigError, VeniceError

FETCH_CHUNK = 2048  # rows fetched at a time


class QueryRefused(VeniceError):
    """A statement that is not one read-only query: refused before anything runs."""

    http_status = 400
    exit_code = 2


class QueryFailed(VeniceError):
    """A query DuckDB could not run (unknown table, syntax, interrupted): its first line."""

    http_status = 400


# Table functions that compute or describe the catalog, nothing more: any other (checkpoint, force_checkpoint,
# query() running SQL of its own, the file readers read_csv/read_parquet/read_json/read_text/read_blob/glob/...,
# an extension's) is refused. An allowlist, so one a later DuckDB adds is refused too. `SET
# enable_external_access = false` would stop the file readers, but it is global to the database instance and
# cannot be turned back on: it would hold for the client's own connection (and an application's `client.sql`).
READ_ONLY_TABLE_FUNCTIONS = frozenset(
    {
        "range", "generate_series", "unnest", "repeat", "repeat_row", "json_each", "json_tree", "summary",
        "pg_timezone_names", "icu_calendar_names", "pragma_table_info", "pragma_database_size",
        "pragma_storage_info", "pragma_version", "pragma_show", "pragma_platform", "pragma_collations",
        "duckdb_columns", "duckdb_constraints", "duckdb_databases", "duckdb_dependencies", "duckdb_extensions",
        "duckdb_functions", "duckdb_indexes", "duckdb_keywords", "duckdb_memory", "duckdb_optimizers",
        "duckdb_schemas", "duckdb_sequences", "duckdb_settings", "duckdb_tables", "duckdb_temporary_files",
        "duckdb_types", "duckdb_views",
    }
)  # fmt: skip
_READ_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "CTE_NODE", "RECURSIVE_CTE_NODE"})
# A table name DuckDB would read as a file or URL when no table has it (a replacement scan: FROM 'x.csv').
# Store names have none of these characters.
_FILE_LIKE = re.compile(r"[./\\:*?~]")
ALLOWED = "only read-only queries run here (a SELECT, or EXPLAIN of one)"


_parsers: queue.SimpleQueue[duckdb.DuckDBPyConnection] = queue.SimpleQueue()


@contextlib.contextmanager
def _parser() -> Iterator[duckdb.DuckDBPyConnection]:
    """A scratch in-memory connection this request alone parses on (the module's default connection is shared by
    every thread); kept for a later request, as opening one costs 40 ms."""
    try:
        parser = _parsers.get_nowait()
    except queue.Empty:
        parser = duckdb.connect(":memory:")
    try:
        yield parser
    finally:
        _parsers.put(parser)


def _statements(parser: duckdb.DuckDBPyConnection, sql: str) -> list[duckdb.Statement]:
    try:
        return parser.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryFailed(_first_line(exc)) from None


def _explained(query: str) -> str:
    """What `EXPLAIN [ANALYZE] <query>` explains (ANALYZE runs it, so it is checked as a query of its own)."""
    tokens = [t for t in duckdb.tokenize(query) if t[1] != duckdb.token_type.comment][1:]  # past EXPLAIN
    if tokens and query[tokens[0][0] :].split(None, 1)[0].upper() == "ANALYZE":
        tokens = tokens[1:]
    return query[tokens[0][0] :] if tokens else ""


def _unsafe(node: Any) -> Iterator[str]:
    """What in DuckDB's parse tree (`json_serialize_sql`) does more than read the client's tables: a query node
    that is not a SELECT (a CTE `AS (DELETE ... RETURNING *)`), a table function not known to be read-only, a
    table name read as a file."""
    if isinstance(node, list):
        for item in node:
            yield from _unsafe(item)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if isinstance(kind, str) and kind.endswith("_NODE") and kind not in _READ_NODES:
        yield f"{kind.removesuffix('_NODE').removesuffix('_QUERY')} inside the query refused: {ALLOWED}"
    elif kind == "TABLE_FUNCTION":
        name = str(node.get("function", {}).get("function_name", "")).lower()
        if name not in READ_ONLY_TABLE_FUNCTIONS:
            yield (
                f"table function {name}() refused: only table functions that neither write nor read files run "
                "here (range, generate_series, unnest, duckdb_tables(), ...)"
            )
    elif kind == "BASE_TABLE" and _FILE_LIKE.search(str(node.get("table_name", ""))):
        yield f"reading {node['table_name']!r} as a file refused: only the client's tables and views are queried here"
    for value in node.values():
        yield from _unsafe(value)


def _check_select(parser: duckdb.DuckDBPyConnection, query: str, refusal: str) -> None:
    """`query` must be one SELECT whose parse tree holds nothing `_unsafe`; else `refusal` (or what is unsafe)."""
    statements = _statements(parser, query)
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        raise QueryRefused(refusal)
    (serialized,) = parser.execute("SELECT json_serialize_sql(?)", [statements[0].query]).fetchone() or ("{}",)
    tree = json.loads(serialized)
    if tree.get("error"):  # e.g. a PIVOT inside a SELECT: what cannot be checked is not run
        raise QueryRefused(f"query refused: DuckDB cannot show what it does ({tree.get('error_message')})")
    problem = next(_unsafe(tree.get("statements")), None)
    if problem is not None:
        raise QueryRefused(problem)


def check(sql: str) -> None:
    """`sql` must be one read-only statement: a SELECT (SHOW, DESCRIBE, SUMMARIZE and `FROM t` parse as one) or
    an EXPLAIN of one, whose CTEs and subqueries are SELECTs and whose table functions only compute (`_unsafe`);
    anything else is `QueryRefused` naming it, a syntax error `QueryFailed`. Whatever would still write fails in
    `run`'s READ ONLY transaction: the second line of defence."""
    with _parser() as parser:
        statements = _statements(parser, sql)
        if not statements:
            raise QueryRefused("no SQL statement given")
        if len(statements) > 1:
            raise QueryRefused(f"one read-only statement at a time, got {len(statements)} statements")
        statement = statements[0]
        refusal = f"{statement.type.name} refused: {ALLOWED}"
        if statement.type == duckdb.StatementType.EXPLAIN:
            _check_select(parser, _explained(statement.query), refusal)
        else:
            _check_select(parser, statement.query, refusal)


def _fetch(
    cursor: duckdb.DuckDBPyConnection, max_rows: int | None, max_bytes: int | None
) -> tuple[list[str], str | None]:
    """The result's rows as JSON texts, at most `max_rows` of them and `max_bytes` in all, fetched a chunk at a
    time (never the whole result in memory); and why it stopped early ("rows", "bytes"), or None."""
    texts: list[str] = []
    size = 0
    while True:
        want = FETCH_CHUNK if max_rows is None else min(FETCH_CHUNK, max_rows + 1 - len(texts))
        chunk = cursor.fetchmany(want)
        if not chunk:
            return texts, None
        for row in chunk:
            if max_rows is not None and len(texts) == max_rows:  # the one row more: there are more
                return texts, "rows"
            # DuckDB's dates, decimals, blobs as the client's JSON columns are: text (blobs in hex).
            text = json.dumps(row, default=json_default)
            size += len(text) + 1  # ASCII (json.dumps escapes the rest): characters are bytes
            if max_bytes is not None and size > max_bytes:
                return texts, "bytes"
            texts.append(text)


def _execute(
    cursor: duckdb.DuckDBPyConnection, sql: str, timeout: float | None, max_rows: int | None, max_bytes: int | None
) -> tuple[list[str], list[str], str | None]:
    check(sql)
    timer = threading.Timer(timeout, cursor.interrupt) if timeout else None
    try:
        cursor.execute("BEGIN TRANSACTION READ ONLY")
        try:
            if timer is not None:
                timer.start()
            cursor.execute(sql)
            columns = [d[0] for d in cursor.description or []]
            texts, truncated = _fetch(cursor, max_rows, max_bytes)
        finally:
            if timer is not None:
                timer.cancel()
            cursor.execute("ROLLBACK")
    except duckdb.InterruptException:
        raise QueryFailed(f"query interrupted after {timeout or 0:.0f}s") from None
    except duckdb.Error as exc:
        raise QueryFailed(_first_line(exc)) from None
    return columns, texts, truncated


def run(
    cursor: duckdb.DuckDBPyConnection,
    sql: str,
    timeout: float | None = None,
    max_rows: int | None = None,
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """Check `sql`, then run it in a read-only transaction on `cursor` (a snapshot of committed transactions: a
    client's half-applied batch is never seen, and nothing can be written even by a function a SELECT calls),
    interrupted after `timeout` seconds. Returns `{"columns": [...], "rows": [[...], ...], "truncated": ...}` of
    JSON values: at most `max_rows` rows and `max_bytes` of them as JSON, `truncated` saying which limit cut them
    ("rows", "bytes"; None: every row)."""
    return cast(dict[str, Any], json.loads(run_json(cursor, sql, timeout, max_rows, max_bytes)))


def run_json(
    cursor: duckdb.DuckDBPyConnection,
    sql: str,
    timeout: float | None = None,
    max_rows: int | None = None,
    max_bytes: int | None = None,
) -> str:
    """`run`'s result as JSON text, its rows never held as Python values (the endpoint's reply)."""
    columns, texts, truncated = _execute(cursor, sql, timeout, max_rows, max_bytes)
    return f'{{"columns": {json.dumps(columns)}, "truncated": {json.dumps(truncated)}, "rows": [{",".join(texts)}]}}'


def query_file(path: Path, sql: str, max_rows: int | None = None) -> dict[str, Any]:
    """`run` on the DuckDB file opened read-only: for when no client runs on it."""
    check(sql)  # refused without opening anything
    if not path.is_file():
        raise ConfigError(f"no DuckDB file {path}")
    held = (
        "by a process that serves no SQL endpoint (a Da Vinci client inside an application, a DuckDB shell): "
        "query it there"
    )
    with connect_file(path, read_only=True, when_held=held) as con:
        return run(con, sql, max_rows=max_rows)


def _first_line(exc: BaseException) -> str:
    """DuckDB's message without its hints and caret lines: one line."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


__all__ = ["READ_ONLY_TABLE_FUNCTIONS", "QueryFailed", "QueryRefused", "check", "query_file", "run", "run_json"]
