"""The typed config from the keys' declarations: defaults, then a file's settings, then the environment's
overrides, each value parsed by its key's kind and landed where its declaration says; then the defaults that
depend on other keys, and the checks that span keys."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from venice_core.config import keys as K
from venice_core.config.hosts import HostsSettings
from venice_core.config.kinds import Integer
from venice_core.config.model import (
    AirflowSettings,
    ClientSettings,
    ClusterConfig,
    EmbeddedServerConfig,
    HookSettings,
    KafkaSettings,
    RegionConfig,
    RolloutSettings,
    SecuritySettings,
    ServerLimits,
    ServerSettings,
    SparkSettings,
)
from venice_core.config.security_layout import DATABASE_CLIENT, ca_file, certificate_files, postgres_passfile
from venice_core.errors import ConfigError

DEFAULT_DATA_DIR = Path.home() / ".venice"
_INSTANCES = Integer(1)
_REGION_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


@dataclass(frozen=True)
class Setting:
    value: str
    where: str  # `file:line`, `$VENICE__...` or `default`: every error names it


def effective_settings(file_settings: Mapping[str, Setting], env: Mapping[str, str]) -> dict[str, Setting]:
    """Defaults, over them the file's settings, over those the environment's `VENICE__` overrides; an unknown key
    in the file is refused where it is."""
    for key, setting in file_settings.items():
        if not K.is_known_key(key):
            raise ConfigError(f"{setting.where}: unknown key '{key}'")
    settings = {name: Setting(value, "default") for name, value in K.DEFAULTS.items()}
    settings.update(file_settings)
    settings.update({name: Setting(value, f"${K.KEYS[name].env}") for name, value in K.env_overrides(env).items()})
    return settings


def landed_values(settings: Mapping[str, Setting]) -> dict[str, dict[str, Any]]:
    """Each declared key's parsed value where it lands: {group: {field: value}} (top-level fields in `cluster`, a
    nested group's under `group.sub`).
    A key with no value (one derived from others, unset) lands as None."""
    groups: dict[str, dict[str, Any]] = {}
    for key in K.KEYS.values():
        setting = settings.get(key.name)
        value = None if setting is None else key.kind.parse(setting.value, f"{setting.where}: {key.name}")
        group, _, name = key.lands.rpartition(".")
        groups.setdefault(group or "cluster", {})[name] = value
    return groups


def build_config(
    file_settings: Mapping[str, Setting], source: str, env: Mapping[str, str] | None = None
) -> ClusterConfig:
    settings = effective_settings(file_settings, env or {})
    values = landed_values(settings)
    where = {name: s.where for name, s in settings.items()}
    cluster = values["cluster"]
    data_dir = Path(cluster["data_dir"] or DEFAULT_DATA_DIR)
    hosts = HostsSettings(**values["hosts"], regions=cluster["regions"])
    if hosts.enabled:
        hosts.check(where[K.HOSTS_SUBNET], where[K.HOSTS_BRIDGE])
    postgres = EmbeddedServerConfig(**values["postgres"], host=hosts.address("postgres"))
    redis = EmbeddedServerConfig(**values["redis"], host=hosts.address("redis"))
    kafka = KafkaSettings(**values["kafka"], node_hosts=_kafka_hosts(hosts, values["kafka"]["brokers"]))
    _derive(values, data_dir, postgres, redis, hosts)
    for check in _CHECKS:
        check(values, settings, where)
    return ClusterConfig(
        cluster_name=cluster["cluster_name"],
        data_dir=data_dir,
        regions=_regions(cluster["regions"], kafka, settings),
        source_region=cluster["source_region"] or cluster["regions"][0],
        metadata_db_url=cluster["metadata_db_url"],
        partitioner_classes=cluster["partitioner_classes"],
        kafka=kafka,
        spark=SparkSettings(**values["spark"]),
        airflow=AirflowSettings(**values["airflow"]),
        redis=redis,
        postgres=postgres,
        server=ServerSettings(**values["server"], limits=ServerLimits(**values["server.limits"])),
        client=ClientSettings(**values["client"]),
        rollout=RolloutSettings(**values["rollout"]),
        hooks=HookSettings(**values["hooks"], configs=_hook_configs(settings)),
        hosts=hosts,
        security=SecuritySettings(**values["security"]),
        source=source,
    )


def embedded_postgres_url(host: str, port: int, database: str, query: Mapping[str, str] | None = None) -> str:
    """A database of the embedded PostgreSQL as its `venice` role: trusted on an unsecured platform, else with
    `query`, libpq's parameters that name the files it connects with (`postgres_client_files`), never a secret."""
    url = f"postgresql+psycopg2://venice@{host}:{port}/{database}"
    return f"{url}?{urllib.parse.urlencode(query, safe='/')}" if query else url


