"""`venice push`, `venice repush`, `venice get`, `venice write`, `venice delete`, `venice server`."""

from __future__ import annotations

import json
import logging
import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from venice_core.cli.context import metadata, parse_key_values
from venice_core.client import ReadClient
from venice_core.config import load_config
from venice_core.errors import ConfigError, InvalidRecord

if TYPE_CHECKING:
    from venice_core.nearline.writer import OnlineWriter
    from venice_core.orchestration.airflow.run_following import FollowView


def push(
    store: str = typer.Argument(..., help="Store name."),
    input_path: str = typer.Option(
        None,
        "--input",
        help="Avro, Parquet or JSON files (a file or a folder); none for a repush (--conf source.kafka=true).",
    ),
    key_field: str = typer.Option("key", "--key-field", help="Input field holding the key."),
    value_field: str = typer.Option(
        "value",
        "--value-field",
        help="Input field holding the value; without it the other fields form the value record.",
    ),
    mode: bool = typer.Option(
        None,
        "--airflow/--local",
        help="Roll out as the store's Airflow DAG run (the default when airflow.enabled), or directly in this "
        "process (the default without Airflow; for scripts and tests).",
        show_default=False,
    ),
    conf: list[str] = typer.Option(
        [],
        "--conf",
        help="Push config key=value (allow.duplicate.key, allow.empty.input, compression.dictionary.sample.size, "
        "compression.dictionary.size.limit, spark.*); source.kafka=true makes it a repush, which takes the repush's "
        "confs (see `venice repush --help`).",
    ),
    queue: bool = typer.Option(
        True,
        "--queue/--no-queue",
        help="Through Airflow, while a rollout of the store is in flight: queue behind it (the default), or refuse "
        "at once without triggering anything.",
    ),
) -> None:
    """Push a dataset as a new version and roll it out region by region through the lifecycle hooks. With
    `--conf source.kafka=true` (Venice's repush switch) it is a repush: the same as `venice repush STORE`.

    Exits 0 when every region serves the new version, 3 when a hook stopped the rollout (ABORT or ROLLBACK)."""
    from venice_core.controller import repush_config
    from venice_core.rollout.local import push as run_push
    from venice_core.rollout.push_confs import check_user_confs
    from venice_core.spark.inputs.input_files import is_remote

    confs = parse_key_values(conf, "--conf")
    check_user_confs(confs)  # a malformed source.kafka is refused here
    if repush_config.is_repush(confs):
        if input_path is not None:
            raise ConfigError(
                "--input is for a push: with source.kafka=true the repush reads the store's own version topic "
                "(kafka.input.topic and kafka.input.fabric choose which)"
            )
        del confs[repush_config.SOURCE_KAFKA]
        _repush(store, confs, mode, queue)
        return
    if input_path is None:
        raise ConfigError("a push needs --input (or --conf source.kafka=true: a repush of the store's own data)")
    path = input_path if is_remote(input_path) else str(Path(input_path).resolve())
    with metadata() as (config, meta):  # each push checks its input before a version, a DAG run or a JVM
        if config.airflow.enabled if mode is None else mode:
            from venice_core.orchestration.airflow.pushes import RolloutRequest
            from venice_core.orchestration.airflow.pushes import push as airflow_push

            with _follow_view() as view:
                request = RolloutRequest(store, confs, queue=queue, view=view)
                number = airflow_push(config, meta, request, path, key_field, value_field)
        else:
            number = run_push(config, meta, store, path, key_field, value_field, confs, progress=typer.echo)
    typer.echo(f"version {number} of '{store}' is serving in every region")


def repush(
    store: str = typer.Argument(..., help="Store name."),
    conf: list[str] = typer.Option(
        [],
        "--conf",
        help="Repush config key=value: kafka.input.topic, kafka.input.fabric, kafka.input.broker.url, "
        "kafka.input.max.records.per.mapper, kafka.input.combiner.enabled, repush.ttl.enable, repush.ttl.seconds, "
        "repush.ttl.start.timestamp, rewind.time.in.seconds.override, compression.dictionary.sample.size, "
        "compression.dictionary.size.limit, spark.*.",
    ),
    mode: bool = typer.Option(
        None,
        "--airflow/--local",
        help="Roll out as the store's Airflow DAG run (the default when airflow.enabled), or directly in this process.",
        show_default=False,
    ),
    queue: bool = typer.Option(True, "--queue/--no-queue", help="Through Airflow: queue behind a run in flight."),
) -> None:
    """Rebuild a store from its own version topic as a new version (compacted, sorted, re-partitioned and
    re-compressed to the store's settings, TTL applied if asked) and roll it out like a push.

    Exits 0 when every region serves the new version, 3 when a hook stopped the rollout."""
    _repush(store, parse_key_values(conf, "--conf"), mode, queue)


def _repush(store: str, confs: dict[str, str], mode: bool | None, queue: bool) -> None:
    """A repush, asked by `venice repush` or by `venice push --conf source.kafka=true`: the same checks, the same
    run."""
    from venice_core.rollout.local import repush as run_repush
    from venice_core.rollout.push_confs import check_user_confs

    check_user_confs(confs, repush=True)
    with metadata() as (config, meta):
        if config.airflow.enabled if mode is None else mode:
            from venice_core.orchestration.airflow.pushes import RolloutRequest
            from venice_core.orchestration.airflow.pushes import repush as airflow_repush

            with _follow_view() as view:
                number = airflow_repush(config, meta, RolloutRequest(store, confs, queue=queue, view=view))
        else:
            number = run_repush(config, meta, store, confs, progress=typer.echo)
    typer.echo(f"version {number} of '{store}' is serving in every region")


