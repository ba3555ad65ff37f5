"""A query's result (column names, rows of JSON values) as the CLI prints it: an aligned table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from venice_core.errors import ConfigError


def _text(value: Any, null: str) -> str:
    if value is None:
        return null
    if isinstance(value, (list, dict)):  # DuckDB's LIST, STRUCT, MAP
        return json.dumps(value)
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def truncation_note(count: int, truncated: str | None) -> str | None:
    """What a result cut short says (the table's last line; on stderr beside JSON or CSV); None if it is whole."""
    if truncated == "rows":
        return f"(first {count} row{'' if count == 1 else 's'}; --max-rows to see more)"
    if truncated == "bytes":
        return f"(first {count} row{'' if count == 1 else 's'}: the reply's size limit; select fewer rows or columns)"
    return None


def as_table(columns: list[str], rows: list[list[Any]], note: str | None = None) -> str:
    """Columns padded to their widest cell, numbers to the right; NULL for a null; the row count last (or `note`,
    `truncation_note`'s)."""
    cells = [[_text(v, "NULL") for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    numeric = [bool(rows) and all(_is_number(r[i]) for r in rows if r[i] is not None) for i in range(len(columns))]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if right else v.ljust(w) for v, w, right in zip(values, widths, numeric, strict=True)
        ).rstrip()

    out = [line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)]
    out.append(note or f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out)


def as_json(columns: list[str], rows: list[list[Any]]) -> str:
    """A list of objects, one per row. Duplicate column names are refused (an object keeps one of them): renaming
    them would print names the query never gave."""
    duplicates = sorted({c for c in columns if columns.count(c) > 1})
    if duplicates:
        raise ConfigError(
            f"--json needs distinct column names, and {', '.join(map(repr, duplicates))} appear more than once: "
            "give the columns aliases (AS), or print a table or --csv"
        )
    return json.dumps([dict(zip(columns, row, strict=True)) for row in rows], indent=2)


def as_csv(columns: list[str], rows: list[list[Any]]) -> str:
    """A header line, then the rows; a null is an empty field."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_text(v, "") for v in row] for row in rows)
    return buffer.getvalue().rstrip("\n")
