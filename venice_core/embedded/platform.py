"""`venice up`, `venice down`, `venice status`: the embedded platform as a whole."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from venice_core.config import ClusterConfig
from venice_core.deployment import airflow as deployment
from venice_core.embedded import airflow, kafka, network, postgres, redis, servers, spark_cluster
from venice_core.embedded.process import ManagedProcess
from venice_core.errors import VeniceError
from venice_core.meta import MetadataStore
from venice_core.pubsub import acls
from venice_core.security import ca as certificates
from venice_core.security import files as security_files
from venice_core.security import principals


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    healthy: bool
    detail: str
    address: str = ""  # its host's address, when it runs on a host of its own (the hosts profile)


def up(
    config: ClusterConfig,
    report: Callable[[str], None] = print,
    before_airflow: Callable[[bool], None] | None = None,
) -> None:
    """Start every component in dependency order; each already running is left as it is. If one fails to start,
    the ones this call started are stopped again before the error is raised: a failed `venice up` leaves nothing
    half-started behind. `before_airflow` runs before Airflow starts, told whether it runs already (the stores'
    DAG files are written there: this layer knows no store)."""
    with principals.acting_as(config, principals.ADMIN):  # its Kafka health checks and grants
        _up(config, report, before_airflow)


def _up(config: ClusterConfig, report: Callable[[str], None], before_airflow: Callable[[bool], None] | None) -> None:
    config.data_dir.mkdir(parents=True, exist_ok=True)
    started: list[Callable[[], object]] = []  # how to stop what this call started, in start order

    def start(was_running: bool, begin: Callable[[], str], stop: Callable[[], object]) -> None:
        report(begin())
        if not was_running:
            started.append(stop)

    names = [process.name for process in plan(config)]  # each process's name is its host's
    try:
        if config.security.enabled:  # the CA and every host's and role's certificate, before any process needs one
            ca, issued = certificates.issue_all(config, names)
            expires = f"{ca.certificate.not_valid_after_utc:%Y-%m-%d}"
            where = security_files.folder(config)
            report(f"certificates: {len(issued)} in {where}, issued by {ca.cert_path} (expires {expires})")
            for principal in principals.static(config):  # each principal's credentials file, for its processes
                principals.client_file(config, principal)
        if config.hosts.enabled:  # a network namespace per process, before any starts
            if not network.namespaces(config):  # made here: removed again if this call fails
                started.append(lambda: network.remove(config))
            hosts = network.create(config, names)
            layout = config.hosts
            report(f"hosts: {len(hosts)} on bridge {layout.bridge} ({layout.subnet}, gateway {layout.gateway})")
        if config.postgres.enabled:  # the metadata store's and Airflow's database
            running = postgres.process(config).pid() is not None
            start(running, lambda: postgres.start(config), lambda: postgres.stop(config))
        if config.redis.enabled:  # the Celery workers' broker
            start(redis.process(config).pid() is not None, lambda: redis.start(config), lambda: redis.stop(config))
        if config.kafka.enabled:  # the nodes not running (a lost one is brought back), and only those stopped again
            down = [n for n, proc in enumerate(kafka.processes(config)) if proc.pid() is None]
            start(not down, lambda: kafka.start(config), lambda: kafka.stop_nodes(config, down))
        if config.security.enabled and config.kafka.enabled:  # what each principal may read, before any reader starts
            report(f"kafka ACLs: {acls.grant_platform(config)} granted to {', '.join(principals.static(config)[1:])}")
        meta = MetadataStore(config.metadata_db_url)
        try:
            meta.migrate()
            report(f"metadata store ready at {meta.safe_url} (schema {meta.current_revision()})")
        finally:
            meta.dispose()
        if config.spark.workers:  # where the jobs go, before anything submits one (lost workers restart)
            start(
                spark_cluster.master_process(config).pid() is not None,
                lambda: spark_cluster.start(config),
                lambda: spark_cluster.stop(config),
            )
        for region, instance in config.instances:  # the ones not running: a lost instance is brought back
            start(
                servers.process(config, region, instance).pid() is not None,
                functools.partial(servers.start, config, region, instance),
                functools.partial(servers.stop, config, region, instance),
            )
        if config.airflow.enabled:
            running = bool(airflow.pids(config))
            if before_airflow is not None:
                before_airflow(running)
            start(running, lambda: airflow.start(config), lambda: airflow.stop(config))
    except BaseException:
        for stop in reversed(started):
            stop()
        raise


def down(config: ClusterConfig, report: Callable[[str], None] = print) -> None:
    """Stop every component, in reverse order of start (Airflow whether or not it is enabled now)."""
    if airflow.stop(config):
        report("airflow stopped")
    for proc in servers.unconfigured(config):
        if proc.stop(timeout=60.0):
            report(f"{proc.name} stopped (running, though no longer in the config)")
    for region, instance in reversed(config.instances):
        if servers.stop(config, region, instance):
            report(f"{servers.label(config, region, instance)} stopped")
    if spark_cluster.stop(config):  # whether or not it is configured now
        report("spark stopped")
    elif config.spark.workers:
        report("spark was not running")
    if config.kafka.enabled:
        report("kafka stopped" if kafka.stop(config) else "kafka was not running")
    # Redis and PostgreSQL whether or not they are enabled now: nothing of the platform uses them any more.
    for name, enabled, stop in (
        ("redis", config.redis.enabled, redis.stop),
        ("postgres", config.postgres.enabled, postgres.stop),
    ):
        if stop(config):
            report(f"{name} stopped")
        elif enabled:
            report(f"{name} was not running")
    if config.hosts.enabled:  # the hosts, once nothing runs on them (another profile's bridge is not this one's)
        count = len(network.namespaces(config))
        if network.remove(config):
            report(f"hosts removed: {count} namespaces and bridge {config.hosts.bridge}")


def _server_status(config: ClusterConfig, region: str, instance: int) -> ComponentStatus:
    """An instance's health, with how many replicas it holds and leads (from its `/health`)."""
    name = servers.name(region, instance)
    pid = servers.process(config, region, instance).pid()
    port = config.server_port(region, instance)
    health = servers.health(config, region, instance)
    if pid is None:
        if health is not None:  # something `venice up` did not start answers on the instance's port
            return ComponentStatus(name, False, f"not started by venice up; pid {health.get('pid')} serves port {port}")
        return ComponentStatus(name, False, "not running")
    detail = f"pid {pid}, port {port}"
    if health is None:
        return ComponentStatus(name, False, f"{detail}, not answering")
    if health.get("pid") != pid:
        return ComponentStatus(name, False, f"{detail}, but pid {health.get('pid')} answers on the port")
    replicas, leads = health.get("replicas", 0), health.get("leads", 0)
    return ComponentStatus(name, True, f"{detail}, {replicas} replica{'s' if replicas != 1 else ''} ({leads} leading)")


