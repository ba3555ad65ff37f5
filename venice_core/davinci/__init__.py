"""Da Vinci: a store's full copy inside an application process (`DaVinciClient`), in RocksDB or DuckDB."""

from venice_core.davinci.client import DaVinciClient
from venice_core.davinci.duckdb_store import DuckDBRecordTransformer, RecordTransformer

__all__ = ["DaVinciClient", "DuckDBRecordTransformer", "RecordTransformer"]
