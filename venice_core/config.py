"""Cluster configuration: one `key=value` properties file over built-in defaults.

The file is named by `$VENICE_CONFIG`, else `$VENICE_HOME/venice.properties` is used when it exists, else the
defaults alone apply. Every key is a named constant below with its default beside it; an unknown or malformed key
is reported with the file and line it came from.
"""

from __future__ import annotations

import math
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from venice_core.errors import ConfigError

ENV_CONFIG = "VENICE_CONFIG"
ENV_HOME = "VENICE_HOME"
ENV_PROFILE = "VENICE_PROFILE"  # `venice --profile NAME`: the config file of a profile the project ships
DEFAULT_HOME = Path.home() / ".venice"
CONFIG_FILE_NAME = "venice.properties"

# key -> default (None: computed from other keys)
CLUSTER_NAME = "cluster.name"
DATA_DIR = "data.dir"
REGIONS = "regions"
SOURCE_REGION = "source.region"
METADATA_DB_URL = "metadata.db.url"
KAFKA_EMBEDDED_ENABLED = "kafka.embedded.enabled"
KAFKA_EMBEDDED_HOST = "kafka.embedded.host"
KAFKA_EMBEDDED_PORT = "kafka.embedded.port"
KAFKA_EMBEDDED_CONTROLLER_PORT = "kafka.embedded.controller.port"
KAFKA_EMBEDDED_HEAP = "kafka.embedded.heap"
KAFKA_EMBEDDED_JVM_OPTIONS = "kafka.embedded.jvm.options"
# The embedded Kafka as a KRaft cluster: node n (broker and controller) on `port + n` and `controller.port + n`.
KAFKA_EMBEDDED_BROKERS = "kafka.embedded.brokers"
# Every topic the platform creates (version and real-time topics): its replicas, and how many must have a write
# before the broker acknowledges it (producers send with acks=all).
KAFKA_TOPIC_REPLICATION_FACTOR = "kafka.topic.replication.factor"
KAFKA_TOPIC_MIN_INSYNC_REPLICAS = "kafka.topic.min.insync.replicas"
# Where the Spark jobs (push, repush, streaming writers) are submitted: `local[...]`, or a cluster's master URL
# (the Airflow connection `spark_default` names it). `venice up` starts a standalone cluster of this many workers
# (each with these cores and memory) when there are any, its master at `spark.master` (spark://host:port).
SPARK_MASTER = "spark.master"
SPARK_STANDALONE_WORKERS = "spark.standalone.workers"
SPARK_STANDALONE_WORKER_CORES = "spark.standalone.worker.cores"
SPARK_STANDALONE_WORKER_MEMORY = "spark.standalone.worker.memory"
SPARK_STANDALONE_UI_PORT = "spark.standalone.ui.port"  # the master's web UI; worker n's on the next ports
# Airflow's executor (LocalExecutor, or CeleryExecutor with this many workers on a broker), its database
# (default: SQLite in its home; on the embedded PostgreSQL when there is one), and whether a triggerer runs.
AIRFLOW_EXECUTOR = "airflow.executor"
AIRFLOW_CELERY_WORKERS = "airflow.celery.workers"
AIRFLOW_CELERY_BROKER_URL = "airflow.celery.broker.url"
AIRFLOW_DB_URL = "airflow.db.url"
AIRFLOW_TRIGGERER_ENABLED = "airflow.triggerer.enabled"
# Servers `venice up` runs itself: Redis (the Celery broker) and PostgreSQL (Airflow's and the metadata database).
REDIS_EMBEDDED_ENABLED = "redis.embedded.enabled"
REDIS_EMBEDDED_PORT = "redis.embedded.port"
POSTGRES_EMBEDDED_ENABLED = "postgres.embedded.enabled"
POSTGRES_EMBEDDED_PORT = "postgres.embedded.port"
SERVER_HOST = "server.host"
SERVER_PORT_BASE = "server.port.base"
# What one client may ask of a region server's read API: bounded so a bad client cannot exhaust memory or threads.
SERVER_MAX_REQUEST_BYTES = "server.max.request.bytes"
SERVER_MAX_BATCH_KEYS = "server.max.batch.keys"
SERVER_MAX_CONNECTIONS = "server.max.connections"
SERVER_IDLE_TIMEOUT_SECONDS = "server.idle.timeout.seconds"
# Replicated regions: an instance's lease on its registration (renewed every second; a leader whose lease ran out
# produces no more), how long an instance may be gone before its replicas are placed elsewhere, and how many ready
# replicas of every partition a region needs to swap (0: the store's replication factor).
INSTANCE_LEASE_SECONDS = "instance.lease.seconds"
INSTANCE_OFFLINE_GRACE_SECONDS = "instance.offline.grace.seconds"
MIN_READY_REPLICAS = "min.ready.replicas"
# How long a region's rollout waits for its live Da Vinci clients to serve a version before the hooks are asked with
# the ones that do not listed in the job status (VIP-4: the clients swap before the region's servers).
DAVINCI_SWAP_TIMEOUT_SECONDS = "davinci.swap.timeout.seconds"
# A routing client's second request to another replica when the first has not answered within this (0: never).
CLIENT_LONG_TAIL_RETRY_MS = "client.long.tail.retry.ms"
AIRFLOW_ENABLED = "airflow.enabled"
AIRFLOW_PORT = "airflow.port"
AIRFLOW_USER_DAGS_FOLDER = "airflow.user.dags.folder"  # the users' own DAGs, beside the platform's
# A rollout step that fails on its own (not by a hook's ABORT/ROLLBACK or refused input) is retried.
ROLLOUT_STEP_RETRIES = "rollout.step.retries"
ROLLOUT_STEP_RETRY_DELAY_SECONDS = "rollout.step.retry.delay.seconds"

