"""ZSTD_WITH_DICT's pieces that need no broker: zstd's trainer and its fallback, the compressors that need the
dictionary, the routing client's dictionaries (one fetch per version), and the sample of a push's input (spread over
the whole input, bounded, values serialised exactly as the push job serialises them) in each input format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from venice_core.client.dictionaries import Dictionaries
from venice_core.config import ClusterConfig
from venice_core.controller import stores
from venice_core.errors import ComponentError, PushJobError
from venice_core.meta import MetadataStore
from venice_core.protocol import serde
from venice_core.protocol.compression import CompressionStrategy, compressor, decompressor, train_dictionary
from venice_core.spark.inputs import input_sample

SCHEMAS = Path(__file__).parents[2] / "examples" / "schemas"
WITH_DICT = CompressionStrategy.ZSTD_WITH_DICT


def _value(i: int) -> dict[str, Any]:
    return {"name": f"row-{i:06d}-" + "abcdefgh" * (i % 5), "age": i % 90, "score": i / 4}


def test_a_trained_dictionary_is_bounded_and_its_values_need_it() -> None:
    schema = serde.parse(json.loads((SCHEMAS / "user_value_v1.avsc").read_text()))
    values = [serde.serialize(schema, _value(i)) for i in range(3000)]
    dictionary = train_dictionary(values, 2048)
    assert 0 < len(dictionary) <= 2048
    packed = [compressor(WITH_DICT, dictionary)(v) for v in values[:200]]
    plain = [compressor(CompressionStrategy.ZSTD)(v) for v in values[:200]]
    assert sum(map(len, packed)) < sum(map(len, plain))  # what the dictionary is for
    assert [decompressor(WITH_DICT, dictionary)(p) for p in packed] == values[:200]
    with pytest.raises(zstandard.ZstdError, match="Dictionary mismatch"):
        decompressor(CompressionStrategy.ZSTD)(packed[0])
    with pytest.raises(ValueError, match="need the version's compression dictionary"):
        compressor(WITH_DICT)
    # Too little to train on (zstd refuses it): the samples themselves are a raw-content dictionary.
    few = [b"name-1-xxxxxxxx", b"name-2-xxxxxxxx"]
    raw = train_dictionary(few, 1024)
    assert raw == b"".join(few)
    assert decompressor(WITH_DICT, raw)(compressor(WITH_DICT, raw)(b"name-3-xxxxxxxx")) == b"name-3-xxxxxxxx"


def test_the_client_fetches_each_versions_dictionary_once_and_keeps_the_newest() -> None:
    trained = {n: train_dictionary([f"value {n} {i}".encode() * 3 for i in range(200)], 512) for n in (1, 2, 3, 4)}
    fetched: list[str] = []

    def fetch(path: str) -> tuple[int, dict[str, str], bytes]:
        fetched.append(path)
        number = int(path.rsplit("/", 1)[1])
        return (200, {}, trained[number]) if number in trained else (404, {"X-Venice-Error": "no-dictionary"}, b"")

    dictionaries = Dictionaries(fetch)
    assert dictionaries.for_answer("s", {"X-Venice-Version": "1"}) is None  # values that came decompressed
    for number in (1, 1, 2, 3, 4):
        answer = {"X-Venice-Compression-Strategy": "3", "X-Venice-Version": str(number)}
        decompress = dictionaries.for_answer("s", answer)
        assert decompress is not None
        assert decompress(compressor(WITH_DICT, trained[number])(b"value 9")) == b"value 9"
    assert fetched == [f"/dictionary/s/{n}" for n in (1, 2, 3, 4)]
    assert dictionaries.cached("s") == [2, 3, 4]
    with pytest.raises(ComponentError, match="cannot fetch the dictionary of 's' version 7: 404 no-dictionary"):
        dictionaries.for_answer("s", {"X-Venice-Compression-Strategy": "3", "X-Venice-Version": "7"})


@pytest.fixture
def users(meta: MetadataStore, config: ClusterConfig) -> Any:
    key, value = (SCHEMAS / "user_key.avsc").read_text(), (SCHEMAS / "user_value_v1.avsc").read_text()
    stores.create_store(meta, config, "users", key, value, compression="ZSTD_WITH_DICT")
    return stores.describe_store(meta, "users")


ROWS = 16_000


def _write(folder: Path, fmt: str) -> Path:
    """The rows 0..ROWS in four files of `fmt` (Parquet files of several row groups)."""
    folder.mkdir()
    per = ROWS // 4
    for f in range(4):
        rows = [{"key": f"k{i:06d}", **_value(i)} for i in range(f * per, (f + 1) * per)]
        name = folder / f"part-{f}.{'jsonl' if fmt == 'json' else fmt}"
        if fmt == "parquet":
            pq.write_table(pa.Table.from_pylist(rows), name, row_group_size=1000)
        elif fmt == "avro":
            schema = {"type": "record", "name": "Row", "fields": [{"name": "key", "type": "string"}]}
            schema["fields"] += json.loads((SCHEMAS / "user_value_v1.avsc").read_text())["fields"]
            with name.open("wb") as handle:
                fastavro.writer(handle, schema, rows, codec="deflate", sync_interval=4000)
        else:
            name.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


@pytest.mark.parametrize("fmt", ["parquet", "avro", "json"])
def test_the_input_sample_is_bounded_spread_over_the_input_and_serialised_as_the_job_does(
    users: Any, tmp_path: Path, fmt: str
) -> None:
    path = _write(tmp_path / "in", fmt)
    schema = serde.parse(users.value_schemas[0].schema)
    budget = 30_000
    sample = input_sample.sample_values(users, str(path), "key", "value", budget)
    largest = max(len(serde.serialize(schema, _value(i))) for i in range(5))
    assert budget <= sum(map(len, sample)) < budget + input_sample.WINDOWS * largest
    rows = [int(serde.deserialize(schema, value)["name"][4:10]) for value in sample]
    assert sample == [serde.serialize(schema, _value(i)) for i in rows]  # the bytes the job stores, uncompressed
    assert len(set(rows)) == len(rows)  # no record twice
    # From every sixteenth of the input: each file, the start and the end of each.
    assert {i * input_sample.WINDOWS // ROWS for i in rows} == set(range(input_sample.WINDOWS))
    whole = input_sample.sample_values(users, str(path), "key", "value", 10**9)
    assert sorted(int(serde.deserialize(schema, v)["name"][4:10]) for v in whole) == list(range(ROWS))


def test_input_only_spark_reads_cannot_be_sampled_and_an_empty_one_samples_nothing(users: Any, tmp_path: Path) -> None:
    with pytest.raises(PushJobError, match="input hdfs://data/users is a URL only the Spark job reads: push a local"):
        input_sample.sample_values(users, "hdfs://data/users", "key", "value", 1000)
    empty = tmp_path / "empty"
    empty.mkdir()
    pq.write_table(pa.Table.from_pylist([{"key": "k", **_value(1)}]).slice(0, 0), empty / "part-0.parquet")
    assert input_sample.sample_values(users, str(empty), "key", "value", 1000) == []
