"""The cluster profile's Airflow settings: the CeleryExecutor on Redis, its database on PostgreSQL (the embedded
server's, or any `airflow.db.url`), the Celery workers and the triggerer as components; the embedded default
(LocalExecutor on SQLite) as it was."""

from __future__ import annotations

import configparser
import dataclasses
import json
from pathlib import Path

import pytest

from tests.support.platform import make_platform_env
from venice_core.config import ClusterConfig
from venice_core.deployment import airflow as deployment
from venice_core.embedded import airflow, platform
from venice_core.embedded.airflow import component_processes, configuration, control
from venice_core.embedded.airflow import database as airflow_database

CLUSTER = {
    "postgres.embedded.enabled": "true",
    "postgres.embedded.port": "5832",
    "redis.embedded.enabled": "true",
    "redis.embedded.port": "6779",
    "airflow.executor": "CeleryExecutor",
    "airflow.celery.workers": "2",
    "airflow.triggerer.enabled": "true",
}
WORKERS = ("celery-worker-0", "celery-worker-1")


@pytest.fixture
def cluster(tmp_path: Path) -> ClusterConfig:
    return make_platform_env(tmp_path / "home", {"airflow.enabled": "true", **CLUSTER}).config


def test_the_celery_executor_runs_on_redis_with_its_database_and_results_on_postgres(cluster: ClusterConfig) -> None:
    settings = airflow.settings(cluster)
    database = "postgresql+psycopg2://venice@127.0.0.1:5832/airflow"
    assert settings[("core", "executor")] == "CeleryExecutor"
    assert settings[("database", "sql_alchemy_conn")] == database == airflow.database_url(cluster)
    assert settings[("celery", "broker_url")] == "redis://127.0.0.1:6779/0"
    assert settings[("celery", "result_backend")] == f"db+{database}"
    assert settings[("celery", "worker_concurrency")] == "2"
    assert json.loads(settings[("celery", "result_backend_sqlalchemy_engine_options")]) == {"pool_pre_ping": True}
    # A task whose worker died is failed (and retried) after 30 s without heartbeats, not Airflow's 300.
    assert settings[("scheduler", "task_instance_heartbeat_timeout")] == "30"
    assert settings[("database", "max_db_retries")] == "10"
    assert airflow_database._embedded_database(cluster) is not None  # its empty database restored from the cached dump

    configuration.write_config(cluster)  # the same in the home's airflow.cfg, as Airflow's own parser reads it
    cfg = configparser.ConfigParser()
    cfg.read(deployment.home(cluster) / "airflow.cfg")
    assert cfg.get("core", "executor") == "CeleryExecutor"
    assert cfg.get("celery", "result_backend") == f"db+{database}"
    env = airflow.environment(cluster)
    assert env["AIRFLOW__CELERY__BROKER_URL"] == "redis://127.0.0.1:6779/0"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == database


def test_the_workers_and_the_triggerer_are_components_of_their_own(cluster: ClusterConfig) -> None:
    assert airflow.components(cluster) == (
        "api-server", "triggerer", *WORKERS, "dag-processor", "store-dag-processor", "scheduler",
    )  # fmt: skip
    assert [p.name for p in airflow.celery_workers(cluster)] == [f"airflow-{w}" for w in WORKERS]
    assert control._component_command(cluster, "celery-worker-1") == [
        "celery", "worker", "--concurrency", "2", "--celery-hostname", "venice-worker-1@%h",
        "--skip-serve-logs", "--without-mingle", "--without-gossip",
    ]  # fmt: skip
    assert control._component_command(cluster, "triggerer") == ["triggerer", "--skip-serve-logs"]
    # A worker's tasks name it as their host: a task instance's `hostname` says which worker ran each try.
    env = control._component_env("celery-worker-1", airflow.environment(cluster))
    assert env[component_processes.ENV_WORKER] == "venice-worker-1"
    assert env["AIRFLOW__CORE__HOSTNAME_CALLABLE"] == component_processes.HOSTNAME_CALLABLE
    # `venice up`'s plan (docker-compose.yaml's services) names the same processes.
    planned = [p.name for p in platform.plan(cluster) if p.name.startswith("airflow-")]
    assert planned == [p.name for p in airflow.processes(cluster)]


def test_a_worker_names_itself_as_the_host_of_its_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(component_processes.socket, "gethostname", lambda: "box")
    monkeypatch.setenv(component_processes.ENV_WORKER, "venice-worker-0")
    assert component_processes.worker_hostname() == "venice-worker-0@box"