def libpq_environment(parameters: Mapping[str, str]) -> dict[str, str]:
    """libpq's connection parameters as the environment variables libpq (and asyncpg) read: `sslmode` ->
    `PGSSLMODE`, `passfile` -> `PGPASSFILE`, ..."""
    return {f"PG{name.upper()}": value for name, value in parameters.items()}


def postgres_client_files(data_dir: Path, own_ca: Path | None) -> dict[str, str]:
    """How a client reaches the embedded PostgreSQL of a secured platform (libpq's connection parameters): TLS with
    the server's certificate checked against the platform's CA and its address, a certificate of that CA presented
    (the server requires one), and the password read from a file of mode 0600."""
    cert, key = certificate_files(data_dir, DATABASE_CLIENT)
    return {
        "sslmode": "verify-full",
        "sslrootcert": str(ca_file(data_dir, own_ca)),
        "sslcert": str(cert),
        "sslkey": str(key),
        "passfile": str(postgres_passfile(data_dir)),
    }


def kafka_node_name(brokers: int, node: int) -> str:
    """An embedded Kafka node's process and host name: `kafka` alone, `kafka-<n>` in a cluster."""
    return "kafka" if brokers == 1 else f"kafka-{node}"


def _kafka_hosts(hosts: HostsSettings, brokers: int) -> tuple[str, ...]:
    """Each node's address on a host of its own (none with hosts off: every node on `kafka.embedded.host`)."""
    return tuple(hosts.address(kafka_node_name(brokers, n)) for n in range(brokers)) if hosts.enabled else ()


def _derive(
    values: dict[str, dict[str, Any]],
    data_dir: Path,
    postgres: EmbeddedServerConfig,
    redis: EmbeddedServerConfig,
    hosts: HostsSettings,
) -> None:
    """The defaults that depend on other keys (`derived` in their declarations)."""
    cluster, airflow, spark = values["cluster"], values["airflow"], values["spark"]
    security = values["security"]
    query = postgres_client_files(data_dir, security["ca_cert"]) if security["enabled"] else None
    if cluster["metadata_db_url"] is None:
        in_postgres = embedded_postgres_url(postgres.host, postgres.port, "venice", query)
        cluster["metadata_db_url"] = in_postgres if postgres.enabled else f"sqlite:///{data_dir / 'metadata.db'}"
    if airflow["db_url"] is None and postgres.enabled:
        airflow["db_url"] = embedded_postgres_url(postgres.host, postgres.port, "airflow", query)
    if airflow["celery_broker_url"] is None:
        airflow["celery_broker_url"] = f"redis://{redis.host}:{redis.port}/0"
    if airflow["api_url"] is None:
        airflow["api_url"] = f"http://{hosts.address('airflow-api-server')}:{airflow['port']}"
    if hosts.enabled and spark["workers"]:  # the standalone master on its own host, at the port spark.master gives
        port = spark["master"].rpartition(":")[2]
        spark["master"] = f"spark://{hosts.address('spark-master')}:{port}"


Check = Callable[[dict[str, dict[str, Any]], Mapping[str, Setting], Mapping[str, str]], None]


def _check_regions(
    values: dict[str, dict[str, Any]], settings: Mapping[str, Setting], where: Mapping[str, str]
) -> None:
    names, at = values["cluster"]["regions"], where[K.REGIONS]
    if not names:
        raise ConfigError(f"{at}: {K.REGIONS} must name at least one region")
    for name in names:
        if not _REGION_NAME.match(name):
            raise ConfigError(f"{at}: invalid region name '{name}' (lower-case letters, digits, '-')")
    if len(set(names)) != len(names):
        raise ConfigError(f"{at}: {K.REGIONS} lists a region twice")
    for key, setting in settings.items():
        match = K.REGION_KEY.match(key)
        if match and match.group("region") not in names:
            raise ConfigError(f"{setting.where}: '{key}' names region '{match.group('region')}', not in {K.REGIONS}")
    source = values["cluster"]["source_region"]
    if source is not None and source not in names:
        raise ConfigError(f"{where[K.SOURCE_REGION]}: source region '{source}' is not in {K.REGIONS}")


