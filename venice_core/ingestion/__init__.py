"""The ingestion engine: one task per store-version partition (consume, validate, store, checkpoint, report)."""