def _kafka_status(config: ClusterConfig, node: int) -> ComponentStatus:
    """A Kafka node: `kafka` (the single broker, on the whole bootstrap), or `kafka-<n>` of a cluster."""
    if config.kafka.brokers == 1:
        return _serving_status(kafka.process(config), config.kafka.bootstrap, lambda: kafka.is_healthy(config))
    where = kafka.address(config, node)
    return _serving_status(kafka.process(config, node), where, lambda: kafka.node_healthy(config, node))


def _spark_status(config: ClusterConfig) -> list[ComponentStatus]:
    """The standalone Spark cluster: its master (answering, how many workers alive), then each worker (registered
    ALIVE with the master)."""
    master = spark_cluster.master_process(config).pid()
    workers = config.spark.workers
    answers = master is not None and spark_cluster.master_state(config) is not None
    alive = spark_cluster.alive_worker_numbers(config) if answers else set()
    if master is None:
        lines = [ComponentStatus("spark-master", False, "not running")]
    else:
        detail = f"pid {master}, {config.spark.master}, UI {spark_cluster.ui_url(config)}, "
        detail += f"{len(alive)} of {workers} worker{'s' if workers != 1 else ''} alive" if answers else "not answering"
        lines = [ComponentStatus("spark-master", answers, detail)]
    for n in range(workers):
        pid = spark_cluster.worker_process(config, n).pid()
        port = spark_cluster.worker_ui_port(config, n)
        if pid is None:
            lines.append(ComponentStatus(f"spark-worker-{n}", False, "not running"))
        else:
            state = "registered ALIVE with the master" if n in alive else "not registered with the master"
            lines.append(ComponentStatus(f"spark-worker-{n}", n in alive, f"pid {pid}, UI port {port}, {state}"))
    return lines


