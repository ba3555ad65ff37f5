"""One root error type. Each subclass carries an HTTP status, so the CLI and the servers report alike."""

from __future__ import annotations


class VeniceError(Exception):
    """Base of every error the platform reports to a user: one clear line, non-zero exit."""

    http_status: int = 500
    exit_code: int = 1


class ConfigError(VeniceError):
    http_status = 400
    exit_code = 2


class InvalidStoreName(VeniceError):
    http_status = 400


class StoreNotFound(VeniceError):
    http_status = 404

    def __init__(self, store: str) -> None:
        super().__init__(f"unknown store '{store}'")
        self.store = store


class NoCurrentVersion(VeniceError):
    """A store that exists but serves no version in a region (none pushed yet, or its only one rolled back)."""

    http_status = 404


class StoreAlreadyExists(VeniceError):
    http_status = 409

    def __init__(self, store: str) -> None:
        super().__init__(f"store '{store}' already exists")
        self.store = store


class SchemaError(VeniceError):
    """A schema file that cannot be read or parsed as Avro."""

    http_status = 400


class IncompatibleSchema(VeniceError):
    http_status = 409


class MetadataStoreError(VeniceError):
    http_status = 503


class ComponentError(VeniceError):
    """A platform component (Kafka, a region server, Airflow) cannot start, stop or be reached."""

    http_status = 503


class MissingDependency(ComponentError):
    """A program the platform needs is not installed; the message names what to install."""


class NotHybridStore(VeniceError):
    """A nearline write to a store that takes none: only hybrid stores have real-time topics."""

    http_status = 409

    def __init__(self, store: str) -> None:
        super().__init__(
            f"store '{store}' is batch-only: make it hybrid with venice store update --hybrid-rewind-seconds N"
        )
        self.store = store


class InvalidRecord(VeniceError):
    """A key that does not fit the store's key schema, a value that fits none of its value schemas, or a bad write
    timestamp: refused before anything is produced."""

    http_status = 400


class StreamInputError(VeniceError):
    """Input a streaming pipeline cannot write as it is: a source topic that does not exist, an event that maps to
    no write. The pipeline fails with it as its cause; the batch it was found in is not written."""

    http_status = 400
