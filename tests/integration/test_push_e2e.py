"""Pushes through the real Spark job, Kafka broker and three region servers, read back through the client."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scripts.generate_dataset import generate
from tests.support.platform import PlatformEnv
from venice_core.client import ReadClient

pytestmark = pytest.mark.slow
SCHEMAS = Path(__file__).parents[2] / "examples" / "schemas"


def _expected(path: Path) -> dict[str, dict]:
    table = pq.read_table(path).to_pylist()
    return {row.pop("key"): row for row in table}


def _assert_serves(env: PlatformEnv, store: str, expected: dict[str, dict]) -> None:
    config = env.config
    keys = sorted(expected)
    for region in config.region_names:
        client = ReadClient("127.0.0.1", config.server_port(region))
        got = {}
        for start in range(0, len(keys), 500):
            got.update(client.batch_get(store, keys[start : start + 500]))
        assert got == expected, f"region {region} differs"
        assert client.get(store, keys[0]) == expected[keys[0]]
        assert client.get(store, "no-such-key") is None


def test_push_serves_everywhere_and_second_push_keeps_first_as_backup(
    platform_env: PlatformEnv, tmp_path: Path
) -> None:
    store = platform_env.create_user_store("push", 3)
    first = generate(tmp_path / "v1", 3000, files=2, seed=0)
    result = platform_env.venice("push", store, "--input", str(first))
    assert result.returncode == 0, result.stderr
    _assert_serves(platform_env, store, _expected(first))

    second = generate(tmp_path / "v2", 2500, files=2, seed=1)
    platform_env.venice("push", store, "--input", str(second), check=True)
    _assert_serves(platform_env, store, _expected(second))
    info = json.loads(platform_env.venice("store", "show", store, "--json", check=True).stdout)
    assert all(r == {"current": 2, "backup": 1} for r in info["regions"].values())
    assert {v["number"]: v["status"] for v in info["versions"]} == {1: "ONLINE", 2: "ONLINE"}


def test_retried_spark_task_leaves_no_duplicates_or_gaps(platform_env: PlatformEnv, tmp_path: Path) -> None:
    store = platform_env.create_user_store("push", 2)
    data = generate(tmp_path / "in", 4000, files=2)
    result = platform_env.venice(
        "push",
        store,
        "--input",
        str(data),
        "--conf",
        "venice.push.test.fail.partition=1",
        "--conf",
        "venice.push.test.fail.after.records=700",
    )
    assert result.returncode == 0, result.stderr
    _assert_serves(platform_env, store, _expected(data))
    metrics = ReadClient("127.0.0.1", platform_env.config.server_port("dc-1"))._request("GET", "/metrics")[2].decode()
    duplicates = [
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("venice_ingestion_duplicates_total") and f'store="{store}"' in line
    ]
    assert sum(duplicates) >= 700  # the retried task re-sent what the first attempt had written


def _write(path: Path, rows: list[dict]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path / "part-0.parquet")
    return path


@pytest.mark.parametrize(
    ("rows", "confs", "message"),
    [
        ([{"id": "a", "name": "n", "age": 1, "score": 1.0}], [], "input has no key field 'key'"),
        ([{"key": "a", "name": "n", "age": "old", "score": 1.0}], [], "field 'age' is StringType in the input"),
        (
            [{"key": "a", "name": "n", "age": 1, "score": 1.0}, {"key": "a", "name": "m", "age": 2, "score": 2.0}],
            [],
            "duplicate key with different values",
        ),
        ([], [], "holds no records"),
    ],
    ids=["missing-key-field", "wrong-type", "duplicate-keys", "empty-input"],
)
def test_bad_input_fails_and_previous_version_keeps_serving(
    platform_env: PlatformEnv, tmp_path: Path, rows: list[dict], confs: list[str], message: str
) -> None:
    store = platform_env.create_user_store("push", 1)
    good = generate(tmp_path / "good", 200, files=1)
    platform_env.venice("push", store, "--input", str(good), check=True)
    if not rows:
        schema = pa.schema([("key", pa.string()), ("name", pa.string()), ("age", pa.int32()), ("score", pa.float64())])
        (tmp_path / "bad").mkdir()
        pq.write_table(schema.empty_table(), tmp_path / "bad" / "part-0.parquet")
        bad = tmp_path / "bad"
    else:
        bad = _write(tmp_path / "bad", rows)
    result = platform_env.venice("push", store, "--input", str(bad), *confs)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    _assert_serves(platform_env, store, _expected(good))


def test_unknown_store_missing_input_and_concurrent_push(platform_env: PlatformEnv, tmp_path: Path) -> None:
    result = platform_env.venice("push", "ghost_store", "--input", str(tmp_path))
    assert result.returncode != 0 and result.stderr.strip() == "error: unknown store 'ghost_store'"
    store = platform_env.create_user_store("push", 1)
    result = platform_env.venice("push", store, "--input", str(tmp_path / "missing"))
    assert result.returncode != 0 and "does not exist" in result.stderr
    from venice_core.controller import versions
    from venice_core.meta import MetadataStore

    meta = MetadataStore(platform_env.config.metadata_db_url)
    versions.create_version(meta, platform_env.config, store, "someone-else")  # a push in flight
    data = generate(tmp_path / "in", 10, files=1)
    result = platform_env.venice("push", store, "--input", str(data))
    assert result.returncode != 0 and "already in progress (version 1)" in result.stderr
    meta.dispose()


def test_broker_down_is_one_clear_error(platform_env: PlatformEnv, tmp_path: Path) -> None:
    store = platform_env.create_user_store("push", 1)
    data = generate(tmp_path / "in", 10, files=1)
    dead = tmp_path / "dead.properties"
    dead.write_text(
        platform_env.properties.read_text()
        + "".join(f"region.{r}.kafka.bootstrap.servers=127.0.0.1:1\n" for r in platform_env.config.region_names)
    )
    env = PlatformEnv(platform_env.home, dead, {**platform_env.env, "VENICE_CONFIG": str(dead)})
    result = env.venice("push", store, "--input", str(data))
    assert result.returncode != 0
    assert result.stderr.strip().startswith("error: Kafka broker at 127.0.0.1:1 is unreachable"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
