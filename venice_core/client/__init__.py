"""Read clients: the thin HTTP client of a region (`ReadClient`)."""

from venice_core.client.thin import ReadClient

__all__ = ["ReadClient"]