def _serving_status(proc: ManagedProcess, where: str, healthy: Callable[[], bool]) -> ComponentStatus:
    """A server process's line: not running, or its pid and address, serving or not answering."""
    pid = proc.pid()
    if pid is None:
        return ComponentStatus(proc.name, False, "not running")
    up = healthy()
    return ComponentStatus(proc.name, up, f"pid {pid}, {where}, {'serving' if up else 'not answering'}")


def _postgres_status(config: ClusterConfig) -> ComponentStatus:
    where = postgres.server(config).address
    return _serving_status(postgres.process(config), where, lambda: postgres.is_healthy(config))


def _redis_status(config: ClusterConfig) -> ComponentStatus:
    return _serving_status(redis.process(config), redis.address(config), lambda: redis.is_healthy(config))


def _airflow_status(config: ClusterConfig) -> list[ComponentStatus]:
    """One line for Airflow itself (its API server, DAG processors and scheduler: healthy when all run and the API
    reports a healthy scheduler), one for its triggerer and for each Celery worker when the config runs them; on the
    hosts profile, one for each of the scheduler and DAG processors too (each on its host)."""
    procs = dict(zip(airflow.components(config), airflow.processes(config), strict=True))
    running = {name: procs[name].pid() for name in airflow.COMPONENTS}
    pids = [pid for pid in running.values() if pid is not None]
    healthy = len(pids) == len(airflow.COMPONENTS) and airflow.is_healthy(config)
    detail = f"pids {', '.join(map(str, pids))}, {deployment.base_url(config)}" if pids else "not running"
    if pids and len(pids) < len(airflow.COMPONENTS):
        missing = ", ".join(name for name, pid in running.items() if pid is None)
        detail += f" ({missing} not running: {len(pids)} of {len(airflow.COMPONENTS)} components running)"
    lines = [ComponentStatus("airflow", healthy, detail)]
    for name, proc in procs.items():
        if name in airflow.COMPONENTS:
            if config.hosts.enabled and name != airflow.COMPONENTS[0]:  # on a host of its own: a line of its own
                pid = running[name]
                lines.append(ComponentStatus(proc.name, pid is not None, f"pid {pid}" if pid else "not running"))
            continue
        pid = proc.pid()
        if pid is None:
            lines.append(ComponentStatus(proc.name, False, "not running"))
        elif name == airflow.TRIGGERER:
            up = airflow.triggerer_healthy(config)
            lines.append(ComponentStatus(proc.name, up, f"pid {pid}, {'healthy' if up else 'no recent heartbeat'}"))
        else:  # a Celery worker: its process runs (its tasks' heartbeats say the rest)
            number = int(name.rsplit("-", 1)[1])
            node = airflow.celery_worker_name(number)
            lines.append(ComponentStatus(proc.name, True, f"pid {pid}, {node}, {airflow.CELERY_CONCURRENCY} slots"))
    return lines


def _with_addresses(config: ClusterConfig, components: list[ComponentStatus]) -> list[ComponentStatus]:
    """Each process's line with its host's address (the hosts profile)."""
    if not config.hosts.enabled:
        return components
    named = {
        "airflow": "airflow-api-server",
        "metadata-store": "postgres" if config.postgres.enabled else "",
    }
    result = []
    for c in components:
        host = named.get(c.name, c.name)
        try:
            address = config.hosts.address(host) if host else ""
        except VeniceError:
            address = ""
        result.append(ComponentStatus(c.name, c.healthy, c.detail, address))
    return result


