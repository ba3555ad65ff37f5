"""docker-compose.yaml and the hosts profile agree: the same services (one container per process the profile runs, at
its host's address), the same ports, the same config keys and values (deploy/venice.properties against
deploy/hosts.properties), so neither can drift from the other. The hosts profile is the cluster profile with a host
per process: their keys agree too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from venice_core.config import ClusterConfig, build_config, parse_properties, profile_path
from venice_core.embedded import platform

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
SERVICES: dict[str, dict] = COMPOSE["services"]
ONE_SHOT = {"migrate", "airflow-init"}  # run once before the others, no process of the profile's
COMPOSE_FILE = ROOT / "deploy" / "venice.properties"
# The settings of the servers `venice up` runs itself (the profile's), which compose runs as services instead (its
# config turns them off and gives their addresses: the regions' bootstrap servers, the database and broker URLs).
EMBEDDED = re.compile(r"^(kafka\.embedded\.|postgres\.embedded\.|redis\.embedded\.|spark\.standalone\.worker\.)")
# Keys of compose's config only, for the same reason, and where it must differ (its containers bind to every
# interface, its data dir is a volume's).
COMPOSE_ONLY = re.compile(
    r"^(region\.[^.]+\.(kafka\.bootstrap\.servers|topic\.prefix)|metadata\.db\.url|airflow\.db\.url|airflow\.celery\.broker\.url)$"
)
HOSTS_DIFFER = {"data.dir", "spark.standalone.workers", "security.enabled"}  # (compose: not secured yet)
HOSTS_ONLY = re.compile(r"^hosts\.")  # the hosts profile's keys the cluster profile does not have
CLUSTER_DIFFER = {"data.dir", "cluster.name", "spark.master"}  # the hosts profile's own, and its master's address


def _settings(path: Path) -> dict[str, str]:
    return {key: s.value for key, s in parse_properties(path.read_text(), str(path)).items()}


def _profile(name: str) -> ClusterConfig:
    path = profile_path(name)
    assert path is not None
    return build_config(parse_properties(path.read_text(), str(path)), str(path), None)


@pytest.fixture(scope="module")
def profile() -> ClusterConfig:
    return _profile("hosts")


@pytest.fixture(scope="module")
def compose_config() -> ClusterConfig:
    return build_config(parse_properties(COMPOSE_FILE.read_text(), str(COMPOSE_FILE)), str(COMPOSE_FILE), None)


def _service(name: str) -> str:
    """A process's service name (a region server's `server-dc-0.1` is `server-dc-0-1`: a host name's dot would
    start a domain)."""
    return name.replace(".", "-")


def _published(service: dict) -> set[int]:
    return {int(str(port).rsplit(":", 2)[-1]) for port in service.get("ports", [])}


def test_compose_runs_one_service_per_process_of_the_profile(profile: ClusterConfig) -> None:
    planned = {_service(p.name) for p in platform.plan(profile)}
    assert set(SERVICES) - ONE_SHOT == planned


def test_each_service_listens_on_its_process_ports(profile: ClusterConfig) -> None:
    for process in platform.plan(profile):
        published = _published(SERVICES[_service(process.name)])
        if process.ports:
            assert process.ports[0] in published, process
        assert published <= set(process.ports), process


def test_the_hosts_profile_is_the_cluster_profile_with_a_host_per_process() -> None:
    hosts, cluster = profile_path("hosts"), profile_path("cluster")
    assert hosts is not None and cluster is not None
    ours, theirs = _settings(hosts), _settings(cluster)
    assert {k for k in ours if not HOSTS_ONLY.match(k)} == set(theirs)
    assert {k for k in theirs if ours[k] != theirs[k]} == CLUSTER_DIFFER
    assert ours["hosts.enabled"] == "true"
    assert [p.name for p in platform.plan(_profile("hosts"))] == [p.name for p in platform.plan(_profile("cluster"))]


def test_each_service_is_at_its_hosts_address(profile: ClusterConfig) -> None:
    """The same addresses as the profile's hosts; the Celery workers (where the Spark drivers run) know their host."""
    for process in platform.plan(profile):
        service = SERVICES[_service(process.name)]
        assert service["networks"]["hosts"]["ipv4_address"] == profile.hosts.address(process.name), process.name
    subnet = COMPOSE["networks"]["hosts"]["ipam"]["config"][0]
    assert (subnet["subnet"], subnet["gateway"]) == (profile.hosts.subnet, profile.hosts.gateway)
    for n in range(profile.airflow.celery_workers):
        name = f"airflow-celery-worker-{n}"
        assert SERVICES[name]["environment"]["VENICE_HOST"] == name
    for one_shot in ONE_SHOT:
        assert SERVICES[one_shot]["networks"] == ["hosts"]


