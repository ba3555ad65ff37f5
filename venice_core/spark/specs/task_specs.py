"""What the push and repush jobs hand their Spark tasks: frozen and picklable (Spark ships them to the executors
inside the tasks' closures), importing nothing heavy (each Python worker imports this)."""

from __future__ import annotations

from dataclasses import dataclass

from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.partitioner import DEFAULT_PARTITIONER, VenicePartitioner
from venice_core.protocol.serde import AvroSchemaJson


@dataclass(frozen=True)
class WriterSpec:
    """Where a task writes and as whom: the new version's topic in the source region, with producer GUIDs derived
    from the push job (a retried task writes as the same producer)."""

    push_job_id: str
    version: int
    bootstrap: str
    topic: str
    partitions: int
    compression: CompressionStrategy  # what `PartitionWriter.write` compresses pushed values with
    dictionary: bytes | None = None  # a ZSTD_WITH_DICT version's, as its START_OF_PUSH carries it
    # Fault injection for the retry test: the first attempt at this partition fails after that many records (with
    # a stall file, the first task to get there of any attempt stalls there instead, to be killed: `stall`).
    fail_partition: int = -1
    fail_after: int = 0
    stall_file: str = ""
    # The version's partitioner, loaded on the driver from the allowed classes and shipped to the executors, which
    # import its class by name when they unpickle it (`venice_core`'s own travel in the job's package).
    partitioner: VenicePartitioner = DEFAULT_PARTITIONER
    producer_config: tuple[tuple[str, str], ...] = ()  # the platform's producer settings (`kafka.producer.*`)


@dataclass(frozen=True)
class PushTaskSpec:
    """The push job's tasks: serialise input rows with the store's schemas, then write them."""

    writer: WriterSpec
    schema_id: int
    key_schema: AvroSchemaJson
    value_schema: AvroSchemaJson
    key_field: str
    value_field: str
    single_value: bool  # the value is the input's `value_field` alone, else a record of every field but the key
    allow_duplicate_key: bool = False


@dataclass(frozen=True)
class SourceRange:
    """Offsets [start, end) of one partition of the topic a repush reads, fixed on the driver."""

    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class RepushTaskSpec:
    """The repush job's tasks: read (or decode) the source version's records, compact each key, write the survivors
    (values arrive compressed already: the writer's own compression is NO_OP)."""

    writer: WriterSpec
    source_topic: str
    source_bootstrap: str
    source_compression: CompressionStrategy
    target_compression: CompressionStrategy
    source_dictionary: bytes | None = None  # each ZSTD_WITH_DICT version's dictionary, from its START_OF_PUSH
    target_dictionary: bytes | None = None
    ttl_start_ms: int | None = None  # records written before it are dropped (None: no TTL)
    keep_tombstones: bool = False  # a hybrid (active-active) version keeps them: an older nearline write loses
    combiner: bool = False
    ranges: tuple[SourceRange, ...] = ()  # the map-only plan's: one task per range
