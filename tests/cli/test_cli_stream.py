"""`venice stream` without a broker or Spark: what `start` refuses (one `error:` line, nothing started, no
pipeline recorded), what `status` says of a job that is gone, the pipeline record's runs, and the job's
spark-submit line."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.support.platform import PlatformEnv
from tests.support.topics import InMemoryTopics
from venice_core.config import ClusterConfig
from venice_core.controller import drain, stores, streams
from venice_core.meta import MetadataStore
from venice_core.spark.submit import StreamJobRequest, stream_job_spec
from venice_core.streams import control


def _store(env: PlatformEnv, hybrid: bool) -> str:
    store = env.create_user_store("streamed")
    if hybrid:
        stores.update_store(env.meta, env.config, store, hybrid_rewind_seconds=60, topics=InMemoryTopics())
    return store


def _start(env: PlatformEnv, name: str, store: str, *extra: str) -> tuple[int, str]:
    result = env.cli(
        "stream", "start", name, "--store", store, "--source-topic", "events", "--region", "dc-0", "--key-field", "k",
        *extra,
    )  # fmt: skip
    return result.returncode, result.stderr


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("unknown store", "error: unknown store 'nosuch'"),
        ("batch-only store", "is batch-only"),
        ("unknown region", "unknown region"),
        ("no value field for a value that is no record", None),
    ],
)
def test_start_refuses_with_one_error_line_and_records_nothing(cli_env: PlatformEnv, case: str, expected: str) -> None:
    name = f"p{uuid.uuid4().hex[:8]}"
    if case == "unknown store":
        code, err = _start(cli_env, name, "nosuch")
    elif case == "batch-only store":
        code, err = _start(cli_env, name, _store(cli_env, hybrid=False))
    elif case == "unknown region":
        code, err = _start(cli_env, name, _store(cli_env, hybrid=True), "--region", "dc-9")
    else:
        code, err = _start(
            cli_env, name, _store(cli_env, hybrid=True), "--value-fields", "name,name2", "--key-field", "name"
        )
        expected = "cannot also be value fields"
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err
    assert streams.find_pipeline(cli_env.meta, name) is None
    assert not (cli_env.config.data_dir / "streams" / name).exists()


def test_a_new_pipeline_needs_its_store_source_and_key(cli_env: PlatformEnv) -> None:
    result = cli_env.cli("stream", "start", "fresh")
    assert result.returncode != 0
    assert result.stderr.strip() == "error: a new stream pipeline needs --store, --source-topic, --region, --key-field"


def test_status_of_a_job_that_died_without_a_word_is_failed(cli_env: PlatformEnv) -> None:
    store = _store(cli_env, hybrid=True)
    record = streams.new_run(cli_env.meta, "ghost", store, "dc-0", "events", {"key_field": "k"})
    streams.record_running(cli_env.meta, "ghost", record.run_id, "q-1")
    result = cli_env.cli("stream", "status", "ghost")
    assert result.returncode == 0
    assert result.stdout.startswith("ghost: failed: the job exited without saying why"), result.stdout
    assert "run " + record.run_id in result.stdout
    listing = cli_env.cli("stream", "status", "--json", check=True).stdout
    assert '"name": "ghost"' in listing
    stopped = cli_env.cli("stream", "stop", "ghost", check=True).stdout
    assert stopped.startswith("stream ghost was not running")
    assert streams.get_pipeline(cli_env.meta, "ghost").state == streams.STOPPED
    missing = cli_env.cli("stream", "status", "nosuch")
    assert missing.returncode != 0 and missing.stderr.strip() == "error: unknown stream pipeline 'nosuch'"


def test_every_start_is_a_new_run_and_a_stale_run_cannot_report(meta: MetadataStore) -> None:
    first = streams.new_run(meta, "p", "s", "dc-0", "events", {"a": 1})
    second = streams.new_run(meta, "p", "s", "dc-0", "events", {"a": 2})
    assert first.run_id != second.run_id and second.state == streams.STARTING
    assert not streams.record_failure(meta, "p", first.run_id, "late news from the old run")
    assert not streams.record_batch(meta, "p", first.run_id, 3, {"0": 9})
    assert streams.record_running(meta, "p", second.run_id, "q")
    assert streams.record_batch(meta, "p", second.run_id, 0, {"0": 5, "1": 2})
    assert streams.record_batch(meta, "p", second.run_id, 1, {"1": 4})
    record = streams.get_pipeline(meta, "p")
    assert (record.state, record.offsets, record.last_batch_id, record.args) == (
        streams.RUNNING,
        {"0": 5, "1": 4},
        1,
        {"a": 2},
    )
    with pytest.raises(streams.PipelineConflict, match="keeps its store, region and source topic"):
        streams.new_run(meta, "p", "s", "dc-0", "other-topic", {})


def test_a_pipeline_started_before_starts_again_by_name(cli_env: PlatformEnv) -> None:
    args = StreamJobRequest("again", "s", "dc-1", "events", "b:1", "k", ("v",), "ts", trigger_seconds=2.0).to_json()
    streams.new_run(cli_env.meta, "again", "s", "dc-1", "events", args)
    request = control.resolve_request(
        cli_env.meta, cli_env.config, "again", None, None, None, None, trigger_seconds=None, event_time_field="t2"
    )
    assert request == StreamJobRequest("again", "s", "dc-1", "events", "b:1", "k", ("v",), "t2", trigger_seconds=2.0)


def test_the_job_is_one_spark_submit_with_its_checkpoint(config: ClusterConfig, tmp_path: Path) -> None:
    request = StreamJobRequest(
        "p", "s", "dc-0", "events", "b:1", "k", ("a", "b"), None, confs={"spark.master": "local[1]"}
    )
    argv = stream_job_spec(config, request, "run-1", tmp_path / "checkpoint").argv()
    assert argv[0].endswith("spark-submit") and argv[argv.index("--master") + 1] == "local[1]"
    assert argv[argv.index("--name") + 1] == "venice-stream-p"
    application = argv.index(next(a for a in argv if a.endswith("spark/jobs/stream.py")))
    job_args = argv[application + 1 :]
    assert job_args[job_args.index("--value-fields") + 1] == "a,b"
    assert job_args[job_args.index("--checkpoint") + 1] == str(tmp_path / "checkpoint")
    assert job_args[job_args.index("--run-id") + 1] == "run-1"


def test_venice_down_stops_the_running_pipelines_first(cli_env: PlatformEnv) -> None:
    """A pipeline's job stands in as a sleeping process in the pipeline's process group: `venice down` stops it
    and records it stopped (nothing else of the platform runs here)."""
    store = _store(cli_env, hybrid=True)
    record = streams.new_run(cli_env.meta, "running", store, "dc-0", "events", {"key_field": "k"})
    streams.record_running(cli_env.meta, "running", record.run_id, "q-1")
    job = control.process(cli_env.config, "running")
    job.start(["sleep", "300"])
    try:
        result = cli_env.cli("down", check=True)
        assert "stream pipeline running stopped" in result.stdout
        assert job.pid() is None
        assert streams.get_pipeline(cli_env.meta, "running").state == streams.STOPPED
    finally:
        job.stop(timeout=5)


def test_drain_and_upgrade_refuse_a_pipeline_that_is_not_running_with_one_error_line(cli_env: PlatformEnv) -> None:
    store = _store(cli_env, hybrid=True)
    record = streams.new_run(cli_env.meta, "idle", store, "dc-0", "events", {"key_field": "k"})
    streams.record_stopped(cli_env.meta, "idle", record.run_id)
    for argv in (("drain", "idle", "--local"), ("upgrade", "idle", "--transform", "window_count", "--local"),
                 ("drain", "nosuch", "--local"), ("drain", "idle", "--airflow")):  # fmt: skip
        result = cli_env.cli("stream", *argv)
        assert result.returncode != 0, argv
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), (argv, result.stderr)
    assert "is not running (stopped): nothing to drain" in cli_env.cli("stream", "drain", "idle", "--local").stderr
    assert drain.read(cli_env.meta, "idle") == []  # nothing written


def test_a_start_after_a_drain_is_fresh_state_from_the_drained_offsets(cli_env: PlatformEnv) -> None:
    """What the drained run reached is where the next one starts (its checkpoint kept aside); an unknown
    transform is refused before anything starts."""
    request = StreamJobRequest("dr", "s", "dc-0", "events", "b:1", "k", ("v",), starting_offsets="earliest")
    checkpoint = control.checkpoint_dir(cli_env.config, "dr")
    (checkpoint / "offsets").mkdir(parents=True)
    drained = streams.PipelineRecord("dr", "s", "dc-0", "events", {}, streams.DRAINED, "r1", offsets={"0": 7, "1": 3})
    after = control.after_drain(cli_env.config, request, drained)
    assert after.starting_offsets == '{"0": 7, "1": 3}' and not checkpoint.exists()
    assert (checkpoint.with_name("checkpoint.drained") / "offsets").is_dir()
    store = _store(cli_env, hybrid=True)
    code, err = _start(cli_env, "badt", store, "--transform", "reduce")
    assert code != 0 and err.startswith("error: unknown transform 'reduce'"), err
