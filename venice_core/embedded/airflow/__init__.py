"""The embedded Airflow: its components started directly (`airflow api-server`, `scheduler`, and two
`dag-processor`s, one for the stores' generated DAG files and one for the rest; LocalExecutor on SQLite), each a
managed process of its own, with the project's dags/ and plugins/, bound to 127.0.0.1, parallelism small enough
for two cores. No triggerer by default: nothing the project runs defers (sensors reschedule, and Airflow 3.3's
human-in-the-loop tasks wait in `awaiting_input` without one); `airflow.triggerer.enabled` runs one.

The cluster profile's Airflow (`airflow.executor=CeleryExecutor`): its database on PostgreSQL (`airflow.db.url`, the
embedded server's `airflow` database), tasks sent through Redis to `airflow.celery.workers` Celery workers, each a
managed process (`airflow-celery-worker-<n>`, Celery node `venice-worker-<n>@<host>`, two task slots); the scheduler
runs no task itself. A task whose worker dies is noticed by its missing heartbeats within ~35 s and retried (on a
worker alive). The workers serve no logs: the API server reads every task's log from the log folder they share on
this machine, as it does the local executor's. On a database server every component runs under `keepalive`, which
starts it again when it exits: Airflow's scheduler, triggerer and dag-processors exit at a database error, and the
server may restart under them.

Not `airflow standalone`, which costs a parent process importing Airflow (and a triggerer) and creates the
database before it starts anything. The database is created once per Airflow version, as a template in the cache
(`$VENICE_CACHE_DIR/airflow-db/`), and copied into a new Airflow home; a home's database from another Airflow
version is migrated in place first. On the embedded PostgreSQL the template is a dump of a migrated database (per
Airflow and PostgreSQL version), restored into an empty one in 0.3 s instead of a 3 s migration; another server's
database is migrated by `airflow db migrate` when its schema is not this Airflow's. The settings are in the home's
airflow.cfg too, so that Airflow's own CLI given AIRFLOW_HOME alone sees this same Airflow; `venice airflow` runs it
in the components' environment.

The package by concern: `component_processes` (the components by name, their managed processes), `configuration`
(airflow.cfg, the bundles, the environment), `health`, `database` (the templates and migrations), `control`
(prepare, start, stop). Where Airflow is (its home, URL, user, password, bundles' names) is
`venice_core.deployment.airflow`, below this package, which the layers above read. Here, what the rest of the
platform calls."""

from __future__ import annotations

from venice_core.embedded.airflow.component_processes import (
    CELERY_CONCURRENCY,
    COMPONENTS,
    STORE_DAG_PROCESSOR,
    TRIGGERER,
    celery_worker_name,
    celery_workers,
    components,
    pids,
    processes,
    triggerer,
)
from venice_core.embedded.airflow.configuration import database_url, environment, settings, spark_connection
from venice_core.embedded.airflow.control import kill, prepare, run_cli, start, stop
from venice_core.embedded.airflow.health import answers, health, is_healthy, triggerer_healthy

__all__ = [
    "CELERY_CONCURRENCY",
    "COMPONENTS",
    "STORE_DAG_PROCESSOR",
    "TRIGGERER",
    "answers",
    "celery_worker_name",
    "celery_workers",
    "components",
    "database_url",
    "environment",
    "health",
    "is_healthy",
    "kill",
    "pids",
    "prepare",
    "processes",
    "run_cli",
    "settings",
    "spark_connection",
    "start",
    "stop",
    "triggerer",
    "triggerer_healthy",
]
