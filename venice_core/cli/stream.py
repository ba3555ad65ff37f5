"""`venice stream ...`: the nearline streaming pipelines (Spark Structured Streaming jobs writing a Kafka topic's
JSON events to a hybrid store's real-time topic)."""

from __future__ import annotations

import json
import time

import typer

from venice_core.cli.context import metadata, parse_key_values
from venice_core.controller.streams import PipelineState
from venice_core.streams import control
from venice_core.streams import upgrade as stream_upgrade
from venice_core.streams.control import PipelineStatus

stream_app = typer.Typer(help="Start, watch and stop nearline streaming pipelines.", no_args_is_help=True)
NameArg = typer.Argument(..., help="Pipeline name.")


@stream_app.command("start")
def start(
    name: str = NameArg,
    store: str = typer.Option(None, "--store", help="The hybrid store to write."),
    source_topic: str = typer.Option(None, "--source-topic", help="Kafka topic of JSON events."),
    region: str = typer.Option(None, "--region", help="Region whose real-time topic takes the writes."),
    key_field: str = typer.Option(None, "--key-field", help="Event field holding the key."),
    value_fields: str = typer.Option(
        None, "--value-fields", help="Event fields of the value, comma-separated (default: all but key and time)."
    ),
    event_time_field: str = typer.Option(
        None, "--event-time-field", help="Event field with the write timestamp (default: the Kafka record's)."
    ),
    source_bootstrap: str = typer.Option(
        None, "--source-bootstrap", help="Kafka of the source topic (default: the region's)."
    ),
    starting_offsets: str = typer.Option(
        None, "--starting-offsets", help="earliest (default), latest, or JSON offsets per partition (first start)."
    ),
    max_records_per_batch: int = typer.Option(
        None, "--max-records-per-batch", help="At most this many events a micro-batch (default 100000; 0: no limit)."
    ),
    trigger_seconds: float = typer.Option(None, "--trigger-seconds", help="Micro-batch interval (default 1)."),
    transform: str = typer.Option(
        None, "--transform", help="map (default: each event a write), window_count or window_count_v2."
    ),
    window_seconds: float = typer.Option(None, "--window-seconds", help="Tumbling window (default 10)."),
    watermark_seconds: float = typer.Option(None, "--watermark-seconds", help="Watermark delay (default 5)."),
    drain_timeout_seconds: float = typer.Option(
        None, "--drain-timeout-seconds", help="A drain's default timeout (default 60)."
    ),
    conf: list[str] = typer.Option([], "--conf", help="spark.*=value for the job's spark-submit; repeatable."),
    wait: bool = typer.Option(True, "--wait/--no-wait", help="Return once the query runs (or failed)."),
) -> None:
    """Start a pipeline (a new one, with the options; a known one, by name, with what it last ran with unless
    given). Its log and Spark checkpoint are under <data dir>/streams/NAME/."""
    with metadata() as (config, meta):
        request = control.resolve_request(
            meta,
            config,
            name,
            store,
            source_topic,
            region,
            key_field,
            value_fields=None if value_fields is None else tuple(f for f in value_fields.split(",") if f.strip()),
            event_time_field=event_time_field,
            source_bootstrap=source_bootstrap,
            starting_offsets=starting_offsets,
            max_records_per_batch=max_records_per_batch,
            trigger_seconds=trigger_seconds,
            transform=transform,
            window_seconds=window_seconds,
            watermark_seconds=watermark_seconds,
            drain_timeout_seconds=drain_timeout_seconds,
            confs=parse_key_values(conf, "--conf") or None,
        )
        status = control.start(config, meta, request, wait=wait, progress=typer.echo)
        if config.airflow.enabled:
            from venice_core.orchestration.airflow.streams import reparse_stream_dags

            reparse_stream_dags(config)  # a new pipeline's upgrade DAG
    typer.echo(_line(status))


