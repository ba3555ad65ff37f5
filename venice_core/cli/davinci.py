"""`venice davinci run` (a Da Vinci client as a long-lived process), `venice davinci sql` (read-only SQL on its
DuckDB file, live or not) and `venice davinci status`."""

from __future__ import annotations

import json
import logging
import signal
import threading
from pathlib import Path

import typer

from venice_core.cli.context import metadata, use_kafka_principal
from venice_core.host import gc_settings
from venice_core.security import principals

davinci_app = typer.Typer(
    help="Da Vinci clients: a store's full local copy in DuckDB or RocksDB.", no_args_is_help=True
)


def _partitions(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        from venice_core.errors import ConfigError

        raise ConfigError(f"--partitions expects partition numbers separated by commas, got {text!r}") from None


@davinci_app.command("run")
def run(
    store: str = typer.Argument(..., help="Store name."),
    region: str = typer.Option(..., "--region", help="The region whose version topics the client ingests."),
    duckdb_file: Path = typer.Option(
        None, "--duckdb", help='The DuckDB file (a table per version, the view "<store>", the checkpoints).'
    ),
    base_dir: Path = typer.Option(
        None, "--base-dir", help="Where local state lives (default: the DuckDB file's folder; required without it)."
    ),
    partitions: str = typer.Option(None, "--partitions", help="Subscribe to these partitions only (e.g. 0,2)."),
    progress_seconds: float = typer.Option(5.0, "--progress-seconds", help="How often to print progress."),
    ingest_workers: int = typer.Option(
        None,
        "--ingest-workers",
        min=0,
        help="DuckDB: processes that ingest a large version's batch phase (default: one per core; 0: threads).",
    ),
    tune_gc: bool = typer.Option(
        True,
        "--tune-gc/--default-gc",
        help="Collect garbage as region servers do (start-up objects frozen, young collections every 50,000 "
        "allocations): a 1M-record ingest spent 2.0 -> 0.6 CPU-s in Kafka consume.",
    ),
) -> None:
    """Run a Da Vinci client until Ctrl-C (or SIGTERM): ingest the region's current version, follow the rollout's
    Da Vinci gate to new versions, swap the view when the region swaps. Restarts resume from the checkpoints."""
    from venice_core.config import load_config
    from venice_core.davinci import DaVinciClient, DuckDBRecordTransformer
    from venice_core.davinci.sql_endpoint import SqlEndpoint
    from venice_core.errors import ConfigError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if duckdb_file is None and base_dir is None:
        raise ConfigError("give --duckdb FILE, or --base-dir DIR for a RocksDB copy")
    if duckdb_file is not None and not duckdb_file.absolute().parent.is_dir():
        folder = duckdb_file.absolute().parent
        problem = "is not a folder" if folder.exists() else "does not exist"
        raise ConfigError(f"--duckdb {duckdb_file}: the folder {folder} {problem}")
    base = base_dir or duckdb_file.resolve().parent
    transformer = DuckDBRecordTransformer(duckdb_file) if duckdb_file is not None else None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    use_kafka_principal(principals.DAVINCI, replace=True)  # a Da Vinci client reads, and may write nothing
    client = DaVinciClient(
        store,
        region,
        base,
        transformer,
        config=load_config(),
        partitions=_partitions(partitions),
        ingest_workers=ingest_workers,
    )
    # `venice davinci sql` asks this process (no other may open the file): a path that is no socket, or that
    # another live client serves, is refused before ingestion begins.
    endpoint = SqlEndpoint(duckdb_file, transformer.cursor).check() if transformer is not None else None
    if tune_gc:
        gc_settings.tune_for_throughput()
    client.start(wait=False)
    try:
        if endpoint is not None:
            endpoint.start()
            typer.echo(f"{store}@{region}: read-only SQL at {endpoint.path} (venice davinci sql {duckdb_file} ...)")
        last = None
        while not stop.wait(progress_seconds):
            status = client.status()
            line = f"{store}@{region}: serving v{status['serving']}" + "".join(
                f"; v{n} {'ready' if v['ready'] else 'ingesting'} {v['records']:,} records"
                + (f", {v['nearline'][0]:,} nearline writes (lag {v['nearline'][1]:,})" if v["nearline"] else "")
                + (f" ERROR {v['error']}" if v["error"] else "")
                for n, v in status["versions"].items()
            )
            if line != last:
                typer.echo(line)
                last = line
    finally:
        if endpoint is not None:
            endpoint.close()
        client.close()
        typer.echo(f"{store}@{region}: stopped (checkpoints committed)")


@davinci_app.command("sql")
def sql(
    duckdb_file: Path = typer.Argument(..., help="The client's DuckDB file (`venice davinci run --duckdb FILE`)."),
    query: str = typer.Argument(..., help="One read-only statement: a SELECT (or EXPLAIN of one)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of objects, one per row."),
    as_csv: bool = typer.Option(False, "--csv", help="Print CSV with a header line."),
    max_rows: int = typer.Option(10_000, "--max-rows", help="Print at most this many rows (none more is fetched)."),
) -> None:
    """Read-only SQL on a Da Vinci client's DuckDB file (the store's view is "<store>"): asked of the running
    `venice davinci run` through its socket FILE.sock (a snapshot of committed batches; ingestion goes on), or
    run on the file opened read-only when no client runs."""
    from venice_core.cli import rows
    from venice_core.davinci import read_only_sql, sql_endpoint
    from venice_core.errors import ConfigError

    if as_json and as_csv:
        raise ConfigError("give --json or --csv, not both")
    if max_rows < 1:
        raise ConfigError(f"--max-rows must be 1 or more, got {max_rows}")
    result = sql_endpoint.ask(duckdb_file, query, max_rows)
    if result is None:  # no client serves the file
        result = read_only_sql.query_file(duckdb_file, query, max_rows)
    note = rows.truncation_note(len(result["rows"]), result.get("truncated"))
    if not (as_json or as_csv):
        typer.echo(rows.as_table(result["columns"], result["rows"], note))
        return
    typer.echo((rows.as_json if as_json else rows.as_csv)(result["columns"], result["rows"]))
    if note is not None:  # stdout holds the rows only
        typer.echo(note, err=True)


@davinci_app.command("status")
def status(
    store: str = typer.Argument(None, help="Store name (default: every store)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The registered Da Vinci instances: region, version ingested, status, and whether each is live."""
    from venice_core.controller import da_vinci, stores

    with metadata() as (_config, meta):
        if store is not None:
            stores.describe_store(meta, store)  # an unknown store: one clear error
        rows = da_vinci.instances(meta, store)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo("no Da Vinci instance registered" + (f" for '{store}'" if store else ""))
        return
    for row in rows:
        state = "live" if row["live"] else "gone"
        typer.echo(
            f"{row['store']:<24} {row['region']:<8} {row['instance']:<40} v{row['version']:<4} "
            f"{row['status'] or '-':<12} {state} (heartbeat {row['heartbeat_age_seconds']}s ago)"
        )
