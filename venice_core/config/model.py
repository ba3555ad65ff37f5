"""The typed, frozen cluster config, grouped by what each setting configures. Its defaults live in the keys'
declarations (`venice_core.config.keys`), not here: every field is set by `build_config`."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from venice_core.config.hosts import LOOPBACK, HostsSettings, server_host
from venice_core.errors import ConfigError


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
class KafkaSettings:
    """The embedded Kafka `venice up` runs (a KRaft cluster of `brokers` nodes, node n on `port + n` and
    `controller_port + n`), and the topics the platform creates."""

    enabled: bool
    host: str
    port: int
    controller_port: int
    heap: str
    jvm_options: tuple[str, ...]
    brokers: int
    topic_replication_factor: int
    topic_min_insync_replicas: int
    producer_compression: str = "lz4"  # librdkafka's compression.type for the platform's version-topic producers
    node_hosts: tuple[str, ...] = ()  # each node's address, when each runs on a host of its own (else `host`)

    @property
    def producer_config(self) -> dict[str, str]:
        """What every producer of the platform adds to `pubsub.PRODUCER_CONFIG`."""
        return {"compression.type": self.producer_compression}

    def node_host(self, node: int) -> str:
        return self.node_hosts[node] if self.node_hosts else self.host

    def broker_port(self, node: int) -> int:
        return self.port + node

    def node_controller_port(self, node: int) -> int:
        return self.controller_port + node

    @property
    def bootstrap(self) -> str:
        """Every broker's address, as clients are given them."""
        return ",".join(f"{self.node_host(n)}:{self.broker_port(n)}" for n in range(self.brokers))


@dataclass(frozen=True)
class SparkSettings:
    """Where the Spark jobs are submitted (`master`), and the standalone cluster `venice up` runs (no workers: none
    runs, jobs go to `master` as it is)."""

    master: str
    workers: int
    worker_cores: int
    worker_memory: str
    ui_port: int

    @property
    def standalone_master(self) -> tuple[str, int] | None:
        """(host, port) of the standalone master `venice up` runs, or None when it runs none."""
        if self.workers == 0:
            return None
        host, _, port = self.master.removeprefix("spark://").rpartition(":")
        return host, int(port)


@dataclass(frozen=True)
class AirflowSettings:
    enabled: bool
    port: int
    api_url: str  # where the CLI and the platform reach its API server
    executor: str  # LocalExecutor or CeleryExecutor
    celery_workers: int
    celery_broker_url: str
    db_url: str | None  # None: SQLite in the Airflow home
    triggerer: bool
    user_dags: Path | None  # a folder of the users' DAGs the embedded Airflow parses too


@dataclass(frozen=True)
class EmbeddedServerConfig:
    """A server `venice up` runs itself (Redis, PostgreSQL), on its host's address."""

    enabled: bool = False
    port: int = 0
    host: str = ""


@dataclass(frozen=True)
class ServerLimits:
    """Bounds on a region server's read API (see `server/http`)."""

    max_request_bytes: int = 1024 * 1024
    max_batch_keys: int = 1000
    max_connections: int = 512
    idle_timeout_seconds: float = 30.0


@dataclass(frozen=True)
class ServerSettings:
    """Region servers: where they listen, what a client may ask of them, and their instances' leases."""

    host: str
    port_base: int
    limits: ServerLimits
    instance_lease_seconds: float
    instance_offline_grace_seconds: float
    min_ready_replicas: int  # 0: every replica (the store's replication factor)


@dataclass(frozen=True)
class ClientSettings:
    long_tail_retry_ms: float


@dataclass(frozen=True)
class RolloutSettings:
    step_retries: int
    step_retry_delay_seconds: float
    davinci_swap_timeout_seconds: float


class FailurePolicy(StrEnum):
    """What a hook that fails or times out answers (`venice.store.lifecycle.hooks.failure.policy`)."""

    PROCEED = "PROCEED"
    WAIT = "WAIT"
    ABORT = "ABORT"


@dataclass(frozen=True)
class HookSettings:
    class_paths: tuple[str, ...]
    threads: int
    timeout_seconds: float
    wait_interval_seconds: float
    failure_policy: FailurePolicy
    configs: Mapping[str, str]
    wait_max_seconds: float | None = None  # None: a WAIT is asked again for as long as it is answered


@dataclass(frozen=True)
class SecuritySettings:
    """The platform's CA and certificates (`security.*`): the operator's CA when both files are given."""

    enabled: bool = False
    ca_cert: Path | None = None
    ca_key: Path | None = None
    client_cert: Path | None = None  # what this process presents to the region servers (None: the admin's)
    client_key: Path | None = None


@dataclass(frozen=True)
class ClusterConfig:
    cluster_name: str
    data_dir: Path
    regions: tuple[RegionConfig, ...]
    source_region: str
    metadata_db_url: str
    partitioner_classes: tuple[str, ...]  # `venice.partitioner.classes` (the default partitioner is always allowed)
    kafka: KafkaSettings
    spark: SparkSettings
    airflow: AirflowSettings
    redis: EmbeddedServerConfig
    postgres: EmbeddedServerConfig
    server: ServerSettings
    client: ClientSettings
    rollout: RolloutSettings
    hooks: HookSettings
    hosts: HostsSettings
    security: SecuritySettings
    source: str  # where the settings came from, for error messages

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
        return self.server.port_base + self.check_instance(region, instance) * len(self.regions) + index

    def check_instance(self, region: str, instance: int) -> int:
        count = self.region(region).instances
        if not 0 <= instance < count:
            raise ConfigError(
                f"region {region} has {count} instance{'s' if count != 1 else ''} (region.{region}.instances): "
                f"instance {instance} is out of range 0..{count - 1}"
            )
        return instance

    def instance_host(self, region: str, instance: int = 0) -> str:
        """Where a client reaches the instance: its host's address (hosts on), else where it is bound (`server.host`,
        the loopback for an instance bound to every interface)."""
        if self.hosts.enabled:
            return self.hosts.address(server_host(region, self.check_instance(region, instance)))
        return LOOPBACK if self.server.host == "0.0.0.0" else self.server.host

    def instance_bind_host(self, region: str, instance: int = 0) -> str:
        """The address the instance binds: its host's (hosts on), else `server.host`."""
        return self.instance_host(region, instance) if self.hosts.enabled else self.server.host

    def advertised_host(self, region: str, instance: int = 0) -> str:
        """The address an instance registers for routing clients: its host name when bound to every interface (a
        container's, in docker-compose.yaml), else the address it is bound to."""
        bound = self.instance_bind_host(region, instance)
        return socket.gethostname() if bound == "0.0.0.0" else bound

    @property
    def instances(self) -> tuple[tuple[str, int], ...]:
        """Every configured region-server instance as (region, instance), region by region."""
        return tuple((r.name, n) for r in self.regions for n in range(r.instances))

    def server_addresses(self, region: str) -> list[tuple[str, int]]:
        """Every configured instance of the region, instance 0 first: where a routing client looks for one alive."""
        return [
            (self.instance_host(region, n), self.server_port(region, n)) for n in range(self.region(region).instances)
        ]

    def instance_dir(self, region: str, instance: int = 0) -> Path:
        """An instance's partition storage (instance 0 keeps the single-instance layout)."""
        name = self.region(region).name
        return self.data_dir / "regions" / (name if self.check_instance(name, instance) == 0 else f"{name}.{instance}")

    @property
    def run_dir(self) -> Path:
        """Pid files and logs of the processes `venice up` starts."""
        return self.data_dir / "run"