# VIP-4 hook keys, verbatim.
HOOKS = "venice.store.lifecycle.hooks"
HOOKS_THREADS = "venice.store.lifecycle.hooks.threads"
HOOKS_TIMEOUT_SECONDS = "venice.store.lifecycle.hooks.timeout.seconds"
HOOKS_WAIT_INTERVAL_SECONDS = "venice.store.lifecycle.hooks.wait.interval.seconds"
HOOKS_FAILURE_POLICY = "venice.store.lifecycle.hooks.failure.policy"
# How long a step may keep answering WAIT before the rollout gives up with ABORT (not a VIP-4 key). Unset by default:
# VIP-4's WAIT is "re-run this step later", for as long as the hooks answer it (a swap window over a weekend, a
# manual approval pending for days). An operator who wants a limit sets it here or in a store's hook configs.
HOOKS_WAIT_MAX_SECONDS = "venice.store.lifecycle.hooks.wait.max.seconds"
HOOKS_CONFIGS_PREFIX = "venice.store.lifecycle.hooks.configs."
# The partitioner classes a store may name (`partitioner.class`), besides the default (MD5), which is always allowed:
# loaded from this list only, never from a store's data (`protocol.partitioner_config`).
PARTITIONER_CLASSES = "venice.partitioner.classes"

