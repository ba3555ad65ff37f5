"""A ZSTD_WITH_DICT store on the session's platform (a real broker, three region servers, the push and repush jobs'
own code on the session's SparkSession): a push trains a dictionary from its input (START_OF_PUSH carries it, every
region serves it), the values are stored compressed with it, every reader decompresses them (the routing client
itself, a plain GET through the server, Da Vinci clients of both backends), and a repush trains a new dictionary
from its source version and re-compresses every value with it. A bad bound or an input the platform cannot sample
is one error before anything is created."""

from __future__ import annotations

import base64
import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import zstandard

from scripts.generate_dataset import generate
from tests.support.inputs import expected_records
from tests.support.platform import SCHEMAS, PlatformEnv
from tests.support.reads import holds, reads_equal, wait_for
from tests.support.topics import read_partition
from venice_core.client import ReadClient
from venice_core.controller import stores
from venice_core.davinci import DaVinciClient, DuckDBRecordTransformer
from venice_core.nearline.writer import OnlineWriter
from venice_core.protocol import serde
from venice_core.protocol.compression import CompressionStrategy, decompressor
from venice_core.pubsub.control import read_dictionary
from venice_core.rollout import local
from venice_core.spark.tasks.repush_tasks import PUT, decode_message

WITH_DICT = CompressionStrategy.ZSTD_WITH_DICT


def _stored_values(env: PlatformEnv, store: str, number: int) -> dict[bytes, bytes]:
    """Each key's last value in the version's topic in the source region, as it is stored (the push's, and the
    nearline writes its leaders applied after END_OF_PUSH), by serialised key."""
    source = env.config.region(env.config.source_region)
    stored = {}
    for partition in (0, 1):
        for key, value in read_partition(source.kafka_bootstrap, source.version_topic(store, number), partition):
            decoded = decode_message(key, value)
            if decoded is not None and decoded[1] == PUT:
                stored[decoded[0]] = decoded[4]
    return stored


def _read_all(client: ReadClient, store: str, keys: list[str]) -> dict[str, Any]:
    """Batch gets of 1000 keys, the servers' limit."""
    return {
        k: v
        for start in range(0, len(keys), 1000)
        for k, v in client.batch_get(store, keys[start : start + 1000]).items()
    }


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[bytes, Any]:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as response:
        return response.read(), response.headers