def _check_replication(values: dict[str, dict[str, Any]], _: Mapping[str, Setting], where: Mapping[str, str]) -> None:
    kafka = values["kafka"]
    factor, min_insync = kafka["topic_replication_factor"], kafka["topic_min_insync_replicas"]
    if min_insync > factor:
        raise ConfigError(
            f"{where[K.KAFKA_TOPIC_MIN_INSYNC_REPLICAS]}: {K.KAFKA_TOPIC_MIN_INSYNC_REPLICAS} ({min_insync}) is more "
            f"than {K.KAFKA_TOPIC_REPLICATION_FACTOR} ({factor}): no write could be acknowledged"
        )
    if kafka["enabled"] and factor > kafka["brokers"]:
        raise ConfigError(
            f"{where[K.KAFKA_TOPIC_REPLICATION_FACTOR]}: {K.KAFKA_TOPIC_REPLICATION_FACTOR} ({factor}) is more than "
            f"the embedded Kafka's brokers ({kafka['brokers']}, {K.KAFKA_EMBEDDED_BROKERS})"
        )


def _check_celery(values: dict[str, dict[str, Any]], settings: Mapping[str, Setting], where: Mapping[str, str]) -> None:
    airflow = values["airflow"]
    if airflow["executor"] != "CeleryExecutor":
        return
    if not values["redis"]["enabled"] and K.AIRFLOW_CELERY_BROKER_URL not in settings:
        raise ConfigError(
            f"{where[K.AIRFLOW_EXECUTOR]}: the CeleryExecutor needs a broker: set {K.REDIS_EMBEDDED_ENABLED}=true "
            f"or {K.AIRFLOW_CELERY_BROKER_URL}"
        )
    if airflow["db_url"] is None:
        raise ConfigError(
            f"{where[K.AIRFLOW_EXECUTOR]}: the CeleryExecutor's workers cannot share SQLite: set "
            f"{K.POSTGRES_EMBEDDED_ENABLED}=true or {K.AIRFLOW_DB_URL}"
        )


def _check_spark(values: dict[str, dict[str, Any]], _: Mapping[str, Setting], where: Mapping[str, str]) -> None:
    spark = values["spark"]
    if spark["workers"] and not re.match(r"^spark://[^:/]+:\d+$", spark["master"]):
        raise ConfigError(
            f"{where[K.SPARK_STANDALONE_WORKERS]}: a standalone cluster needs {K.SPARK_MASTER} as spark://host:port "
            f"(its master's address), got {spark['master']!r}"
        )


_CHECKS: tuple[Check, ...] = (_check_regions, _check_replication, _check_celery, _check_spark)


def _regions(names: tuple[str, ...], kafka: KafkaSettings, settings: Mapping[str, Setting]) -> tuple[RegionConfig, ...]:
    shared_broker = len(names) > 1
    regions = []
    for name in names:
        bootstrap = settings.get(f"region.{name}.kafka.bootstrap.servers")
        prefix = settings.get(f"region.{name}.topic.prefix")
        instances = settings.get(f"region.{name}.instances")
        at = f"{instances.where}: region.{name}.instances" if instances else ""
        count = 1 if instances is None else _INSTANCES.parse(instances.value, at)
        regions.append(
            RegionConfig(
                name=name,
                kafka_bootstrap=bootstrap.value if bootstrap else kafka.bootstrap,
                # Regions sharing the embedded broker keep their topics apart by prefix.
                topic_prefix=prefix.value if prefix else (f"{name}." if shared_broker else ""),
                instances=count,
                replication_factor=kafka.topic_replication_factor,
                min_insync_replicas=kafka.topic_min_insync_replicas,
            )
        )
    return tuple(regions)


def _hook_configs(settings: Mapping[str, Setting]) -> Mapping[str, str]:
    prefix = K.HOOKS_CONFIGS_PREFIX
    return MappingProxyType({k[len(prefix) :]: s.value for k, s in settings.items() if k.startswith(prefix)})