DEFAULTS: Mapping[str, str] = MappingProxyType(
    {
        CLUSTER_NAME: "venice-cluster",
        REGIONS: "dc-0,dc-1,dc-2",
        KAFKA_EMBEDDED_ENABLED: "true",
        KAFKA_EMBEDDED_HOST: "127.0.0.1",
        KAFKA_EMBEDDED_PORT: "9092",
        KAFKA_EMBEDDED_CONTROLLER_PORT: "9093",
        KAFKA_EMBEDDED_HEAP: "512m",
        KAFKA_EMBEDDED_JVM_OPTIONS: "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",  # see EmbeddedKafkaConfig
        KAFKA_EMBEDDED_BROKERS: "1",
        KAFKA_TOPIC_REPLICATION_FACTOR: "1",
        KAFKA_TOPIC_MIN_INSYNC_REPLICAS: "1",
        SPARK_MASTER: "local[2,4]",  # two cores; a failed task is retried up to 4 times, as on a cluster
        SPARK_STANDALONE_WORKERS: "0",
        SPARK_STANDALONE_WORKER_CORES: "1",
        SPARK_STANDALONE_WORKER_MEMORY: "2g",
        SPARK_STANDALONE_UI_PORT: "8090",
        AIRFLOW_EXECUTOR: "LocalExecutor",
        AIRFLOW_CELERY_WORKERS: "2",
        AIRFLOW_TRIGGERER_ENABLED: "false",
        REDIS_EMBEDDED_ENABLED: "false",
        REDIS_EMBEDDED_PORT: "6379",
        POSTGRES_EMBEDDED_ENABLED: "false",
        POSTGRES_EMBEDDED_PORT: "5432",
        SERVER_HOST: "127.0.0.1",
        SERVER_PORT_BASE: "7070",
        SERVER_MAX_REQUEST_BYTES: str(1024 * 1024),
        SERVER_MAX_BATCH_KEYS: "1000",
        SERVER_MAX_CONNECTIONS: "512",
        SERVER_IDLE_TIMEOUT_SECONDS: "30",
        INSTANCE_LEASE_SECONDS: "5",
        INSTANCE_OFFLINE_GRACE_SECONDS: "30",
        MIN_READY_REPLICAS: "0",
        CLIENT_LONG_TAIL_RETRY_MS: "20",
        DAVINCI_SWAP_TIMEOUT_SECONDS: "300",
        AIRFLOW_ENABLED: "true",
        AIRFLOW_PORT: "8080",
        ROLLOUT_STEP_RETRIES: "2",
        ROLLOUT_STEP_RETRY_DELAY_SECONDS: "10",
        HOOKS: "",
        HOOKS_THREADS: "4",
        HOOKS_TIMEOUT_SECONDS: "60",
        HOOKS_WAIT_INTERVAL_SECONDS: "60",
        HOOKS_FAILURE_POLICY: "PROCEED",
        HOOKS_WAIT_MAX_SECONDS: "",
        PARTITIONER_CLASSES: "venice_core.protocol.partitioner.KeyFieldVenicePartitioner",
    }
)
_COMPUTED_KEYS = frozenset(
    {DATA_DIR, SOURCE_REGION, METADATA_DB_URL, AIRFLOW_USER_DAGS_FOLDER, AIRFLOW_DB_URL, AIRFLOW_CELERY_BROKER_URL}
)
AIRFLOW_EXECUTORS = ("LocalExecutor", "CeleryExecutor")
_REGION_KEY = re.compile(r"^region\.(?P<region>[^.]+)\.(?P<setting>kafka\.bootstrap\.servers|topic\.prefix|instances)$")
_REGION_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
HOOK_FAILURE_POLICIES = ("PROCEED", "WAIT", "ABORT")


@dataclass(frozen=True)
class RegionConfig:
    name: str
    kafka_bootstrap: str
    topic_prefix: str
    instances: int = 1  # region-server instances (`region.<r>.instances`)
    replication_factor: int = 1  # of the topics the platform creates (`kafka.topic.replication.factor`)
    min_insync_replicas: int = 1

    def version_topic(self, store: str, version: int) -> str:
        return f"{self.topic_prefix}{store}_v{version}"

    def real_time_topic(self, store: str) -> str:
        """A hybrid store's nearline writes made in this region (Venice's `<store>_rt`)."""
        return f"{self.topic_prefix}{store}_rt"


@dataclass(frozen=True)
class EmbeddedKafkaConfig:
    enabled: bool
    host: str
    port: int
    controller_port: int
    heap: str
    # `kafka.embedded.jvm.options`'s default, C1 only and the serial collector: on a few cores, C2's compiler threads
    # and G1's concurrent work took 3 of the broker's 7 CPU-seconds in a 1M-record push (bench/push_throughput), for
    # no gain in its throughput there.
    jvm_options: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
    brokers: int = 1

    def broker_port(self, node: int) -> int:
        return self.port + node

    def node_controller_port(self, node: int) -> int:
        return self.controller_port + node

    @property
    def bootstrap(self) -> str:
        """Every broker's address, as clients are given them."""
        return ",".join(f"{self.host}:{self.broker_port(n)}" for n in range(self.brokers))


@dataclass(frozen=True)
class SparkStandaloneConfig:
    """The standalone Spark cluster `venice up` runs (no workers: none runs, jobs go to `spark.master` as it is)."""

    workers: int = 0
    worker_cores: int = 1
    worker_memory: str = "2g"
    ui_port: int = 8090


@dataclass(frozen=True)
class EmbeddedServerConfig:
    """A server `venice up` runs itself on 127.0.0.1 (Redis, PostgreSQL)."""

    enabled: bool = False
    port: int = 0


@dataclass(frozen=True)
class HookSettings:
    class_paths: tuple[str, ...]
    threads: int
    timeout_seconds: float
    wait_interval_seconds: float
    failure_policy: str
    configs: Mapping[str, str] = field(default_factory=dict)
    wait_max_seconds: float | None = None  # None: a WAIT is asked again for as long as it is answered


