"""Every cluster-config key, declared once: its name, kind (type and validation), default, where it lands in the
typed `ClusterConfig` (`lands`: `group.field`), a one-line description, and its environment override
(`VENICE__` and the key upper-cased, dots and dashes as `_`: `VENICE__SERVER_MAX_CONNECTIONS=1024`).

The module-level constants are the keys' names, for code that names a key in a message or writes a config file.
`build_config` is a loop over `KEYS`; the README's list and the docs' configuration reference are rendered from it
(`venice_core.config.reference`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from venice_core.config.kinds import Choice, Flag, Folder, Integer, Kind, Member, Names, Optional, Seconds, Text, Words
from venice_core.config.model import FailurePolicy

ENV_PREFIX = "VENICE__"


@dataclass(frozen=True)
class Key:
    name: str
    kind: Kind[Any]
    default: str | None  # as a file would write it; None: derived from other keys (`derived` says how) or unset
    lands: str  # `group.field` of ClusterConfig (a top-level field: `field`; a nested group's: `group.sub.field`)
    doc: str
    derived: str = ""  # what the default is when it depends on other keys

    @property
    def env(self) -> str:
        return ENV_PREFIX + re.sub(r"[.\-]", "_", self.name).upper()

    @property
    def group(self) -> str:
        return self.lands.partition(".")[0] if "." in self.lands else "cluster"


_KEYS: dict[str, Key] = {}


def _declare(name: str, kind: Kind[Any], default: str | None, lands: str, doc: str, derived: str = "") -> str:
    _KEYS[name] = Key(name, kind, default, lands, doc, derived)
    return name


# -- the cluster
CLUSTER_NAME = _declare("cluster.name", Text(), "venice-cluster", "cluster_name", "The cluster's name.")
DATA_DIR = _declare(
    "data.dir", Folder(), None, "data_dir", "Where the platform keeps its state, logs and pid files.", "~/.venice"
)
REGIONS = _declare("regions", Names(), "dc-0,dc-1,dc-2", "regions", "The regions, comma-separated.")
SOURCE_REGION = _declare(
    "source.region", Text(), None, "source_region", "The region a push writes to first.", "the first region"
)
METADATA_DB_URL = _declare(
    "metadata.db.url",
    Text(),
    None,
    "metadata_db_url",
    "The metadata store's SQLAlchemy URL.",
    "`sqlite:///<data.dir>/metadata.db`, or the embedded PostgreSQL's `venice` database",
)
PARTITIONER_CLASSES = _declare(
    "venice.partitioner.classes",
    Names(class_paths=True),
    "venice_core.protocol.partitioner.KeyFieldVenicePartitioner",
    "partitioner_classes",
    "The partitioner classes a store may name, besides the default (MD5, always allowed); loaded from this list only.",
)

# -- hosts (the hosts profile: each process in a network namespace of its own, `venice_core.config.hosts`)
HOSTS_ENABLED = _declare(
    "hosts.enabled",
    Flag(),
    "false",
    "hosts.enabled",
    "Whether `venice up` runs each process on a host of its own (a network namespace, root only).",
)
HOSTS_SUBNET = _declare(
    "hosts.subnet",
    Text(),
    # A private /16 this project keeps for its hosts; the machine's namespace routes it `unreachable` when the
    # bridge is down, so that no packet for a host ever leaves by the default route.
    "10.213.0.0/16",
    "hosts.subnet",
    "The hosts' addresses (a private /16): each host's place in it is fixed by its role.",
)
HOSTS_BRIDGE = _declare(
    "hosts.bridge", Text(), "venice0", "hosts.bridge", "The bridge joining the hosts (its links are named after it)."
)

# -- Kafka
KAFKA_EMBEDDED_ENABLED = _declare(
    "kafka.embedded.enabled", Flag(), "true", "kafka.enabled", "Whether `venice up` runs the platform's own Kafka."
)
KAFKA_EMBEDDED_HOST = _declare("kafka.embedded.host", Text(), "127.0.0.1", "kafka.host", "The embedded Kafka's host.")
KAFKA_EMBEDDED_PORT = _declare(
    "kafka.embedded.port", Integer(1), "9092", "kafka.port", "The embedded Kafka's port (node n on port + n)."
)
KAFKA_EMBEDDED_CONTROLLER_PORT = _declare(
    "kafka.embedded.controller.port",
    Integer(1),
    "9093",
    "kafka.controller_port",
    "The embedded KRaft controllers' port (node n on port + n).",
)
KAFKA_EMBEDDED_HEAP = _declare("kafka.embedded.heap", Text(), "512m", "kafka.heap", "Each embedded broker's heap.")
# C1 only and the serial collector: on a few cores, C2's compiler threads and G1's concurrent work took 3 of the
# broker's 7 CPU-seconds in a 1M-record push (bench/push_throughput), for no gain in its throughput there.
KAFKA_EMBEDDED_JVM_OPTIONS = _declare(
    "kafka.embedded.jvm.options",
    Words(),
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "kafka.jvm_options",
    "The embedded brokers' JVM options (a broker of its own on a large machine may want -XX:+UseG1GC).",
)
KAFKA_EMBEDDED_BROKERS = _declare(
    "kafka.embedded.brokers",
    Integer(1),
    "1",
    "kafka.brokers",
    "Nodes of the embedded KRaft cluster (broker and controller each).",
)
KAFKA_TOPIC_REPLICATION_FACTOR = _declare(
    "kafka.topic.replication.factor",
    Integer(1),
    "1",
    "kafka.topic_replication_factor",
    "Replicas of every topic the platform creates.",
)
KAFKA_TOPIC_MIN_INSYNC_REPLICAS = _declare(
    "kafka.topic.min.insync.replicas",
    Integer(1),
    "1",
    "kafka.topic_min_insync_replicas",
    "Replicas that must have a write before the broker acknowledges it (producers send with acks=all).",
)
PRODUCER_COMPRESSIONS = ("none", "lz4", "zstd", "snappy", "gzip")
KAFKA_PRODUCER_COMPRESSION = _declare(
    "kafka.producer.compression",
    Choice(PRODUCER_COMPRESSIONS),
    # lz4 measured against none and zstd on the push benchmark (bench/README.md, issue 43): the push 8% faster, the
    # broker 1.5 core-seconds a million records lighter; zstd no faster than none.
    "lz4",
    "kafka.producer_compression",
    "How version-topic producers compress record batches (librdkafka's compression.type): the push and repush "
    "jobs, and leaders producing on to their region's version topic (and a hybrid version's winners). Brokers keep "
    "the batches as sent; values inside stay as the store's compression left them.",
)

# -- Spark
SPARK_MASTER = _declare(
    "spark.master",
    Text(),
    "local[2,4]",  # two cores; a failed task is retried up to 4 times, as on a cluster
    "spark.master",
    "Where every Spark job is submitted: local[...] or a cluster's master URL (Airflow's `spark_default`).",
)
SPARK_STANDALONE_WORKERS = _declare(
    "spark.standalone.workers",
    Integer(0),
    "0",
    "spark.workers",
    "Workers of a standalone Spark cluster `venice up` runs (0: none), its master at spark.master.",
)
SPARK_STANDALONE_WORKER_CORES = _declare(
    "spark.standalone.worker.cores", Integer(1), "1", "spark.worker_cores", "Cores of each standalone worker."
)
SPARK_STANDALONE_WORKER_MEMORY = _declare(
    "spark.standalone.worker.memory", Text(), "2g", "spark.worker_memory", "Memory of each standalone worker."
)
SPARK_STANDALONE_UI_PORT = _declare(
    "spark.standalone.ui.port",
    Integer(1),
    "8090",
    "spark.ui_port",
    "The standalone master's web UI port (worker n's on the next ports).",
)

# -- Airflow
AIRFLOW_ENABLED = _declare("airflow.enabled", Flag(), "true", "airflow.enabled", "Whether `venice up` runs Airflow.")
AIRFLOW_PORT = _declare("airflow.port", Integer(1), "8080", "airflow.port", "Airflow's API server and UI port.")
AIRFLOW_API_URL = _declare(
    "airflow.api.url",
    Optional(Text()),
    None,
    "airflow.api_url",
    "Where the CLI and the platform reach Airflow's API server and UI.",
    "`http://<the API server's host>:<airflow.port>`",
)
AIRFLOW_EXECUTORS = ("LocalExecutor", "CeleryExecutor")
AIRFLOW_EXECUTOR = _declare(
    "airflow.executor", Choice(AIRFLOW_EXECUTORS), "LocalExecutor", "airflow.executor", "Airflow's executor."
)
AIRFLOW_CELERY_WORKERS = _declare(
    "airflow.celery.workers", Integer(1), "2", "airflow.celery_workers", "Celery workers `venice up` runs."
)
AIRFLOW_CELERY_BROKER_URL = _declare(
    "airflow.celery.broker.url",
    Text(),
    None,
    "airflow.celery_broker_url",
    "The Celery broker.",
    "the embedded Redis",
)
AIRFLOW_DB_URL = _declare(
    "airflow.db.url",
    Optional(Text()),
    None,
    "airflow.db_url",
    "Airflow's database.",
    "SQLite in `<data.dir>/airflow`, or the embedded PostgreSQL's `airflow` database",
)
AIRFLOW_TRIGGERER_ENABLED = _declare(
    "airflow.triggerer.enabled", Flag(), "false", "airflow.triggerer", "Whether `venice up` runs Airflow's triggerer."
)
AIRFLOW_USER_DAGS_FOLDER = _declare(
    "airflow.user.dags.folder",
    Optional(Folder()),
    None,
    "airflow.user_dags",
    "A folder of your own DAGs the embedded Airflow parses too.",
    "none",
)

# -- servers the platform runs itself
REDIS_EMBEDDED_ENABLED = _declare(
    "redis.embedded.enabled", Flag(), "false", "redis.enabled", "Whether `venice up` runs Redis (the Celery broker)."
)
REDIS_EMBEDDED_PORT = _declare("redis.embedded.port", Integer(1), "6379", "redis.port", "The embedded Redis's port.")
POSTGRES_EMBEDDED_ENABLED = _declare(
    "postgres.embedded.enabled",
    Flag(),
    "false",
    "postgres.enabled",
    "Whether `venice up` runs PostgreSQL (then the metadata store's and Airflow's database).",
)
POSTGRES_EMBEDDED_PORT = _declare(
    "postgres.embedded.port", Integer(1), "5432", "postgres.port", "The embedded PostgreSQL's port."
)

# -- security (issue 45)
SECURITY_ENABLED = _declare(
    "security.enabled",
    Flag(),
    "false",
    "security.enabled",
    "Whether the platform is secured: its CA and a certificate per host and client role, Kafka over SASL_SSL with a "
    "principal per role and its ACLs, region servers over mutual TLS, the embedded PostgreSQL and Redis over TLS "
    "with a client certificate and a password, Spark's RPC authenticated (docs/operations/security.md).",
)
SECURITY_CA_CERT = _declare(
    "security.ca.cert",
    Optional(Folder()),
    None,
    "security.ca_cert",
    "Your own CA's certificate (PEM), with security.ca.key; used as it is, never written.",
    "the platform's own, made in `<data.dir>/security`",
)
SECURITY_CA_KEY = _declare(
    "security.ca.key",
    Optional(Folder()),
    None,
    "security.ca_key",
    "Your own CA's private key (PEM, unencrypted, readable by the platform alone).",
    "the platform's own",
)

SECURITY_CLIENT_CERT = _declare(
    "security.client.cert",
    Optional(Folder()),
    None,
    "security.client_cert",
    "The certificate (PEM) this process presents to the region servers, with security.client.key: its principal is "
    "the certificate's common name.",
    "the platform's `admin` certificate",
)
SECURITY_CLIENT_KEY = _declare(
    "security.client.key",
    Optional(Folder()),
    None,
    "security.client_key",
    "The private key (PEM, unencrypted) of security.client.cert.",
    "the platform's `admin` key",
)

# -- region servers
SERVER_HOST = _declare("server.host", Text(), "127.0.0.1", "server.host", "The address region servers bind.")
SERVER_PORT_BASE = _declare(
    "server.port.base",
    Integer(1),
    "7070",
    "server.port_base",
    "Instance n of region i listens on base + n x regions + i.",
)
# What one client may ask of a region server's read API: bounded so a bad client cannot exhaust memory or threads.
SERVER_MAX_REQUEST_BYTES = _declare(
    "server.max.request.bytes",
    Integer(1),
    str(1024 * 1024),
    "server.limits.max_request_bytes",
    "A request's largest body.",
)
SERVER_MAX_BATCH_KEYS = _declare(
    "server.max.batch.keys", Integer(1), "1000", "server.limits.max_batch_keys", "Keys of a batch read (more: 413)."
)
SERVER_MAX_CONNECTIONS = _declare(
    "server.max.connections", Integer(1), "512", "server.limits.max_connections", "Open connections (past it: 503)."
)
SERVER_IDLE_TIMEOUT_SECONDS = _declare(
    "server.idle.timeout.seconds",
    Seconds(),
    "30",
    "server.limits.idle_timeout_seconds",
    "An idle or stalled connection is closed after this.",
)
INSTANCE_LEASE_SECONDS = _declare(
    "instance.lease.seconds",
    Seconds(),
    "5",
    "server.instance_lease_seconds",
    "An instance's lease on its registration (renewed every second; a leader whose lease ran out produces no more).",
)
INSTANCE_OFFLINE_GRACE_SECONDS = _declare(
    "instance.offline.grace.seconds",
    Seconds(),
    "30",
    "server.instance_offline_grace_seconds",
    "How long an instance may be gone before its replicas are placed elsewhere.",
)
MIN_READY_REPLICAS = _declare(
    "min.ready.replicas",
    Integer(0),
    "0",
    "server.min_ready_replicas",
    "Ready replicas of every partition a region needs to swap (0: the store's replication factor).",
)

# -- clients
CLIENT_LONG_TAIL_RETRY_MS = _declare(
    "client.long.tail.retry.ms",
    Seconds(zero=True),
    "20",
    "client.long_tail_retry_ms",
    "A routing client's second request to another replica when the first has not answered (0: never).",
)

# -- rollouts
ROLLOUT_STEP_RETRIES = _declare(
    "rollout.step.retries",
    Integer(0),
    "2",
    "rollout.step_retries",
    "Retries of a step failing on its own (hook decisions and refused input are not retried).",
)
ROLLOUT_STEP_RETRY_DELAY_SECONDS = _declare(
    "rollout.step.retry.delay.seconds",
    Seconds(),
    "10",
    "rollout.step_retry_delay_seconds",
    "The delay before such a retry.",
)
DAVINCI_SWAP_TIMEOUT_SECONDS = _declare(
    "davinci.swap.timeout.seconds",
    Seconds(),
    "300",
    "rollout.davinci_swap_timeout_seconds",
    "How long a region's rollout waits for its Da Vinci clients to serve a version before its servers swap anyway.",
)

# -- VIP-4 hooks, keys verbatim
HOOKS = _declare(
    "venice.store.lifecycle.hooks",
    Names(),
    "",
    "hooks.class_paths",
    "The lifecycle hook classes, comma-separated.",
)
HOOKS_THREADS = _declare(
    "venice.store.lifecycle.hooks.threads", Integer(1), "4", "hooks.threads", "Hook calls of one step run at once."
)
HOOKS_TIMEOUT_SECONDS = _declare(
    "venice.store.lifecycle.hooks.timeout.seconds",
    Seconds(),
    "60",
    "hooks.timeout_seconds",
    "A hook call is stopped (its worker killed) after this.",
)
HOOKS_WAIT_INTERVAL_SECONDS = _declare(
    "venice.store.lifecycle.hooks.wait.interval.seconds",
    Seconds(),
    "60",
    "hooks.wait_interval_seconds",
    "How long after a WAIT the step asks again.",
)
HOOKS_FAILURE_POLICY = _declare(
    "venice.store.lifecycle.hooks.failure.policy",
    Member(FailurePolicy),
    "PROCEED",
    "hooks.failure_policy",
    "What a hook that fails or times out answers.",
)
# Not a VIP-4 key. Unset by default: VIP-4's WAIT is "re-run this step later", for as long as the hooks answer it (a
# swap window over a weekend, a manual approval pending for days).
HOOKS_WAIT_MAX_SECONDS = _declare(
    "venice.store.lifecycle.hooks.wait.max.seconds",
    Optional(Seconds()),
    "",
    "hooks.wait_max_seconds",
    "How long a step may keep answering WAIT before the rollout ABORTs (unset: no limit).",
)

KEYS: Mapping[str, Key] = MappingProxyType(_KEYS)
DEFAULTS: Mapping[str, str] = MappingProxyType({k.name: k.default for k in _KEYS.values() if k.default is not None})

# Keys that are families rather than one key each: a region's settings, and the hooks' own configs.
HOOKS_CONFIGS_PREFIX = "venice.store.lifecycle.hooks.configs."
REGION_KEY = re.compile(r"^region\.(?P<region>[^.]+)\.(?P<setting>kafka\.bootstrap\.servers|topic\.prefix|instances)$")
REGION_KEY_DOCS = {
    "kafka.bootstrap.servers": ("the embedded broker", "The region's Kafka."),
    "topic.prefix": ("`<r>.` when regions share a broker, else empty", "Its topics' name prefix."),
    "instances": ("1", "Its region-server instances."),
}


def is_known_key(key: str) -> bool:
    return key in KEYS or key.startswith(HOOKS_CONFIGS_PREFIX) or REGION_KEY.match(key) is not None


def env_overrides(env: Mapping[str, str]) -> dict[str, str]:
    """The declared keys the environment sets (`VENICE__...`), by key."""
    return {key.name: env[key.env] for key in KEYS.values() if key.env in env}
