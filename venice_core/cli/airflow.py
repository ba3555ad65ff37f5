"""`venice airflow ARGS...`: Airflow's own CLI against the platform's Airflow."""

from __future__ import annotations

import typer

from venice_core.config import ClusterConfig, load_config
from venice_core.embedded import airflow as embedded_airflow

# Every argument goes to `airflow`: options too (`-h` is Airflow's help, `--help` before any argument ours), and
# parsing stops at the first argument, so `venice airflow tasks --help` is Airflow's help of `tasks`.
CONTEXT_SETTINGS: dict[str, bool] = {
    "allow_extra_args": True,
    "ignore_unknown_options": True,
    "allow_interspersed_args": False,
}


def airflow(ctx: typer.Context) -> None:
    """Run Airflow's own command line (`airflow ARGS...`) against the platform's Airflow, with the environment
    its components get: the same Airflow home, database, DAGs and venice config. Exits with airflow's status.
    Airflow need not be running (its database is prepared if missing).

    \b
    Examples:
      venice airflow tasks list venice_push__users
      venice airflow dags test venice_push__users -c '{"input": "/data/in.avro"}'
      venice airflow -h
    """
    config = load_config()
    _sync_store_dags(config)
    raise typer.Exit(embedded_airflow.run_cli(config, ctx.args))


def _sync_store_dags(config: ClusterConfig) -> None:
    """The stores' DAG files as the metadata store has them (`airflow tasks list venice_push__users` parses the
    store's file): nothing when the metadata store is not there yet."""
    from venice_core.errors import VeniceError
    from venice_core.meta import MetadataStore
    from venice_core.orchestration.airflow import store_dags

    meta = MetadataStore(config.metadata_db_url)
    try:
        meta.check_migrated()
        store_dags.sync(config, meta)
    except VeniceError:  # no metadata store yet (`venice up` has not run): no store, no store DAG
        pass
    finally:
        meta.dispose()