@dataclass(frozen=True)
class ServerLimits:
    """Bounds on a region server's read API (see `server/http`)."""

    max_request_bytes: int = 1024 * 1024
    max_batch_keys: int = 1000
    max_connections: int = 512
    idle_timeout_seconds: float = 30.0


@dataclass(frozen=True)
class ClusterConfig:
    cluster_name: str
    home: Path
    regions: tuple[RegionConfig, ...]
    source_region: str
    metadata_db_url: str
    kafka: EmbeddedKafkaConfig
    server_host: str
    server_port_base: int
    airflow_enabled: bool
    airflow_port: int
    hooks: HookSettings
    step_retries: int
    step_retry_delay_seconds: float
    source: str  # where the settings came from, for error messages
    instance_lease_seconds: float = 5.0
    instance_offline_grace_seconds: float = 30.0
    min_ready_replicas: int = 0  # 0: every replica (the store's replication factor)
    client_long_tail_retry_ms: float = 20.0
    davinci_swap_timeout_seconds: float = 300.0
    server_limits: ServerLimits = field(default_factory=ServerLimits)
    airflow_user_dags: Path | None = None  # a folder of the users' DAGs the embedded Airflow parses too
    spark_master: str = "local[2,4]"
    spark_standalone: SparkStandaloneConfig = field(default_factory=SparkStandaloneConfig)
    airflow_executor: str = "LocalExecutor"
    airflow_celery_workers: int = 2
    airflow_celery_broker_url: str = ""
    airflow_db_url: str | None = None  # None: SQLite in the Airflow home
    airflow_triggerer: bool = False
    redis: EmbeddedServerConfig = field(default_factory=EmbeddedServerConfig)
    postgres: EmbeddedServerConfig = field(default_factory=EmbeddedServerConfig)
    partitioner_classes: tuple[
        str, ...
    ] = ()  # `venice.partitioner.classes` (the default partitioner is always allowed)

    @property
    def spark_standalone_master(self) -> tuple[str, int] | None:
        """(host, port) of the standalone master `venice up` runs, or None when it runs none."""
        if self.spark_standalone.workers == 0:
            return None
        host, _, port = self.spark_master.removeprefix("spark://").rpartition(":")
        return host, int(port)

    def region(self, name: str) -> RegionConfig:
        for region in self.regions:
            if region.name == name:
                return region
        known = ", ".join(r.name for r in self.regions)
        raise ConfigError(f"unknown region '{name}' (configured: {known})")

    @property
    def region_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.regions)

    def server_port(self, region: str, instance: int = 0) -> int:
        """Instance 0 of each region on `server.port.base + i` (i: the region's index), instance n on
        `base + n * len(regions) + i`: one region's instances never collide with another's."""
        index = self.region_names.index(self.region(region).name)
        return self.server_port_base + self.check_instance(region, instance) * len(self.regions) + index

    def check_instance(self, region: str, instance: int) -> int:
        count = self.region(region).instances
        if not 0 <= instance < count:
            raise ConfigError(
                f"region {region} has {count} instance{'s' if count != 1 else ''} (region.{region}.instances): "
                f"instance {instance} is out of range 0..{count - 1}"
            )
        return instance

    @property
    def client_host(self) -> str:
        """Where a client on this machine reaches a server bound to `server.host`."""
        return "127.0.0.1" if self.server_host == "0.0.0.0" else self.server_host

    @property
    def advertised_host(self) -> str:
        """The address an instance registers for routing clients: its host name when bound to every interface (a
        container's, in docker-compose.yaml), else the address it is bound to."""
        return socket.gethostname() if self.server_host == "0.0.0.0" else self.server_host

    @property
    def instances(self) -> tuple[tuple[str, int], ...]:
        """Every configured region-server instance as (region, instance), region by region."""
        return tuple((r.name, n) for r in self.regions for n in range(r.instances))

    def server_addresses(self, region: str) -> list[tuple[str, int]]:
        """Every configured instance of the region, instance 0 first: where a routing client looks for one alive."""
        return [(self.client_host, self.server_port(region, n)) for n in range(self.region(region).instances)]

    def instance_dir(self, region: str, instance: int = 0) -> Path:
        """An instance's partition storage (instance 0 keeps the single-instance layout)."""
        name = self.region(region).name
        return self.home / "regions" / (name if self.check_instance(name, instance) == 0 else f"{name}.{instance}")

    @property
    def run_dir(self) -> Path:
        """Pid files and logs of the processes `venice up` starts."""
        return self.home / "run"


