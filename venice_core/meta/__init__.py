"""The metadata store: SQLAlchemy models (`models`), the engine and migrations (`db`)."""

from venice_core.meta.db import MetadataStore

__all__ = ["MetadataStore"]