def test_the_config_files_have_the_same_keys_and_values(profile: ClusterConfig) -> None:
    path = profile_path("hosts")
    assert path is not None
    ours, theirs = _settings(path), _settings(COMPOSE_FILE)
    assert {k for k in ours if not EMBEDDED.match(k)} == {
        k for k in theirs if not COMPOSE_ONLY.match(k) and not EMBEDDED.match(k)
    }
    differ = {k for k in ours.keys() & theirs.keys() if ours[k] != theirs[k]}
    assert differ <= HOSTS_DIFFER, {k: (ours[k], theirs[k]) for k in differ - HOSTS_DIFFER}


def test_the_effective_settings_agree(profile: ClusterConfig, compose_config: ClusterConfig) -> None:
    """The same regions, instances, addresses and ports, Kafka brokers and topic settings, Spark master, Airflow
    executor, workers and URL, database and broker (compose's database has a password)."""
    ports = lambda text: [int(p) for p in re.findall(r":(\d+)", text)]  # noqa: E731
    assert compose_config.region_names == profile.region_names
    assert [compose_config.server_port(r, n) for r, n in profile.instances] == [
        profile.server_port(r, n) for r, n in profile.instances
    ]
    for region in profile.regions:
        theirs = compose_config.region(region.name)
        assert ports(theirs.kafka_bootstrap) == ports(profile.kafka.bootstrap)
        assert (theirs.replication_factor, theirs.min_insync_replicas) == (3, 2)
        assert (region.replication_factor, region.min_insync_replicas) == (3, 2)
    assert ports(compose_config.spark.master) == ports(profile.spark.master)
    assert compose_config.airflow.executor == profile.airflow.executor == "CeleryExecutor"
    assert compose_config.airflow.celery_workers == profile.airflow.celery_workers
    assert compose_config.airflow.triggerer and profile.airflow.triggerer
    assert compose_config.airflow.port == profile.airflow.port
    assert ports(compose_config.metadata_db_url) == ports(profile.metadata_db_url) == [profile.postgres.port]
    assert compose_config.airflow.db_url and profile.airflow.db_url
    assert ports(compose_config.airflow.db_url) == ports(profile.airflow.db_url)
    assert ports(compose_config.airflow.celery_broker_url) == ports(profile.airflow.celery_broker_url)
    assert [compose_config.server_addresses(r) for r in profile.region_names] == [
        profile.server_addresses(r) for r in profile.region_names
    ]
    assert all(region.kafka_bootstrap == profile.kafka.bootstrap for region in compose_config.regions)
    assert compose_config.spark.master == profile.spark.master
    assert compose_config.spark.ui_port == profile.spark.ui_port  # where a retry finds an earlier try's application
    assert compose_config.airflow.api_url == profile.airflow.api_url
    without_password = lambda url: url.replace("venice:venice@", "venice@")  # noqa: E731
    without_tls = lambda url: url.partition("?")[0]  # noqa: E731  (the profile's files to connect with: compose has none yet)
    assert without_password(compose_config.metadata_db_url) == without_tls(profile.metadata_db_url)
    assert without_password(compose_config.airflow.db_url) == without_tls(profile.airflow.db_url)
    assert compose_config.airflow.celery_broker_url == profile.airflow.celery_broker_url


def test_the_services_run_with_the_profile_settings(profile: ClusterConfig) -> None:
    """What compose sets outside the config file: the brokers' replication, the Spark workers' cores and memory,
    Airflow's executor, database and broker, the Spark connection."""
    kafka = [SERVICES[f"kafka-{n}"]["environment"] for n in range(profile.kafka.brokers)]
    for env in kafka:
        assert int(env["KAFKA_DEFAULT_REPLICATION_FACTOR"]) == profile.regions[0].replication_factor
        assert int(env["KAFKA_MIN_INSYNC_REPLICAS"]) == profile.regions[0].min_insync_replicas
        voters = env["KAFKA_CONTROLLER_QUORUM_VOTERS"]
        assert [int(p) for p in re.findall(r":(\d+)", voters)] == [
            profile.kafka.node_controller_port(n) for n in range(profile.kafka.brokers)
        ]
    for n in range(profile.spark.workers):
        command = SERVICES[f"spark-worker-{n}"]["command"]
        cores, memory = command[command.index("--cores") + 1], command[command.index("--memory") + 1]
        assert (int(cores), memory) == (profile.spark.worker_cores, profile.spark.worker_memory)
    airflow_env = SERVICES["airflow-scheduler"]["environment"]
    assert airflow_env["AIRFLOW__CORE__EXECUTOR"] == profile.airflow.executor
    assert airflow_env["AIRFLOW__API__PORT"] == str(profile.airflow.port)
    assert f":{profile.redis.port}/" in airflow_env["AIRFLOW__CELERY__BROKER_URL"]
    assert f":{profile.postgres.port}/airflow" in airflow_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    master = profile.spark.standalone_master
    assert master is not None and f":{master[1]}" in airflow_env["AIRFLOW_CONN_SPARK_DEFAULT"]
