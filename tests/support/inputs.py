"""A push's input as tests write it and the records a region must serve after it: Parquet files of the example user
schema, read back into `{key: value record}`."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def expected_records(path: Path) -> dict[str, dict]:
    """The records an input folder (or file) holds, by key: what every region serves after pushing it."""
    table = pq.read_table(path).to_pylist()
    return {row.pop("key"): row for row in table}


def write_rows(path: Path, rows: list[dict]) -> Path:
    """A one-file Parquet input of `rows` in the folder `path`."""
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path / "part-0.parquet")
    return path
