"""`venice airflow ARGS...`: Airflow's own CLI against the platform's Airflow."""

from __future__ import annotations

import typer

from venice_core.config import load_config
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
    raise typer.Exit(embedded_airflow.run_cli(load_config(), ctx.args))