@dataclass(frozen=True)
class _Setting:
    value: str
    where: str


def parse_properties(text: str, source: str) -> dict[str, _Setting]:
    """Parse `key=value` (or `key: value`) lines; `#` and `!` start comments, as in Java properties files."""
    settings: dict[str, _Setting] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:]\s*(.*)$", line)
        where = f"{source}:{lineno}"
        if not match:
            raise ConfigError(f"{where}: malformed line (expected key=value): {raw.strip()!r}")
        key, value = match.group(1), match.group(2).strip()
        if key in settings:
            raise ConfigError(f"{where}: duplicate key '{key}' (first set at {settings[key].where})")
        settings[key] = _Setting(value, where)
    return settings


def _is_known_key(key: str) -> bool:
    return (
        key in DEFAULTS
        or key in _COMPUTED_KEYS
        or key.startswith(HOOKS_CONFIGS_PREFIX)
        or _REGION_KEY.match(key) is not None
    )


def _int(settings: Mapping[str, _Setting], key: str, minimum: int = 0) -> int:
    setting = settings[key]
    try:
        value = int(setting.value)
    except ValueError:
        raise ConfigError(f"{setting.where}: {key} must be an integer, got {setting.value!r}") from None
    if value < minimum:
        raise ConfigError(f"{setting.where}: {key} must be at least {minimum}, got {value}")
    return value


def _float(settings: Mapping[str, _Setting], key: str, zero: bool = False) -> float:
    """A positive number (or 0 too, where `zero`: a setting that 0 turns off)."""
    setting = settings[key]
    try:
        value = float(setting.value)
    except ValueError:
        raise ConfigError(f"{setting.where}: {key} must be a number, got {setting.value!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{setting.where}: {key} must be a finite number, got {setting.value!r}")
    if value < 0 or (value == 0 and not zero):
        raise ConfigError(f"{setting.where}: {key} must be {'0 or more' if zero else 'positive'}, got {value}")
    return value


def _path(settings: Mapping[str, _Setting], key: str) -> Path | None:
    """An absolute path (a relative one is taken from where the config is loaded, not from where a component that
    reads it runs)."""
    return Path(settings[key].value).expanduser().absolute() if key in settings else None


def parse_bool(value: object, what: str) -> bool:
    """`true` or `false`, in any case: the one spelling of a boolean, in the cluster config and in a push's or a
    repush's confs (`allow.empty.input`, `repush.ttl.enable`, ...). ConfigError naming `what` otherwise: a `1`,
    `yes` or typo is refused, not read as false."""
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{what} must be true or false, got {value!r}")
    return text == "true"


def conf_flag(confs: Mapping[str, object], key: str) -> bool:
    """A boolean conf of a push or a repush: false when it is not set, else `parse_bool`'s."""
    return key in confs and parse_bool(confs[key], key)


def _bool(settings: Mapping[str, _Setting], key: str) -> bool:
    setting = settings[key]
    return parse_bool(setting.value, f"{setting.where}: {key}")