@stream_app.command("status")
def status(
    name: str = typer.Argument(None, help="Pipeline name (default: every pipeline)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Each pipeline's state (running, stopped, failed and why), store, region, source and offsets reached."""
    with metadata() as (config, meta):
        if name is None:
            statuses = control.all_statuses(config, meta)
        else:
            statuses = [control.pipeline_status(config, meta, name)]
    if as_json:
        typer.echo(json.dumps([_json(s) for s in statuses], indent=2))
        return
    if not statuses:
        typer.echo("no stream pipelines")
    for s in statuses:
        typer.echo(_line(s))
        if name is not None:
            r = s.record
            typer.echo(f"  store {r.store} in {r.region}, source topic {r.source_topic}")
            typer.echo(f"  run {r.run_id}, query {r.query_id or '-'}, last batch {r.last_batch_id}")
            typer.echo(f"  offsets {json.dumps(r.offsets, sort_keys=True)}")
            if r.drain:
                typer.echo(f"  last drain: {stream_upgrade.describe_drain(r.drain)}")
            typer.echo(f"  log {s.log}")


AirflowOption = typer.Option(
    None,
    "--airflow/--local",
    help="Through the pipeline's venice_upgrade__NAME DAG run (the default when airflow.enabled), or in this process.",
)
TimeoutOption = typer.Option(
    None, "--timeout", help="Seconds the drain may take; past them the job stops without cleaning up (default 60)."
)


@stream_app.command("drain")
def drain(name: str = NameArg, timeout: float = TimeoutOption, mode: bool = AirflowOption) -> None:
    """Drain a pipeline: stop reading at a cut (the source's end now), finish the batch in flight, process up to
    the cut, fire every pending window, commit, stop, clean up. A later start begins from the drained offsets with
    fresh state."""
    _drain_or_upgrade(name, timeout, None, mode)


@stream_app.command("upgrade")
def upgrade(
    name: str = NameArg,
    transform: str = typer.Option(None, "--transform", help="map, window_count or window_count_v2."),
    window_seconds: float = typer.Option(None, "--window-seconds", help="Tumbling window (windowed transforms)."),
    watermark_seconds: float = typer.Option(None, "--watermark-seconds", help="Watermark delay (windowed)."),
    value_fields: str = typer.Option(None, "--value-fields", help="Event fields of the value, comma-separated."),
    trigger_seconds: float = typer.Option(None, "--trigger-seconds", help="Micro-batch interval."),
    max_records_per_batch: int = typer.Option(None, "--max-records-per-batch", help="At most this many events."),
    conf: list[str] = typer.Option([], "--conf", help="spark.*=value for the new job (replaces the old job's)."),
    timeout: float = TimeoutOption,
    mode: bool = AirflowOption,
) -> None:
    """Drain a pipeline, then start its new deployment with these arguments over the old ones: a new run with
    fresh state (its state schema may change) from exactly the offsets the drained run reached."""
    given = {
        "transform": transform,
        "window_seconds": window_seconds,
        "watermark_seconds": watermark_seconds,
        "value_fields": None if value_fields is None else [f for f in value_fields.split(",") if f.strip()],
        "trigger_seconds": trigger_seconds,
        "max_records_per_batch": max_records_per_batch,
        "confs": parse_key_values(conf, "--conf") or None,
    }
    _drain_or_upgrade(name, timeout, {k: v for k, v in given.items() if v is not None}, mode)


def _drain_or_upgrade(name: str, timeout: float | None, args: dict[str, object] | None, mode: bool | None) -> None:
    with metadata() as (config, meta):
        if config.airflow.enabled if mode is None else mode:
            from venice_core.orchestration.airflow.streams import drain_or_upgrade

            drain_or_upgrade(config, meta, name, timeout, args, progress=typer.echo)
        else:
            stream_upgrade.run_local(config, meta, name, timeout, args, progress=typer.echo)
        after = control.pipeline_status(config, meta, name)
    typer.echo(_line(after))
    if args is None:
        typer.echo(f"  last drain: {stream_upgrade.describe_drain(after.record.drain)}")


@stream_app.command("stop")
def stop(name: str = NameArg) -> None:
    """Stop a pipeline's job (its whole process group); a later `start NAME` resumes from its checkpoint."""
    with metadata() as (config, meta):
        stopped = control.stop(config, meta, name)
        after = control.pipeline_status(config, meta, name)
    typer.echo(f"stream {name} stopped" if stopped else f"stream {name} was not running ({_state(after)})")


def _state(s: PipelineStatus) -> str:
    return f"{s.state}: {s.cause}" if s.state is PipelineState.FAILED and s.cause else s.state


def _line(s: PipelineStatus) -> str:
    pid = f" (pid {s.pid})" if s.pid else ""
    return f"{s.record.name}: {_state(s)}{pid}, {s.record.store} in {s.record.region} from {s.record.source_topic}"


def _json(s: PipelineStatus) -> dict[str, object]:
    r = s.record
    return {
        "name": r.name,
        "state": s.state,
        "cause": s.cause,
        "pid": s.pid,
        "store": r.store,
        "region": r.region,
        "source_topic": r.source_topic,
        "run_id": r.run_id,
        "query_id": r.query_id,
        "last_batch_id": r.last_batch_id,
        "offsets": r.offsets,
        "drain": r.drain,
        "args": r.args,
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(r.updated_at)),
        "log": str(s.log),
    }
