"""Da Vinci: a store's full copy inside an application process (`DaVinciClient`), in RocksDB or DuckDB.

The names below load on first use, so a client's ingestion worker (`ingest_worker`), which imports only this
package's `batch`, starts without DuckDB (a second of imports)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from venice_core.davinci.client import DaVinciClient
    from venice_core.davinci.duckdb_store import DuckDBRecordTransformer, RecordTransformer

__all__ = ["DaVinciClient", "DuckDBRecordTransformer", "RecordTransformer"]


def __getattr__(name: str) -> Any:
    if name == "DaVinciClient":
        from venice_core.davinci.client import DaVinciClient

        return DaVinciClient
    if name in ("DuckDBRecordTransformer", "RecordTransformer"):
        from venice_core.davinci import duckdb_store

        return getattr(duckdb_store, name)
    raise AttributeError(f"module 'venice_core.davinci' has no attribute {name!r}")
