"""The push job's edges: how a push's configs (`venice push --conf`) reach it on both paths, and which of its
failures are refusals (not worth a retry); and the executors' serialisation of input rows."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from venice_core.controller.stores import SchemaRefused
from venice_core.errors import ComponentError, ConfigError, IncompatibleSchema, MetadataStoreError, PushJobError
from venice_core.protocol import envelope, serde
from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.partitioner import partition_for
from venice_core.spark.jobs.push import _refusal
from venice_core.spark.specs.task_specs import PushTaskSpec, WriterSpec
from venice_core.spark.submit import job_flags, spark_confs
from venice_core.spark.tasks.push_tasks import serialize_batches


def test_spark_properties_and_fault_injections_go_to_spark() -> None:
    confs = {
        "spark.executor.memory": "1g",
        "venice.push.test.fail.partition": "1",
        "allow.duplicate.key": "true",
    }
    assert spark_confs(confs) == {"spark.executor.memory": "1g", "spark.venice.push.test.fail.partition": "1"}


def test_allow_flags_become_job_flags_when_true_and_anything_but_true_or_false_is_refused() -> None:
    assert job_flags({"allow.duplicate.key": "TRUE", "allow.empty.input": "true"}) == [
        "--allow-duplicate-key",
        "--allow-empty",
    ]
    assert job_flags({"allow.duplicate.key": "false", "spark.x": "true"}) == []
    with pytest.raises(ConfigError, match=r"^allow.empty.input must be true or false, got 'yes'$"):
        job_flags({"allow.empty.input": "yes"})  # not read as false: the push would run without it


@pytest.mark.parametrize(
    ("error", "refusal"),
    [
        (PushJobError("input has no key field 'key'"), "input has no key field 'key'"),
        (IncompatibleSchema("field 'age' changed type"), "field 'age' changed type"),
        (SchemaRefused("refused at pre_schema_registration: frozen"), "refused at pre_schema_registration: frozen"),
        (
            RuntimeError(
                "An error occurred while calling o81.\nPushJobError: duplicate key with different values\n  at"
            ),
            "duplicate key with different values",
        ),
        (ComponentError("Kafka broker at 127.0.0.1:1 is unreachable"), None),
        (MetadataStoreError("database is locked"), None),
        (RuntimeError("Python worker exited unexpectedly"), None),
    ],
)
def test_input_errors_are_refusals_and_unreachable_components_are_not(error: Exception, refusal: str | None) -> None:
    assert _refusal(error) == refusal


def test_serialised_rows_and_a_key_or_value_that_does_not_match_its_schema() -> None:
    """The executors' serialisation (`serialize_batches`): each row's key and value in Avro, with its Kafka partition;
    a key or a value the schemas cannot hold is refused with the key and the schema named."""
    value_schema = {"type": "record", "name": "V", "fields": [{"name": "age", "type": "int"}]}
    spec = PushTaskSpec(
        writer=WriterSpec("job", 1, "", "topic_v1", 4, CompressionStrategy.NO_OP),
        schema_id=1,
        key_schema="string",
        value_schema=value_schema,
        key_field="key",
        value_field="value",
        single_value=False,
    )
    batch = pa.RecordBatch.from_pylist([{"key": "a", "age": 1}, {"key": "b", "age": 2}])
    (out,) = serialize_batches(iter([batch]), spec)
    keys = [serde.serialize("string", k) for k in ("a", "b")]
    assert out.column("key").to_pylist() == keys
    assert out.column("value").to_pylist() == [serde.serialize(serde.parse(value_schema), {"age": a}) for a in (1, 2)]
    assert out.column("partition").to_pylist() == [partition_for(k, 4) for k in keys]
    with pytest.raises(PushJobError, match="key 7 does not match the key schema"):
        list(serialize_batches(iter([pa.RecordBatch.from_pylist([{"key": 7, "age": 1}])]), spec))
    with pytest.raises(PushJobError, match="value of key 'a' does not match value schema 1"):
        list(serialize_batches(iter([pa.RecordBatch.from_pylist([{"key": "a", "age": "x"}])]), spec))


class _RecordingProducer:
    """Stands in for confluent-kafka's Producer: this unit checks the messages the job's writer sends, not Kafka."""

    sent: list[tuple[int, bytes, bytes]] = []

    def produce(self, _topic: str, value: bytes, key: bytes, partition: int) -> None:
        self.sent.append((partition, key, value))

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        return 0


@pytest.mark.parametrize("compression", [CompressionStrategy.NO_OP, CompressionStrategy.GZIP])
def test_a_batch_is_written_as_each_of_its_records_would_be(monkeypatch: pytest.MonkeyPatch, compression) -> None:
    """`PartitionWriter.write_batch` (runs of a partition through `put_run`) sends what `write` of each record does:
    across partitions and batches, with an identical repeated key dropped and a value to chunk, and the same
    counts; a repeated key with another value is refused by both."""
    from venice_core.pubsub import writer as writer_module
    from venice_core.spark.tasks import push_tasks

    monkeypatch.setattr(writer_module, "Producer", lambda _config: _RecordingProducer())
    monkeypatch.setattr(envelope.time, "time", lambda: 1_700_000_000.0)  # control messages stamped alike
    rows = [(p, f"k{p}-{n:03d}".encode(), b"v" * (n % 40)) for p in (0, 1, 3) for n in range(50)]
    rows.insert(10, rows[9])  # the same record twice: kept once
    large = random.Random(7).randbytes(writer_module.chunking.DEFAULT_MAX_CHUNK_BYTES + 1)  # chunked, compressed or not
    rows.insert(60, (1, b"k1-zzz", large))
    rows.sort()
    schema = pa.schema([("partition", pa.int32()), ("key", pa.binary()), ("value", pa.binary())])
    as_dicts = [{"partition": p, "key": k, "value": v} for p, k, v in rows]
    batches = [pa.RecordBatch.from_pylist(as_dicts[i : i + 37], schema=schema) for i in range(0, len(rows), 37)]
    spec = WriterSpec("job", 1, "", "topic_v1", 4, compression)
    sent = []
    for by_batches in (False, True):
        _RecordingProducer.sent = []
        writer = push_tasks.PartitionWriter(spec, first_attempt=True)
        for batch in batches:
            if by_batches:
                writer.write_batch(batch, 2, allow_duplicate_key=False)
            else:
                for p, k, v in zip(*(batch.column(i).to_pylist() for i in range(3)), strict=True):
                    writer.write(p, k, v, 2, allow_duplicate_key=False)
        writer.finish()
        sent.append((_RecordingProducer.sent, writer.counts))
    assert sent[0] == sent[1]
    assert sent[1][1] == {0: 50, 1: 51, 3: 50}
    assert len(sent[1][0]) > 151 + 3 * 2  # the records, a segment's start and end in each partition, and chunks
    clash = pa.RecordBatch.from_pylist(
        [{"partition": 0, "key": b"a", "value": b"1"}, {"partition": 0, "key": b"a", "value": b"2"}],
        schema=batches[0].schema,
    )
    with pytest.raises(PushJobError, match="duplicate key with different values"):
        push_tasks.PartitionWriter(spec, first_attempt=True).write_batch(clash, 2, allow_duplicate_key=False)


def test_the_platforms_producer_compression_reaches_the_jobs_writers(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kafka.producer.compression` set in the config is what the push and repush jobs' writers produce with (the
    spec built on the driver, the writer on an executor); unset, lz4."""
    from types import SimpleNamespace

    from venice_core.config import load_config
    from venice_core.protocol.partitioner import DEFAULT_PARTITIONER
    from venice_core.pubsub import writer as writer_module
    from venice_core.spark.jobs.push import writer_spec
    from venice_core.spark.tasks import push_tasks

    configs: list[dict[str, object]] = []
    monkeypatch.setattr(writer_module, "Producer", lambda config: configs.append(config) or _RecordingProducer())
    spark = SimpleNamespace(conf=SimpleNamespace(get=lambda _key, default: default))
    args = SimpleNamespace(push_job_id="job", version=1, bootstrap="", topic="topic_v1")
    for setting, expected in ((None, "lz4"), ("zstd", "zstd"), ("none", "none")):
        monkeypatch.delenv("VENICE__KAFKA_PRODUCER_COMPRESSION", raising=False)
        if setting:
            monkeypatch.setenv("VENICE__KAFKA_PRODUCER_COMPRESSION", setting)
        producer_config = load_config().kafka.producer_config
        spec = writer_spec(spark, args, 4, CompressionStrategy.NO_OP, DEFAULT_PARTITIONER, None, producer_config)
        push_tasks.PartitionWriter(spec, first_attempt=True).write(0, b"k", b"v", 1, allow_duplicate_key=False)
        assert configs[-1]["compression.type"] == expected
    monkeypatch.setenv("VENICE__KAFKA_PRODUCER_COMPRESSION", "brotli")
    with pytest.raises(ConfigError, match="kafka.producer.compression"):
        load_config()
