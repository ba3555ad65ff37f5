"""Lifecycle operations: the one place that changes the metadata store's state."""
