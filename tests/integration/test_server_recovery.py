"""A region server killed with SIGKILL mid-ingestion resumes from its checkpoint and ends with exactly the data.

The test drives the version's writes itself, so "mid-ingestion" is an event rather than a race: half of every
partition is written, dc-1 checkpoints it, dc-1 is killed, the other half and END_OF_PUSH are written while it is
down, and it is started again."""

from __future__ import annotations

import re

from tests.support.ingestion import read_checkpoint, wait_for_ingestion
from tests.support.platform import PlatformEnv
from tests.support.reads import wait_for
from tests.support.topics import read_partition, through_end_of_push
from venice_core.client import ReadClient
from venice_core.client.serving import wait_until_served
from venice_core.controller import stores, versions
from venice_core.embedded import servers
from venice_core.model.status import ExecutionStatus, VersionStatus
from venice_core.protocol import serde
from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.partitioner import partition_for
from venice_core.pubsub.control import send_end_of_push, send_start_of_push
from venice_core.pubsub.writer import VersionTopicWriter

PARTITIONS = 2
RECORDS = 20_000


def test_sigkill_mid_ingestion_resumes_with_exact_data(platform_env: PlatformEnv) -> None:
    config, meta = platform_env.config, platform_env.meta
    store = platform_env.create_user_store("crash", PARTITIONS)
    info = stores.describe_store(meta, store)
    key_schema, value_schema = serde.parse(info.key_schema), serde.parse(info.value_schemas[0].schema)
    expected = {f"user-{i:06d}": {"name": f"n{i}", "age": i % 90, "score": i / 4} for i in range(RECORDS)}
    rows: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
    for key, value in expected.items():
        key_bytes = serde.serialize(key_schema, key)
        rows[partition_for(key_bytes, PARTITIONS)].append((key_bytes, serde.serialize(value_schema, value)))

    job = "crash-job"
    versions.create_version(meta, config, store, job)
    send_start_of_push(config, store, 1, PARTITIONS, job, CompressionStrategy.NO_OP)
    source = config.region(config.source_region)
    writers = [
        VersionTopicWriter(
            source.kafka_bootstrap, source.version_topic(store, 1), PARTITIONS, deterministic_guid(job, 1, p)
        )
        for p in range(PARTITIONS)
    ]
    halves = {p: len(rows[p]) // 2 for p in range(PARTITIONS)}
    for p, writer in enumerate(writers):
        writer.start_segment(p)
        for key_bytes, value_bytes in sorted(rows[p])[: halves[p]]:
            writer.put(key_bytes, value_bytes, 1, partition=p)
        writer.flush()

    dc1 = config.data_dir / "regions" / "dc-1" / f"{store}_v1"
    checkpoints = lambda: [read_checkpoint(dc1 / f"p{p}") for p in range(PARTITIONS)]  # noqa: E731
    wait_for(
        "dc-1 checkpointing the first half of every partition",
        lambda: all(c and c.records == halves[p] for p, c in enumerate(checkpoints())),
        timeout=300,
        interval=0.1,
    )
    log_before = servers.process(config, "dc-1").log_file.read_text()
    servers.process(config, "dc-1").kill()

    for p, writer in enumerate(writers):
        for key_bytes, value_bytes in sorted(rows[p])[halves[p] :]:
            writer.put(key_bytes, value_bytes, 1, partition=p)
        writer.end_segment(p)
        writer.flush()
    send_end_of_push(config, store, 1, PARTITIONS, job, {str(p): len(rows[p]) for p in range(PARTITIONS)})
    servers.start(config, "dc-1")
    wait_for_ingestion(meta, store, 1, config.region_names, progress=lambda _line: None, timeout=300)

    log_after = servers.process(config, "dc-1").log_file.read_text()[len(log_before) :]
    topic = re.escape(config.region("dc-1").version_topic(store, 1))
    resumed = [int(m) for m in re.findall(rf"resuming {topic}\[\d+\] from its checkpoint at offset (\d+)", log_after)]
    assert len(resumed) == PARTITIONS and min(resumed) > 0, "the restarted server did not resume from checkpoints"

    versions.set_version_status(meta, store, 1, VersionStatus.PUSHED)
    versions.swap_region(meta, store, "dc-1", 1)
    wait_until_served(config, store, 1, ["dc-1"])
    client = ReadClient("127.0.0.1", config.server_port("dc-1"))
    keys = sorted(expected)
    got = {}
    for start in range(0, len(keys), 1000):
        got.update(client.batch_get(store, keys[start : start + 1000]))
    assert got == expected
    progress = [p for p in versions.partition_progress(meta, store, 1) if p.region == "dc-1"]
    assert all(p.status == ExecutionStatus.COMPLETED.value for p in progress)
    assert sum(p.records for p in progress) == len(expected)  # no record counted twice
    # dc-1 led its partitions: its own version topic is the source's, record for record, none lost. The restarted
    # leader copied again what followed its last recorded progress: exact copies, which DIV drops as duplicates.
    for p in range(PARTITIONS):
        mirrored = read_partition(config.kafka.bootstrap, config.region("dc-1").version_topic(store, 1), p)
        assert list(dict.fromkeys(mirrored)) == through_end_of_push(
            read_partition(config.kafka.bootstrap, source.version_topic(store, 1), p)
        )
