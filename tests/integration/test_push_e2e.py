"""Pushes through the real Spark job, Kafka broker and three region servers, read back through the client. One push
goes through `venice push` and spark-submit; the others run the job's code on the session's SparkSession."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scripts.generate_dataset import generate
from tests.support.inputs import expected_records, write_rows
from tests.support.jobs import InProcessSparkJob, RecordsJob
from tests.support.platform import PlatformEnv
from tests.support.reads import assert_serves
from venice_core.client import ReadClient
from venice_core.controller import stores, versions
from venice_core.controller.store_description import RegionVersions
from venice_core.errors import VeniceError
from venice_core.rollout.local import PushFailed
from venice_core.spark.submit import PushJobRequest


@pytest.mark.spark
def test_push_through_spark_submit_serves_everywhere_and_a_refused_push_changes_nothing(
    platform_env: PlatformEnv, spark_job: InProcessSparkJob, tmp_path: Path
) -> None:
    """`venice push` as a user runs it (the job through spark-submit): every region serves the input. A push whose
    input the job refuses is one error line and the first version keeps serving; a second good push (the same job
    on the session's Spark) keeps the first version as every region's backup."""
    store = platform_env.create_user_store("push", 3)
    first = generate(tmp_path / "v1", 3000, files=2, seed=0)
    result = platform_env.venice("push", store, "--input", str(first))
    assert result.returncode == 0, result.stderr
    assert_serves(platform_env, store, expected_records(first))

    rows = [{"key": "a", "name": "n", "age": 1, "score": 1.0}, {"key": "a", "name": "m", "age": 2, "score": 2.0}]
    result = platform_env.venice("push", store, "--input", str(write_rows(tmp_path / "bad", rows)))
    assert result.returncode != 0
    assert (
        result.stderr.startswith("error: push job failed: duplicate key with different values in the input")
        and len(result.stderr.splitlines()) == 1
    ), result.stderr
    assert_serves(platform_env, store, expected_records(first))

    second = generate(tmp_path / "v2", 2500, files=2, seed=1)
    assert platform_env.push(store, spark_job, second) == 3
    assert_serves(platform_env, store, expected_records(second))
    info = stores.describe_store(platform_env.meta, store)
    assert all(r == RegionVersions(current=3, backup=1) for r in info.regions.values())
    assert {v.number: v.status for v in info.versions} == {1: "ONLINE", 3: "ONLINE"}  # 2 was killed


def test_retried_spark_task_leaves_no_duplicates_or_gaps(
    platform_env: PlatformEnv, spark_job: InProcessSparkJob, tmp_path: Path
) -> None:
    """A Spark task that dies after writing 700 records of its partition is retried (`local[2,4]`); it writes as
    the same producer, so ingestion skips what the first attempt wrote and every region holds exactly the input."""
    store = platform_env.create_user_store("push", 2)
    data = generate(tmp_path / "in", 4000, files=2)
    confs = {"venice.push.test.fail.partition": "1", "venice.push.test.fail.after.records": "700"}
    platform_env.push(store, spark_job, data, confs=confs)
    assert_serves(platform_env, store, expected_records(data))
    metrics = ReadClient("127.0.0.1", platform_env.config.server_port("dc-1"))._request("GET", "/metrics")[2].decode()
    duplicates = [
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("venice_ingestion_duplicates_total") and f'store="{store}"' in line
    ]
    assert sum(duplicates) >= 700  # the retried task re-sent what the first attempt had written


@pytest.mark.parametrize(
    ("rows", "message", "refused_before_a_version"),
    [
        ([{"id": "a", "name": "n", "age": 1, "score": 1.0}], "input has no key field 'key'", True),
        ([{"key": "a", "name": "n", "age": "old", "score": 1.0}], "field 'age' is StringType in the input", True),
        (
            [{"key": "a", "name": "n", "age": 1, "score": 1.0}, {"key": "a", "name": "m", "age": 2, "score": 2.0}],
            "duplicate key with different values",
            False,
        ),
        ([], "holds no records", False),
    ],
    ids=["missing-key-field", "wrong-type", "duplicate-keys", "empty-input"],
)
def test_bad_input_fails_and_previous_version_keeps_serving(
    platform_env: PlatformEnv,
    spark_job: InProcessSparkJob,
    tmp_path: Path,
    rows: list[dict],
    message: str,
    refused_before_a_version: bool,
) -> None:
    """Input the push refuses: what its schema shows is refused at the schema_registration step, before any version
    (and by the job too, which is what checks input the push cannot read locally); what only the data shows, by the
    Spark job, which kills the version. Either way the previous version keeps serving."""
    store = platform_env.create_user_store("push", 1)
    good = expected_records(generate(tmp_path / "good", 200, files=1))
    platform_env.push(store, RecordsJob(good))
    if not rows:
        schema = pa.schema([("key", pa.string()), ("name", pa.string()), ("age", pa.int32()), ("score", pa.float64())])
        (tmp_path / "bad").mkdir()
        pq.write_table(schema.empty_table(), tmp_path / "bad" / "part-0.parquet")
        bad = tmp_path / "bad"
    else:
        bad = write_rows(tmp_path / "bad", rows)
    if refused_before_a_version:
        with pytest.raises(VeniceError, match=re.escape(message)):
            platform_env.push(store, spark_job, bad)
        assert [v.number for v in stores.describe_store(platform_env.meta, store).versions] == [1]
        alone = versions.create_version(platform_env.meta, platform_env.config, store, "job-alone")
        request = PushJobRequest(store, alone.number, str(bad), "key", "value", "job-alone")
        with pytest.raises(PushFailed) as failed:  # the job alone (input the push cannot read) refuses it too
            spark_job(platform_env.config, request)
        versions.kill_push(platform_env.meta, store, alone.number, "the job refused its input")
    else:
        with pytest.raises(PushFailed) as failed:
            platform_env.push(store, spark_job, bad)
        assert stores.describe_store(platform_env.meta, store).versions[-1].status == "KILLED"
    assert str(failed.value).startswith("push job failed: ") and message in str(failed.value)
    assert len(str(failed.value).splitlines()) == 1
    assert_serves(platform_env, store, good)


def test_unknown_store_missing_input_and_concurrent_push(platform_env: PlatformEnv, tmp_path: Path) -> None:
    result = platform_env.venice("push", "ghost_store", "--input", str(tmp_path))
    assert result.returncode != 0 and result.stderr.strip() == "error: unknown store 'ghost_store'"
    store = platform_env.create_user_store("push", 1)
    result = platform_env.venice("push", store, "--input", str(tmp_path / "missing"))
    assert result.returncode != 0 and "does not exist" in result.stderr
    versions.create_version(platform_env.meta, platform_env.config, store, "someone-else")  # a push in flight
    data = generate(tmp_path / "in", 10, files=1)
    result = platform_env.venice("push", store, "--input", str(data))
    assert result.returncode != 0 and "already in progress (version 1)" in result.stderr


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
