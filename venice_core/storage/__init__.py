"""Region storage: one RocksDB per store-version partition, holding its data and its ingestion checkpoint."""