def status(config: ClusterConfig) -> list[ComponentStatus]:
    with principals.acting_as(config, principals.ADMIN):  # the brokers are asked as the admin
        lines = _with_addresses(config, _statuses(config))
    return lines + _certificate_statuses(config) if config.security.enabled else lines


def _certificate_statuses(config: ClusterConfig) -> list[ComponentStatus]:
    """The CA's and each issued certificate's expiry (healthy while more than the renewal margin is left)."""
    found = [security_files.ca_path(config), *sorted(security_files.certificates_folder(config).glob("*.pem"))]
    lines = []
    for path in found:
        name = "certificate-ca" if path == found[0] else f"certificate-{path.stem}"
        if not path.exists():
            lines.append(ComponentStatus(name, False, f"{path}: missing (venice up issues it)"))
            continue
        expires = certificates.load_certificate(path).not_valid_after_utc
        left = certificates.time_left(expires)
        detail = f"expires {expires:%Y-%m-%d} ({left.days} days), {path}"
        lines.append(ComponentStatus(name, left > certificates.RENEW_BEFORE, detail))
    return lines


def _statuses(config: ClusterConfig) -> list[ComponentStatus]:
    components: list[ComponentStatus] = []
    if config.postgres.enabled:
        components.append(_postgres_status(config))
    if config.redis.enabled:
        components.append(_redis_status(config))
    if config.kafka.enabled:
        components.extend(_kafka_status(config, node) for node in range(config.kafka.brokers))
        for proc in kafka.unconfigured(config):
            components.append(ComponentStatus(proc.name, False, f"pid {proc.pid()}, running but not in the config"))
    if config.spark.workers:
        components.extend(_spark_status(config))
    for region, instance in config.instances:
        components.append(_server_status(config, region, instance))
    for proc in servers.unconfigured(config):
        components.append(ComponentStatus(proc.name, False, f"pid {proc.pid()}, running but not in the config"))
    if config.airflow.enabled:
        components += _airflow_status(config)
    meta = MetadataStore(config.metadata_db_url)
    try:
        revision = meta.current_revision()
        healthy = revision == meta.head_revision()
        detail = f"{meta.safe_url}, schema {revision or 'not initialised'}"
        components.append(ComponentStatus("metadata-store", healthy, detail))
    except VeniceError as exc:
        components.append(ComponentStatus("metadata-store", False, str(exc)))
    finally:
        meta.dispose()
    return components


@dataclass(frozen=True)
class PlannedProcess:
    """A process `venice up` runs for a config, and the ports it listens on (its main one first)."""

    name: str
    ports: tuple[int, ...] = ()


def plan(config: ClusterConfig) -> list[PlannedProcess]:
    """Every process `venice up` runs for `config`, in start order: what docker-compose.yaml runs as services for
    the cluster profile (tests/unit/test_cluster_profile.py holds the two together)."""
    planned: list[PlannedProcess] = []
    if config.postgres.enabled:
        planned.append(PlannedProcess("postgres", (config.postgres.port,)))
    if config.redis.enabled:
        planned.append(PlannedProcess("redis", (config.redis.port,)))
    if config.kafka.enabled:
        k = config.kafka
        for node in range(k.brokers):
            planned.append(
                PlannedProcess(kafka.name(config, node), (k.broker_port(node), k.node_controller_port(node)))
            )
    master = config.spark.standalone_master
    if master is not None:
        ui = config.spark.ui_port
        planned.append(PlannedProcess("spark-master", (master[1], ui)))
        planned += [PlannedProcess(f"spark-worker-{n}", (ui + 1 + n,)) for n in range(config.spark.workers)]
    for region, instance in config.instances:
        planned.append(PlannedProcess(servers.name(region, instance), (config.server_port(region, instance),)))
    if config.airflow.enabled:
        # The API server first (on Airflow's port); then the triggerer and the Celery workers, when configured.
        api, *others = airflow.processes(config)
        planned += [PlannedProcess(api.name, (config.airflow.port,)), *(PlannedProcess(p.name) for p in others)]
    return planned