def test_a_zstd_with_dict_push_and_repush_train_dictionaries_that_every_reader_uses(
    platform_env: PlatformEnv, spark_job: Any, tmp_path: Path
) -> None:
    env = platform_env
    config, meta = env.config, env.meta
    store = f"zdict_{uuid.uuid4().hex[:8]}"
    env.cli(
        "store", "create", store, "--key-schema", str(SCHEMAS / "user_key.avsc"),
        "--value-schema", str(SCHEMAS / "user_value_v1.avsc"), "--partitions", "2", "--compression", "ZSTD_WITH_DICT",
        check=True,
    )  # fmt: skip
    assert "compression:          ZSTD_WITH_DICT" in env.cli("store", "show", store, check=True).stdout
    # Hybrid: the region servers' leaders (and Da Vinci clients) store nearline writes with the dictionary too.
    env.cli(
        "store", "update", store, "--hybrid-rewind-seconds", "3600", "--hybrid-offset-lag-threshold", "0", check=True
    )
    data = generate(tmp_path / "v1", 3000, files=2)
    expected = expected_records(data)

    # A bad bound, and input only Spark could read: one error line each, before anything is created.
    for command, error in [
        (
            ["push", store, "--input", str(data), "--conf", "compression.dictionary.sample.size=0"],
            "compression.dictionary.sample.size must be between 1 and 1073741824 bytes, got 0",
        ),
        (
            ["repush", store, "--conf", "compression.dictionary.size.limit=32KB"],
            "compression.dictionary.size.limit must be a whole number of bytes, got '32KB'",
        ),
    ]:
        refused = env.cli(*command, "--local")
        assert (refused.returncode, refused.stderr) == (2, f"error: {error}\n")
    refused = env.cli("push", store, "--input", "hdfs://data/users", "--local")
    assert refused.returncode == 1 and refused.stderr.startswith(
        "error: a ZSTD_WITH_DICT store's push trains its dictionary from the input before the version is created, "
        "and input hdfs://data/users is a URL only the Spark job reads"
    ), refused.stderr
    assert stores.describe_store(meta, store).versions == ()

    lines: list[str] = []
    confs = {"compression.dictionary.size.limit": "4096"}
    assert env.push(store, spark_job, data, progress=lines.append, confs=confs) == 1
    assert any("-byte ZSTD dictionary from 3000 values" in line and f"input {data}" in line for line in lines), lines

    # START_OF_PUSH carries the dictionary; every region serves it.
    source = config.region(config.source_region)
    first = read_dictionary(source.kafka_bootstrap, source.version_topic(store, 1))
    assert first is not None and 256 <= len(first) <= 4096
    for region in config.region_names:
        assert _get(f"http://127.0.0.1:{config.server_port(region)}/dictionary/{store}/1")[0] == first

    # The values are stored compressed with it: as the topic holds them, and as a region's RocksDB answers a reader
    # that decompresses itself; they decompress with the dictionary, not without.
    info = stores.describe_store(meta, store)
    key_schema, value_schema = serde.parse(info.key_schema), serde.parse(info.value_schemas[0].schema)
    stored = _stored_values(env, store, 1)
    assert {serde.deserialize(key_schema, k): decompressor(WITH_DICT, first)(v) for k, v in stored.items()} == {
        k: serde.serialize(value_schema, v) for k, v in expected.items()
    }
    with pytest.raises(zstandard.ZstdError, match="Dictionary mismatch"):
        zstandard.ZstdDecompressor().decompress(next(iter(stored.values())))
    key = sorted(expected)[7]
    url = f"http://127.0.0.1:{config.server_port('dc-2')}/storage/{store}/"
    url += base64.urlsafe_b64encode(serde.serialize(key_schema, key)).decode().rstrip("=")
    compressed, headers = _get(url, {"X-Venice-Supported-Compression-Strategy": "3"})
    assert (headers["X-Venice-Compression-Strategy"], headers["X-Venice-Version"]) == ("3", "1")
    assert decompressor(WITH_DICT, first)(compressed) == serde.serialize(value_schema, expected[key])
    plain, headers = _get(url)  # a reader that does not say it decompresses (curl): the value itself
    assert plain == serde.serialize(value_schema, expected[key]) and "X-Venice-Compression-Strategy" not in headers
    body = json.dumps({"keys": [url.rsplit("/", 1)[1]]}).encode()  # curl's batch get, in JSON
    request = urllib.request.Request(url.rsplit("/", 1)[0], data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        ((schema_id, value),) = json.loads(response.read())["values"]
    assert base64.b64decode(value) == serde.serialize(value_schema, expected[key]) and schema_id == 1

    # Nearline writes, compressed by each region with the version's dictionary when applied.
    keys = sorted(expected)
    nearline = {
        "nearline-1": {"name": "near", "age": 1, "score": 1.0},
        keys[0]: {"name": "new", "age": 2, "score": 2.0},
    }
    writer = OnlineWriter(store, "dc-1", config=config, meta=meta)
    try:
        for k, v in nearline.items():
            writer.put(k, v)
        writer.flush()
    finally:
        writer.close()
    expected |= nearline
    keys = sorted(expected)
    wait_for("nearline writes read in every region", reads_equal(env, store, nearline), 90, 0.1)
    near = _stored_values(env, store, 1)[serde.serialize(key_schema, "nearline-1")]  # as dc-0's leader wrote it on
    assert decompressor(WITH_DICT, first)(near) == serde.serialize(value_schema, nearline["nearline-1"])
    with pytest.raises(zstandard.ZstdError, match="Dictionary mismatch"):
        zstandard.ZstdDecompressor().decompress(near)

    # The routing client of every region decompresses them itself, with the version's dictionary fetched once.
    for region in config.region_names:
        client = ReadClient.for_region(config, region)
        assert _read_all(client, store, keys) == expected
        assert client.get(store, key) == expected[key] and client.get(store, "no-such-key") is None
        assert client._dictionaries.cached(store) == [1]

    # Da Vinci clients of both backends read them (each fetches the dictionary from its region).
    duck = DaVinciClient(
        store, "dc-1", tmp_path / "duck", DuckDBRecordTransformer(tmp_path / "d.duckdb"), config=config
    )
    rocks = DaVinciClient(store, "dc-2", tmp_path / "rocks", config=config)
    picked = [*keys[::97], *nearline]
    for client in (duck, rocks):
        client.start(timeout=120)
        try:
            wait_for(
                "Da Vinci",
                holds(lambda c=client: {k: c.get(k) for k in picked} == {k: expected[k] for k in picked}),
                90,
                0.1,
            )
        finally:
            client.close()

    # A repush trains a new dictionary from its source version (decompressed with the first) and re-compresses.
    lines.clear()
    assert local.repush(config, meta, store, {}, progress=lines.append, run_job=spark_job) == 2
    trained = [line for line in lines if "-byte ZSTD dictionary from" in line]
    assert len(trained) == 1 and f"{store}_v1 in" in trained[0], lines  # of the source version's topic
    second = read_dictionary(source.kafka_bootstrap, source.version_topic(store, 2))
    assert second is not None and second != first and len(second) > 4096  # the default bound, not the push's
    stored = _stored_values(env, store, 2)
    assert {serde.deserialize(key_schema, k): decompressor(WITH_DICT, second)(v) for k, v in stored.items()} == {
        k: serde.serialize(value_schema, v) for k, v in expected.items()
    }
    with pytest.raises(zstandard.ZstdError, match="Dictionary mismatch"):
        decompressor(WITH_DICT, first)(next(iter(stored.values())))
    assert env.serving(store) == dict.fromkeys(config.region_names, 2)
    for region in config.region_names:
        client = ReadClient.for_region(config, region)
        assert _read_all(client, store, keys) == expected
        assert client._dictionaries.cached(store) == [2]