def build_config(file_settings: Mapping[str, _Setting], source: str, env_home: str | None) -> ClusterConfig:
    for key, setting in file_settings.items():
        if not _is_known_key(key):
            raise ConfigError(f"{setting.where}: unknown key '{key}'")
    settings: dict[str, _Setting] = {k: _Setting(v, "default") for k, v in DEFAULTS.items()}
    settings.update(file_settings)

    if DATA_DIR in settings:
        home = Path(settings[DATA_DIR].value).expanduser()
    else:
        home = Path(env_home).expanduser() if env_home else DEFAULT_HOME

    region_names = [r.strip() for r in settings[REGIONS].value.split(",") if r.strip()]
    if not region_names:
        raise ConfigError(f"{settings[REGIONS].where}: {REGIONS} must name at least one region")
    for name in region_names:
        if not _REGION_NAME.match(name):
            raise ConfigError(
                f"{settings[REGIONS].where}: invalid region name '{name}' (lower-case letters, digits, '-')"
            )
    if len(set(region_names)) != len(region_names):
        raise ConfigError(f"{settings[REGIONS].where}: {REGIONS} lists a region twice")

    kafka = EmbeddedKafkaConfig(
        enabled=_bool(settings, KAFKA_EMBEDDED_ENABLED),
        host=settings[KAFKA_EMBEDDED_HOST].value,
        port=_int(settings, KAFKA_EMBEDDED_PORT, 1),
        controller_port=_int(settings, KAFKA_EMBEDDED_CONTROLLER_PORT, 1),
        heap=settings[KAFKA_EMBEDDED_HEAP].value,
        jvm_options=tuple(settings[KAFKA_EMBEDDED_JVM_OPTIONS].value.split()),
        brokers=_int(settings, KAFKA_EMBEDDED_BROKERS, 1),
    )
    replication_factor = _int(settings, KAFKA_TOPIC_REPLICATION_FACTOR, 1)
    min_insync = _int(settings, KAFKA_TOPIC_MIN_INSYNC_REPLICAS, 1)
    if min_insync > replication_factor:
        raise ConfigError(
            f"{settings[KAFKA_TOPIC_MIN_INSYNC_REPLICAS].where}: {KAFKA_TOPIC_MIN_INSYNC_REPLICAS} ({min_insync}) is "
            f"more than {KAFKA_TOPIC_REPLICATION_FACTOR} ({replication_factor}): no write could be acknowledged"
        )
    if kafka.enabled and replication_factor > kafka.brokers:
        raise ConfigError(
            f"{settings[KAFKA_TOPIC_REPLICATION_FACTOR].where}: {KAFKA_TOPIC_REPLICATION_FACTOR} "
            f"({replication_factor}) is more than the embedded Kafka's brokers ({kafka.brokers}, "
            f"{KAFKA_EMBEDDED_BROKERS})"
        )
    for key, setting in file_settings.items():
        match = _REGION_KEY.match(key)
        if match and match.group("region") not in region_names:
            raise ConfigError(f"{setting.where}: '{key}' names region '{match.group('region')}', not in {REGIONS}")

    shared_broker = len(region_names) > 1
    regions = []
    for name in region_names:
        bootstrap = settings.get(f"region.{name}.kafka.bootstrap.servers")
        prefix = settings.get(f"region.{name}.topic.prefix")
        instances_key = f"region.{name}.instances"
        regions.append(
            RegionConfig(
                name=name,
                kafka_bootstrap=bootstrap.value if bootstrap else kafka.bootstrap,
                # Regions sharing the embedded broker keep their topics apart by prefix.
                topic_prefix=prefix.value if prefix else (f"{name}." if shared_broker else ""),
                instances=_int(settings, instances_key, 1) if instances_key in settings else 1,
                replication_factor=replication_factor,
                min_insync_replicas=min_insync,
            )
        )

    source_region = settings[SOURCE_REGION].value if SOURCE_REGION in settings else region_names[0]
    if source_region not in region_names:
        raise ConfigError(f"{settings[SOURCE_REGION].where}: source region '{source_region}' is not in {REGIONS}")

    policy = settings[HOOKS_FAILURE_POLICY].value.upper()
    if policy not in HOOK_FAILURE_POLICIES:
        raise ConfigError(
            f"{settings[HOOKS_FAILURE_POLICY].where}: {HOOKS_FAILURE_POLICY} must be one of "
            f"{', '.join(HOOK_FAILURE_POLICIES)}, got {settings[HOOKS_FAILURE_POLICY].value!r}"
        )
    hooks = HookSettings(
        class_paths=tuple(p.strip() for p in settings[HOOKS].value.split(",") if p.strip()),
        threads=_int(settings, HOOKS_THREADS, 1),
        timeout_seconds=_float(settings, HOOKS_TIMEOUT_SECONDS),
        wait_interval_seconds=_float(settings, HOOKS_WAIT_INTERVAL_SECONDS),
        failure_policy=policy,
        wait_max_seconds=_float(settings, HOOKS_WAIT_MAX_SECONDS) if settings[HOOKS_WAIT_MAX_SECONDS].value else None,
        configs=MappingProxyType(
            {k[len(HOOKS_CONFIGS_PREFIX) :]: s.value for k, s in settings.items() if k.startswith(HOOKS_CONFIGS_PREFIX)}
        ),
    )
    postgres = EmbeddedServerConfig(
        _bool(settings, POSTGRES_EMBEDDED_ENABLED), _int(settings, POSTGRES_EMBEDDED_PORT, 1)
    )
    redis = EmbeddedServerConfig(_bool(settings, REDIS_EMBEDDED_ENABLED), _int(settings, REDIS_EMBEDDED_PORT, 1))
    if METADATA_DB_URL in settings:
        db_url = settings[METADATA_DB_URL].value
    elif postgres.enabled:
        db_url = embedded_postgres_url(postgres.port, "venice")
    else:
        db_url = f"sqlite:///{home / 'metadata.db'}"
    if AIRFLOW_DB_URL in settings:
        airflow_db_url: str | None = settings[AIRFLOW_DB_URL].value
    else:
        airflow_db_url = embedded_postgres_url(postgres.port, "airflow") if postgres.enabled else None
    executor = settings[AIRFLOW_EXECUTOR].value
    if executor not in AIRFLOW_EXECUTORS:
        raise ConfigError(
            f"{settings[AIRFLOW_EXECUTOR].where}: {AIRFLOW_EXECUTOR} must be one of {', '.join(AIRFLOW_EXECUTORS)}, "
            f"got {executor!r}"
        )
    if AIRFLOW_CELERY_BROKER_URL in settings:
        broker_url = settings[AIRFLOW_CELERY_BROKER_URL].value
    else:
        broker_url = f"redis://127.0.0.1:{redis.port}/0"
    if executor == "CeleryExecutor" and not redis.enabled and AIRFLOW_CELERY_BROKER_URL not in settings:
        raise ConfigError(
            f"{settings[AIRFLOW_EXECUTOR].where}: the CeleryExecutor needs a broker: set {REDIS_EMBEDDED_ENABLED}=true "
            f"or {AIRFLOW_CELERY_BROKER_URL}"
        )
    if executor == "CeleryExecutor" and airflow_db_url is None:
        raise ConfigError(
            f"{settings[AIRFLOW_EXECUTOR].where}: the CeleryExecutor's workers cannot share SQLite: set "
            f"{POSTGRES_EMBEDDED_ENABLED}=true or {AIRFLOW_DB_URL}"
        )
    spark_master = settings[SPARK_MASTER].value
    standalone = SparkStandaloneConfig(
        workers=_int(settings, SPARK_STANDALONE_WORKERS),
        worker_cores=_int(settings, SPARK_STANDALONE_WORKER_CORES, 1),
        worker_memory=settings[SPARK_STANDALONE_WORKER_MEMORY].value,
        ui_port=_int(settings, SPARK_STANDALONE_UI_PORT, 1),
    )
    if standalone.workers and not re.match(r"^spark://[^:/]+:\d+$", spark_master):
        raise ConfigError(
            f"{settings[SPARK_STANDALONE_WORKERS].where}: a standalone cluster needs {SPARK_MASTER} as "
            f"spark://host:port (its master's address), got {spark_master!r}"
        )
    partitioner_classes = tuple(p.strip() for p in settings[PARTITIONER_CLASSES].value.split(",") if p.strip())
    for class_path in partitioner_classes:
        if not re.fullmatch(r"[A-Za-z_][\w.]*\.[A-Za-z_]\w*", class_path):
            raise ConfigError(
                f"{settings[PARTITIONER_CLASSES].where}: {PARTITIONER_CLASSES} names '{class_path}', "
                "not a module.Class path"
            )
    return ClusterConfig(
        cluster_name=settings[CLUSTER_NAME].value,
        home=home,
        regions=tuple(regions),
        source_region=source_region,
        metadata_db_url=db_url,
        kafka=kafka,
        server_host=settings[SERVER_HOST].value,
        server_port_base=_int(settings, SERVER_PORT_BASE, 1),
        airflow_enabled=_bool(settings, AIRFLOW_ENABLED),
        airflow_port=_int(settings, AIRFLOW_PORT, 1),
        hooks=hooks,
        step_retries=_int(settings, ROLLOUT_STEP_RETRIES),
        step_retry_delay_seconds=_float(settings, ROLLOUT_STEP_RETRY_DELAY_SECONDS),
        source=source,
        instance_lease_seconds=_float(settings, INSTANCE_LEASE_SECONDS),
        instance_offline_grace_seconds=_float(settings, INSTANCE_OFFLINE_GRACE_SECONDS),
        min_ready_replicas=_int(settings, MIN_READY_REPLICAS),
        client_long_tail_retry_ms=_float(settings, CLIENT_LONG_TAIL_RETRY_MS, zero=True),
        davinci_swap_timeout_seconds=_float(settings, DAVINCI_SWAP_TIMEOUT_SECONDS),
        airflow_user_dags=_path(settings, AIRFLOW_USER_DAGS_FOLDER),
        server_limits=ServerLimits(
            max_request_bytes=_int(settings, SERVER_MAX_REQUEST_BYTES, 1),
            max_batch_keys=_int(settings, SERVER_MAX_BATCH_KEYS, 1),
            max_connections=_int(settings, SERVER_MAX_CONNECTIONS, 1),
            idle_timeout_seconds=_float(settings, SERVER_IDLE_TIMEOUT_SECONDS),
        ),
        spark_master=spark_master,
        spark_standalone=standalone,
        airflow_executor=executor,
        airflow_celery_workers=_int(settings, AIRFLOW_CELERY_WORKERS, 1),
        airflow_celery_broker_url=broker_url,
        airflow_db_url=airflow_db_url,
        airflow_triggerer=_bool(settings, AIRFLOW_TRIGGERER_ENABLED),
        redis=redis,
        postgres=postgres,
        partitioner_classes=partitioner_classes,
    )