def _follow_view() -> AbstractContextManager[FollowView]:
    """A live display in a terminal; plain lines otherwise (logs, CI, tests)."""
    if sys.stdout.isatty():
        from venice_core.cli.live import LiveView

        return LiveView()
    from venice_core.orchestration.airflow.run_following import PlainView

    return nullcontext(PlainView(typer.echo))


def get(
    store: str = typer.Argument(..., help="Store name."),
    key: str = typer.Argument(..., help="The key as JSON for the key schema (a bare string for a string key)."),
    region: str = typer.Option(None, "--region", help="Region to read from (default: the source region)."),
    as_json: bool = typer.Option(False, "--json", help="Print the value as JSON (default: JSON too, compact)."),
) -> None:
    """Read one key from a region; exits 1 if the key is not found."""
    config = load_config()
    region_name = region or config.source_region
    parsed_key = parse_key(key)
    client = ReadClient.for_region(config, config.region(region_name).name)  # any instance of the region
    try:
        value = client.get(store, parsed_key)
    finally:
        client.close()
    if value is None:
        typer.echo(f"key {key} not found in '{store}' ({region_name})", err=True)
        raise typer.Exit(1)
    typer.echo(json.dumps(value, indent=2 if as_json else None, default=str))


def parse_key(key: str) -> Any:
    """A key on the command line: JSON for the key schema, or a bare string."""
    try:
        return json.loads(key)
    except json.JSONDecodeError:
        return key


def _timestamp(text: str | None) -> int | None:
    if text is None:
        return None
    from venice_core.nearline.writer import write_timestamp

    try:
        number = int(text)
    except ValueError:
        raise InvalidRecord(f"--timestamp takes a whole number of milliseconds since the epoch, got {text!r}") from None
    return write_timestamp(number)  # checked before anything is started


def write(
    store: str = typer.Argument(..., help="A hybrid store."),
    key: str = typer.Argument(..., help="The key as JSON for the key schema (a bare string for a string key)."),
    value_json: str = typer.Argument(..., help="The value as JSON for a value schema of the store."),
    region: str = typer.Option(None, "--region", help="Region to write in (default: the source region)."),
    timestamp: str = typer.Option(
        None, "--timestamp", metavar="MS", help="The write's logical time in ms since the epoch (default: now)."
    ),
) -> None:
    """Write one value nearline, through the region's real-time topic; the newest value schema it fits is used.

    Nothing is written if the store is batch-only, or the key or value does not fit its schemas."""
    stamp = _timestamp(timestamp)
    try:
        parsed_value = json.loads(value_json)
    except json.JSONDecodeError as exc:
        raise InvalidRecord(f"the value is not valid JSON: {exc}") from None
    parsed_key = parse_key(key)
    with _writer(store, region, parsed_key, parsed_value) as writer:
        written = writer.put(parsed_key, parsed_value, stamp)
    target = writer.target
    typer.echo(f"wrote key {key} to '{store}' in {target.region} ({target.topic}, timestamp {written})")


def delete(
    store: str = typer.Argument(..., help="A hybrid store."),
    key: str = typer.Argument(..., help="The key as JSON for the key schema (a bare string for a string key)."),
    region: str = typer.Option(None, "--region", help="Region to write in (default: the source region)."),
    timestamp: str = typer.Option(
        None, "--timestamp", metavar="MS", help="The delete's logical time in ms since the epoch (default: now)."
    ),
) -> None:
    """Delete one key nearline, through the region's real-time topic (a write older than the delete cannot bring
    the key back)."""
    stamp = _timestamp(timestamp)
    parsed_key = parse_key(key)
    with _writer(store, region, parsed_key) as writer:
        written = writer.delete(parsed_key, stamp)
    target = writer.target
    typer.echo(f"wrote a delete of key {key} to '{store}' in {target.region} ({target.topic}, timestamp {written})")


def _writer(store: str, region: str | None, key: Any, *value: Any) -> OnlineWriter:
    """A writer to the store's real-time topic in the region, once the key (and value) are checked: a record that
    does not fit is refused without reaching Kafka."""
    from venice_core.nearline.writer import OnlineWriter, RecordEncoder, resolve_target

    with metadata() as (config, meta):
        target = resolve_target(store, region, config=config, meta=meta)
    encoder = RecordEncoder(target)
    encoder.key(key)
    for v in value:
        encoder.value(v)
    return OnlineWriter.for_target(target)


def server(
    region: str = typer.Option(..., "--region", help="The region this server serves."),
    instance: int = typer.Option(
        0, "--instance", help="Which of the region's instances (0 to region.<r>.instances - 1) this process is."
    ),
) -> None:
    """Run a region-server instance in the foreground (`venice up` starts every configured instance of each
    region). A second process started as a running instance is refused."""
    from venice_core.server.region_server import RegionServer

    config = load_config()
    config.check_instance(config.region(region).name, instance)
    with metadata():
        pass  # refuse to start on an uninitialised metadata store
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    RegionServer(config, region, instance).run()
