"""`venice up`, `venice down`, `venice status`."""

from __future__ import annotations

import json

import typer

from venice_core.cli.context import ProfileOption, use_profile
from venice_core.config import LOOPBACK, ClusterConfig, load_config
from venice_core.embedded import platform


def up(profile: str | None = ProfileOption) -> None:
    """Bring up the platform: Kafka, the metadata store (migrated), and the services after them."""
    use_profile(profile)
    config = load_config()
    platform.up(config, report=typer.echo, before_airflow=lambda running: _sync_store_dags(config, running))


def _sync_store_dags(config: ClusterConfig, airflow_running: bool) -> None:
    """Every store's DAG files as the metadata store has them, before Airflow parses them; a running Airflow is
    asked to parse each rewritten one (its store dag-processor watches no file)."""
    from venice_core.errors import ComponentError
    from venice_core.meta import MetadataStore
    from venice_core.orchestration.airflow import store_dags
    from venice_core.orchestration.airflow.api import AirflowApi

    meta = MetadataStore(config.metadata_db_url)
    try:
        result = store_dags.sync(config, meta)
    finally:
        meta.dispose()
    typer.echo(result.summary(config))
    if airflow_running and result.changes.rewritten:
        try:
            store_dags.ask_to_parse(AirflowApi(config), list(result.changes.rewritten_dags()))
        except ComponentError as exc:  # it has them at its next start
            typer.echo(f"warning: Airflow was not asked to parse the rewritten DAG files: {exc}", err=True)


def down(profile: str | None = ProfileOption) -> None:
    """Stop every component of the platform, and the stream pipelines running on it first."""
    use_profile(profile)
    config = load_config()
    _stop_stream_pipelines(config)
    platform.down(config, report=typer.echo)


def _stop_stream_pipelines(config: ClusterConfig) -> None:
    """Stop the pipelines' jobs (recorded as stopped; `venice stream start NAME` resumes one where it stopped)."""
    if not (config.data_dir / "streams").is_dir():
        return  # no pipeline was ever started here
    from venice_core.meta import MetadataStore
    from venice_core.streams import control

    meta = MetadataStore(config.metadata_db_url)
    try:
        for status in control.all_statuses(config, meta):
            if status.pid is not None and control.stop(config, meta, status.record.name):
                typer.echo(f"stream pipeline {status.record.name} stopped")
    finally:
        meta.dispose()


def status(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."), profile: str | None = ProfileOption
) -> None:
    """Show each component and whether it is healthy; exits 1 if any is not."""
    use_profile(profile)
    components = platform.status(load_config())
    if as_json:
        typer.echo(json.dumps([c.__dict__ for c in components], indent=2))
    else:
        width = max([16, *(len(c.name) + 1 for c in components)])  # the names in a column
        hosts = any(c.address for c in components)  # the hosts profile: each process's host address in a column
        for c in components:  # one line each (a driver's error may span several)
            detail = " ".join(c.detail.split())
            where = f"{c.address or '-':<15} " if hosts else ""
            typer.echo(f"{c.name:<{width}} {'healthy' if c.healthy else 'DOWN':<8} {where}{detail}")
    if not all(c.healthy for c in components):
        raise typer.Exit(1)


def metrics(
    serve: bool = typer.Option(False, "--serve", help="Serve the metrics over HTTP instead of printing them."),
    port: int = typer.Option(9404, "--port", help="Port for --serve."),
    host: str = typer.Option(LOOPBACK, "--host", help="Address --serve binds (this machine's loopback by default)."),
) -> None:
    """Print the hook metrics (per hook class and function) in Prometheus format, or serve them on /metrics."""
    from venice_core.cli.context import metadata
    from venice_core.hooks.records import metrics_text

    with metadata() as (_, meta):
        if not serve:
            typer.echo(metrics_text(meta), nl=False)
            return
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                body = metrics_text(meta).encode() if self.path == "/metrics" else b"not found\n"
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        typer.echo(f"serving hook metrics on http://{host}:{port}/metrics")
        ThreadingHTTPServer((host, port), Handler).serve_forever()