def embedded_postgres_url(port: int, database: str) -> str:
    """A database of the embedded PostgreSQL (its `venice` role trusts local connections)."""
    return f"postgresql+psycopg2://venice@127.0.0.1:{port}/{database}"


# The profiles: each a config file in the project's deploy/ (None: the built-in defaults, the embedded platform).
PROFILES_DIR = Path(__file__).resolve().parents[1] / "deploy"
PROFILES: Mapping[str, str | None] = MappingProxyType(
    {"embedded": None, "replicated": "replicated.properties", "cluster": "cluster.properties"}
)


def profile_path(name: str) -> Path | None:
    """A profile's config file (None for `embedded`); ConfigError naming the profiles for an unknown one."""
    if name not in PROFILES:
        raise ConfigError(f"unknown profile {name!r} (profiles: {', '.join(PROFILES)})")
    file = PROFILES[name]
    return None if file is None else PROFILES_DIR / file


def config_path(env: Mapping[str, str] | None = None) -> Path | None:
    """The properties file in effect, or None when only the defaults apply: `$VENICE_CONFIG`'s, else the profile's
    (`$VENICE_PROFILE`), else `$VENICE_HOME/venice.properties` when there is one."""
    env = os.environ if env is None else env
    if env.get(ENV_PROFILE):
        path = profile_path(env[ENV_PROFILE])
        given = Path(env[ENV_CONFIG]).expanduser() if env.get(ENV_CONFIG) else None
        if given is not None and (path is None or given.resolve() != path.resolve()):
            raise ConfigError(
                f"${ENV_CONFIG} ({given}) and the profile {env[ENV_PROFILE]!r} both name the config: choose one"
            )
        if path is not None:
            return path
    if env.get(ENV_CONFIG):
        path = Path(env[ENV_CONFIG]).expanduser()
        if not path.is_file():
            raise ConfigError(f"${ENV_CONFIG} names {path}, which is not a file")
        return path
    home = Path(env[ENV_HOME]).expanduser() if env.get(ENV_HOME) else DEFAULT_HOME
    candidate = home / CONFIG_FILE_NAME
    return candidate if candidate.is_file() else None


def load_config(env: Mapping[str, str] | None = None) -> ClusterConfig:
    env = os.environ if env is None else env
    path = config_path(env)
    if path is None:
        return build_config({}, "built-in defaults", env.get(ENV_HOME))
    return build_config(parse_properties(path.read_text(), str(path)), str(path), env.get(ENV_HOME))


def process_env(config: ClusterConfig) -> dict[str, str]:
    """The environment of a process started for this config (region server, Spark job, Airflow and its tasks): it
    loads the same config and inherits PYTHONPATH, so hook modules outside the project can be named. The config
    reaches it as one choice, its file (`$VENICE_CONFIG`), however this process chose it: a profile named by `venice
    --profile` or `$VENICE_PROFILE` is passed on as the file it names, never beside it (a process that imports the
    project from elsewhere, a Spark job's shipped package, would find the profile's file somewhere else)."""
    env = dict(os.environ)
    env.pop(ENV_PROFILE, None)
    if Path(config.source).is_file():
        env[ENV_CONFIG] = str(Path(config.source).resolve())
    else:
        env.pop(ENV_CONFIG, None)
        env[ENV_HOME] = str(config.home)
    return env
