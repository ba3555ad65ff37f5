"""One root error type. Each subclass carries an HTTP status and an exit code, so the CLI and the servers report
alike, and whether running the step that raised it again could change the outcome (`retryable`: an orchestrator
retries a step that failed with a retryable error, and ends the push at once on any other)."""

from __future__ import annotations


class VeniceError(Exception):
    """Base of every error the platform reports to a user: one clear line, non-zero exit."""

    http_status: int = 500
    exit_code: int = 1
    retryable: bool = True  # False: decided, refused or broken for good; running the step again changes nothing


class ConfigError(VeniceError):
    http_status = 400
    exit_code = 2
    retryable = False


class InvalidName(ConfigError):
    """A store or pipeline name that breaks the naming rule (`controller.stores.check_name`)."""


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
    retryable = False


class IncompatibleSchema(VeniceError):
    http_status = 409
    retryable = False


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


class PushJobError(VeniceError):
    """The input or the store refuses the push (raised on the Spark job's driver or, inside a Spark error, on an
    executor)."""

    retryable = False


class RepushRefused(VeniceError):
    """A repush that cannot start: said before anything is created."""

    http_status = 400
    retryable = False


class RolloutStopped(VeniceError):
    """A hook answered ABORT or ROLLBACK: the push did not roll out everywhere (by an operator's decision)."""

    exit_code = 3
    retryable = False


class IngestionFailed(VeniceError):
    """A region's ingestion of a version failed (its status is ERROR)."""

    retryable = False


class DrainFailed(VeniceError):
    """A streaming pipeline's drain failed or timed out: it was stopped without its drain completing."""

    exit_code = 3
