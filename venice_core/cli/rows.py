"""A query's result (column names, rows of JSON values) as the CLI prints it: an aligned table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
from typing import Any


def _text(value: Any, null: str) -> str:
    if value is None:
        return null
    if isinstance(value, (list, dict)):  # DuckDB's LIST, STRUCT, MAP
        return json.dumps(value)
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def as_table(columns: list[str], rows: list[list[Any]]) -> str:
    """Columns padded to their widest cell, numbers to the right; NULL for a null; the row count last."""
    cells = [[_text(v, "NULL") for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    numeric = [bool(rows) and all(_is_number(r[i]) for r in rows if r[i] is not None) for i in range(len(columns))]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if right else v.ljust(w) for v, w, right in zip(values, widths, numeric, strict=True)
        ).rstrip()

    out = [line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)]
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out)


def as_json(columns: list[str], rows: list[list[Any]]) -> str:
    """A list of objects, one per row."""
    return json.dumps([dict(zip(columns, row, strict=True)) for row in rows], indent=2)


def as_csv(columns: list[str], rows: list[list[Any]]) -> str:
    """A header line, then the rows; a null is an empty field."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_text(v, "") for v in row] for row in rows)
    return buffer.getvalue().rstrip("\n")