def test_an_airflow_db_url_of_another_server_is_used_as_it_is(cluster: ClusterConfig) -> None:
    url = "postgresql+psycopg2://airflow:secret@db.example:5432/airflow"
    config = dataclasses.replace(cluster, airflow=dataclasses.replace(cluster.airflow, db_url=url))
    assert airflow.settings(config)[("database", "sql_alchemy_conn")] == url
    assert airflow.settings(config)[("celery", "result_backend")] == f"db+{url}"
    assert airflow_database._embedded_database(config) is None  # migrated by `airflow db migrate`, no dump of it
    assert airflow_database._safe(url) == "postgresql+psycopg2://airflow:***@db.example:5432/airflow"


def test_the_embedded_default_stays_the_local_executor_on_sqlite(tmp_path: Path) -> None:
    config = make_platform_env(tmp_path / "home", {"airflow.enabled": "true"}).config
    settings = airflow.settings(config)
    assert settings[("core", "executor")] == "LocalExecutor"
    assert settings[("database", "sql_alchemy_conn")].startswith(f"sqlite:///{deployment.home(config) / 'airflow.db'}")
    assert not any(section.startswith("celery") for section, _ in settings)
    assert ("scheduler", "task_instance_heartbeat_timeout") not in settings
    assert ("database", "max_db_retries") not in settings
    assert airflow.components(config) == airflow.COMPONENTS
    assert airflow.celery_workers(config) == []


def test_stop_finds_the_airflow_processes_the_config_no_longer_names(tmp_path: Path) -> None:
    """A worker of a larger `airflow.celery.workers`, a triggerer turned off, an old `airflow standalone`: `venice
    down` stops them too (each found by its pid file)."""
    config = make_platform_env(tmp_path / "home", {"airflow.enabled": "true"}).config
    config.run_dir.mkdir(parents=True)
    for name in ("airflow-celery-worker-3", "airflow-triggerer", "airflow", "kafka"):
        (config.run_dir / f"{name}.pid").write_text("999999")
    names = [p.name for p in control._all_processes(config)]
    assert names == [
        *(f"airflow-{c}" for c in airflow.COMPONENTS), "airflow-celery-worker-3", "airflow-triggerer", "airflow",
    ]  # fmt: skip


def test_a_secured_platforms_airflow_reaches_postgres_and_redis_over_tls_naming_files_not_secrets(
    tmp_path: Path,
) -> None:
    secured = make_platform_env(
        tmp_path / "home", {"airflow.enabled": "true", **CLUSTER, "security.enabled": "true"}
    ).config
    security = tmp_path / "home" / "security"
    settings = airflow.settings(secured)
    sync = settings[("database", "sql_alchemy_conn")]
    assert sync.startswith("postgresql+psycopg2://venice@127.0.0.1:5832/airflow?sslmode=verify-full&")
    for name in ("sslrootcert=" + str(security / "ca.pem"), "passfile=" + str(security / "postgres.pgpass")):
        assert name in sync
    assert secured.metadata_db_url == sync.replace("/airflow?", "/venice?")
    # asyncpg (Airflow's async engine) takes its own keywords, and the TLS files from the environment only.
    assert settings[("database", "sql_alchemy_conn_async")] == (
        "postgresql+asyncpg://venice@127.0.0.1:5832/airflow"
        f"?passfile={str(security / 'postgres.pgpass').replace('/', '%2F')}&ssl=verify-full"
    )
    env = airflow.environment(secured)
    assert env["PGSSLROOTCERT"] == str(security / "ca.pem")
    assert env["PGSSLCERT"] == str(security / "certs" / "venice.pem")
    assert env["PGSSLKEY"] == str(security / "certs" / "venice.key")
    broker = settings[("celery", "broker_url")]
    assert broker.startswith("rediss://:") and broker.endswith("@127.0.0.1:6779/0")
    assert settings[("celery", "ssl_active")] == "True"
    assert settings[("celery", "ssl_cacert")] == str(security / "ca.pem")
    assert settings[("celery", "ssl_cert")] == str(security / "certs" / "admin.pem")
    assert settings[("celery", "ssl_key")] == str(security / "certs" / "admin.key")
    # Unsecured: none of it (Airflow derives the async URL itself).
    plain = make_platform_env(tmp_path / "plain", {"airflow.enabled": "true", **CLUSTER}).config
    assert ("database", "sql_alchemy_conn_async") not in airflow.settings(plain)
    assert "PGSSLROOTCERT" not in airflow.environment(plain)
