"""The embedded Apache Kafka 4: a KRaft cluster of `kafka.embedded.brokers` nodes, each a broker and a controller at
once, on `kafka.embedded.host` (the loopback), or each on its host's address (the hosts profile).

One node (the default) is the single broker the platform always ran: process `kafka`, data in `<home>/kafka`, its
quorum formatted `--standalone`. Several are a cluster with a static quorum (`controller.quorum.voters`): node n
(node.id n+1) is process `kafka-<n>`, listens on `broker_port(n)` and `node_controller_port(n)`, keeps its data in
`<home>/kafka/node-<n>`, and all share the cluster id in `<home>/kafka/cluster.id`. The nodes start together (a
controller needs a majority of the voters to elect a leader, a broker needs the leader to register), and the
cluster is healthy once every broker is registered.

Its jars come from Maven Central through `kafka-pom.xml` (beside this file) into a cache folder keyed by the
pom's content; its storage is formatted on first start; its data and logs live in the data dir.
"""

from __future__ import annotations

import base64
import functools
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from venice_core.config import ClusterConfig, kafka_node_name
from venice_core.embedded.process import ManagedProcess, Starting, host_of, wait_until_healthy
from venice_core.errors import ComponentError, ConfigError
from venice_core.host.maven import fetch_jars
from venice_core.host.programs import require_program
from venice_core.security import principals
from venice_core.security.files import ca_path, certificate, write_private

POM = Path(__file__).with_name("kafka-pom.xml")
# The JVM's security providers, the Amazon Corretto Crypto Provider (fetched with the broker) first: a broker on C1
# alone did TLS's AES-GCM in plain Java, about half a secured push's broker CPU (bench/README.md). Its native
# library is fetched for linux-x86_64; elsewhere the JDK's providers serve.
SECURITY_PROVIDERS = Path(__file__).with_name("java-crypto.security")
SECURED_MARK = "secured"  # in a node's folder: its storage was formatted with the SCRAM users of a secured cluster
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
START_TIMEOUT_SECONDS = 90.0
CLUSTER_START_TIMEOUT_SECONDS = 150.0  # several JVMs starting at once on few cores
STOP_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.5

LOG4J2_PROPERTIES = """\
status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = {log_dir}/server.log
appender.file.filePattern = {log_dir}/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""


def ensure_jars() -> Path:
    return fetch_jars(POM)


def _data_dir(config: ClusterConfig) -> Path:
    return config.data_dir / "kafka"


def _clustered(config: ClusterConfig) -> bool:
    return config.kafka.brokers > 1


def _check_node(config: ClusterConfig, node: int) -> int:
    count = config.kafka.brokers
    if not 0 <= node < count:
        raise ConfigError(
            f"the embedded Kafka has {count} broker{'s' if count != 1 else ''} (kafka.embedded.brokers): "
            f"node {node} is out of range 0..{count - 1}"
        )
    return node


def node_dir(config: ClusterConfig, node: int = 0) -> Path:
    """A node's folder: its server.properties, log4j2.properties, `data` (the log dirs) and `logs`."""
    _check_node(config, node)
    return _data_dir(config) / f"node-{node}" if _clustered(config) else _data_dir(config)


def name(config: ClusterConfig, node: int = 0) -> str:
    """The node's process name, as `venice status` shows it: `kafka` for the single broker, else `kafka-<n>`."""
    return kafka_node_name(config.kafka.brokers, _check_node(config, node))


def process(config: ClusterConfig, node: int = 0) -> ManagedProcess:
    return ManagedProcess(name(config, node), config.run_dir)


def processes(config: ClusterConfig) -> list[ManagedProcess]:
    """Every node's process, node 0 first."""
    return [process(config, n) for n in range(config.kafka.brokers)]


def address(config: ClusterConfig, node: int = 0) -> str:
    """Where clients reach the node's broker."""
    return f"{config.kafka.node_host(node)}:{config.kafka.broker_port(_check_node(config, node))}"


def _topic_settings(config: ClusterConfig) -> tuple[int, int]:
    """The replication factor and min.insync.replicas of the topics the platform creates (the same in every
    region: `kafka.topic.*`), as the brokers' defaults."""
    return max(r.replication_factor for r in config.regions), max(r.min_insync_replicas for r in config.regions)


def server_properties(config: ClusterConfig, node: int = 0) -> str:
    k = config.kafka
    controller = f"{k.node_host(node)}:{k.node_controller_port(_check_node(config, node))}"
    broker = address(config, node)
    if _clustered(config):
        voters = ",".join(f"{n + 1}@{k.node_host(n)}:{k.node_controller_port(n)}" for n in range(k.brokers))
        quorum = {"controller.quorum.voters": voters}
        internal_replicas, internal_isr = str(min(3, k.brokers)), str(min(2, k.brokers))
        replication_factor, min_insync = _topic_settings(config)
        topic_defaults = {"default.replication.factor": str(replication_factor), "min.insync.replicas": str(min_insync)}
    else:
        # A quorum of one: no follower reads the no-op records the active controller appends to the metadata log
        # every 500 ms (Kafka's default) for its lag metrics. Each was a raft append and flush: off, an idle
        # broker took 0.7 instead of 1.2-1.4 CPU-seconds a minute (measured on this 2-core machine).
        quorum = {"controller.quorum.bootstrap.servers": controller, "metadata.max.idle.interval.ms": "0"}
        internal_replicas = internal_isr = "1"
        topic_defaults = {}
    clients, controllers = ("SASL_SSL", "SSL") if config.security.enabled else ("PLAINTEXT", "PLAINTEXT")
    settings = {
        "process.roles": "broker,controller",
        "node.id": str(node + 1),
        **quorum,
        "listeners": f"{clients}://{broker},CONTROLLER://{controller}",
        "advertised.listeners": f"{clients}://{broker},CONTROLLER://{controller}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": clients,
        "listener.security.protocol.map": f"CONTROLLER:{controllers},{clients}:{clients}",
        **(_security_settings(config, node) if config.security.enabled else {}),
        "log.dirs": str(node_dir(config, node) / "data"),
        "num.partitions": "1",
        **topic_defaults,
        "num.network.threads": "2",
        "num.io.threads": "2",
        "offsets.topic.replication.factor": internal_replicas,
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": internal_replicas,
        "transaction.state.log.min.isr": internal_isr,
        "share.coordinator.state.topic.replication.factor": internal_replicas,
        "share.coordinator.state.topic.min.isr": internal_isr,
        "group.initial.rebalance.delay.ms": "0",
        # Version topics are the source of repushes: keep them until the controller deletes them.
        "log.retention.ms": "-1",
        "auto.create.topics.enable": "false",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def keystore(config: ClusterConfig, node: int) -> Path:
    """The node's key and certificate in one PEM file (Kafka's PEM key store, KIP-651)."""
    return node_dir(config, node) / "keystore.pem"


def _security_settings(config: ClusterConfig, node: int) -> dict[str, str]:
    """SCRAM-SHA-512 over TLS for clients and between brokers, TLS between controllers; every connection presents a
    certificate of the platform's CA (another CA's is refused in the handshake), and KRaft's authorizer allows only
    what `pubsub.acls` grants. The controllers know each other by their certificates' names (`kafka`, `kafka-<n>`);
    the brokers by the `broker` principal's password, which makes this file private."""
    jaas = f'username="{principals.BROKER}" password="{principals.password(config, principals.BROKER)}"'
    nodes = [f"User:{name(config, n)}" for n in range(config.kafka.brokers)]
    return {
        "sasl.enabled.mechanisms": principals.MECHANISM,
        "sasl.mechanism.inter.broker.protocol": principals.MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{SCRAM_LOGIN_MODULE} required {jaas};",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore(config, node)),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_path(config)),
        # A SASL_SSL listener asks for a client certificate only when told so by its own name (KIP-684).
        "listener.name.sasl_ssl.ssl.client.auth": "required",
        "listener.name.controller.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join([*(f"User:{p}" for p in principals.SUPER_USERS), *nodes]),
    }


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def registered_brokers(bootstrap: str, timeout: float = 5.0) -> set[int] | None:
    """The ids of the brokers the cluster has registered and not fenced (those alive), None if none answers."""
    from confluent_kafka.admin import AdminClient

    from venice_core.pubsub import client_config

    admin = AdminClient(client_config(bootstrap))
    try:
        return {node.id for node in admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 1).nodes}
    except Exception:  # noqa: BLE001 - any failure means "no answer"
        return None


def is_healthy(config: ClusterConfig, timeout: float = 5.0) -> bool:
    """The single broker answers; a cluster has all of its brokers registered."""
    k = config.kafka
    if not _clustered(config):
        if not _port_open(k.node_host(0), k.port):
            return False
        from confluent_kafka.admin import AdminClient

        from venice_core.pubsub import client_config

        admin = AdminClient(client_config(k.bootstrap))
        try:
            admin.list_topics(timeout=timeout)
            return True
        except Exception:  # noqa: BLE001 - any failure means "not healthy"
            return False
    if not any(_port_open(k.node_host(n), k.broker_port(n)) for n in range(k.brokers)):
        return False
    return registered_brokers(k.bootstrap, timeout) == {n + 1 for n in range(k.brokers)}


def node_healthy(config: ClusterConfig, node: int, timeout: float = 5.0) -> bool:
    """The node's broker answers, registered with the cluster. Asked with the node alone as bootstrap server, so
    the node itself answers (a broker serves requests once it has caught up with the cluster's metadata): a node
    killed a moment ago is still counted by the others until its session times out."""
    if not _clustered(config):
        return is_healthy(config, timeout)
    if not _port_open(config.kafka.node_host(node), config.kafka.broker_port(_check_node(config, node))):
        return False
    registered = registered_brokers(address(config, node), timeout)
    return registered is not None and node + 1 in registered


def _format_command(
    jvm: list[str], props: Path, cluster_id: str, standalone: bool, users: dict[str, str] | None = None
) -> list[str]:
    """The id goes as `--cluster-id=<id>`: a random base64 id starts with '-' one time in 64, and as a separate
    argument the tool would take it for an option. `users` (SCRAM users and their passwords, the brokers' own and the
    admin's: a broker cannot authenticate to another before its metadata holds them) are written into the cluster's
    first metadata."""
    quorum = ["--standalone"] if standalone else []  # a cluster's voters are in its properties
    scram = [f"--add-scram={principals.MECHANISM}=[name={u},password={p}]" for u, p in (users or {}).items()]
    return [*jvm, "kafka.tools.StorageTool", "format", *quorum, f"--cluster-id={cluster_id}", "-c", str(props), *scram]


def _private_argv(command: list[str], folder: Path) -> tuple[list[str], Path]:
    """`command` as `java @file`, its arguments in a file of mode 0600 (the caller deletes it): the passwords in a
    format's arguments stay off the process table, which anyone on the machine can read."""
    argfile = folder / ".format.args"
    quoted = ('"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"' for arg in command[1:])
    write_private(argfile, "\n".join(quoted).encode())
    return [command[0], f"@{argfile}"], argfile


def format_storage(jvm: list[str], props: Path, cluster_id: str, standalone: bool = True) -> None:
    """Format the KRaft storage once."""
    _format_all({str(props): _format_command(jvm, props, cluster_id, standalone)})


def _format_all(commands: dict[str, list[str]], private: bool = False) -> None:
    """Run the nodes' storage formats at once (a JVM each): one error naming every node that failed. `private`: the
    commands hold passwords, and run from argument files."""
    argfiles: list[Path] = []
    running = {}
    try:
        for label, command in commands.items():
            if private:
                command, argfile = _private_argv(command, Path(command[command.index("-c") + 1]).parent)
                argfiles.append(argfile)
            running[label] = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        failures = []
        for label, proc in running.items():
            output, _ = proc.communicate()
            if proc.returncode != 0:
                failures.append(f"{label}: {output.strip()}")
    finally:
        for argfile in argfiles:
            argfile.unlink(missing_ok=True)
    if failures:
        raise ComponentError("cannot format Kafka storage of " + "\n".join(failures))


def _cluster_id(config: ClusterConfig) -> str:
    """The cluster's id, the same for every node: kept in `<home>/kafka/cluster.id` (taken from a formatted node
    where the file was lost)."""
    file = _data_dir(config) / "cluster.id"
    if file.is_file() and file.read_text().strip():
        return file.read_text().strip()
    cluster_id = None
    for meta in sorted(_data_dir(config).glob("node-*/data/meta.properties")):
        for line in meta.read_text().splitlines():
            if line.startswith("cluster.id="):
                cluster_id = line.partition("=")[2].strip()
    cluster_id = cluster_id or _new_cluster_id()
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(cluster_id + "\n")
    return cluster_id


def _new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def jvm_command(config: ClusterConfig, libs: Path, log4j: Path) -> list[str]:
    java = require_program("java", "a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)")
    return [
        java,
        f"-Xmx{config.kafka.heap}",
        "-Xms64m",
        f"-Djava.security.properties={SECURITY_PROVIDERS}",  # before the config's: a -D there wins
        *config.kafka.jvm_options,
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{libs}/*",
    ]


def _check_ports_free(config: ClusterConfig, nodes: Iterable[int]) -> None:
    k = config.kafka
    for node in nodes:
        if host_of(config, name(config, node)) is not None:  # a host of its own has no other process
            continue
        ports = {
            "kafka.embedded.port": k.broker_port(node),
            "kafka.embedded.controller.port": k.node_controller_port(node),
        }
        for key, port in ports.items():
            if _port_open(k.node_host(node), port):
                whose = f" ({name(config, node)}'s)" if _clustered(config) else ""
                raise ComponentError(
                    f"port {k.node_host(node)}:{port}{whose} is taken by another process: stop it or set {key}"
                )


def _log_tail(config: ClusterConfig, node: int, lines: int = 20) -> str:
    """The end of the node's own log (log4j's server.log), else of its console log."""
    proc = process(config, node)
    server_log = node_dir(config, node) / "logs" / "server.log"
    try:
        tail = server_log.read_text(errors="replace").splitlines()[-lines:]
        if tail:
            return f"last lines of {server_log}:\n" + "\n".join(tail)
    except OSError:
        pass
    return f"last lines of {proc.log_file}:\n{proc.log_tail(lines)}"


def _prepare(config: ClusterConfig, node: int, libs: Path) -> tuple[list[str], Path, bool]:
    """Write the node's properties and log config: (its JVM command, its properties file, whether it needs a
    format)."""
    folder = node_dir(config, node)
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    props = folder / "server.properties"
    write_private(props, server_properties(config, node).encode())  # with security, it holds the broker's password
    log4j = folder / "log4j2.properties"
    log4j.write_text(LOG4J2_PROPERTIES.format(log_dir=folder / "logs"))
    unformatted = not (folder / "data" / "meta.properties").exists()
    if config.security.enabled:
        if not unformatted and not (folder / SECURED_MARK).exists():
            raise ConfigError(
                f"the Kafka storage in {folder / 'data'} was formatted without security.enabled: it holds no SCRAM "
                f"users for the brokers. Run `venice down`, delete {_data_dir(config)} (its topics are lost) and "
                "`venice up` again, or keep security.enabled=false"
            )
        cert, key = certificate(config, name(config, node))
        write_private(keystore(config, node), key.read_bytes() + cert.read_bytes())
    return jvm_command(config, libs, log4j), props, unformatted


def _bootstrap_users(config: ClusterConfig) -> dict[str, str]:
    """The SCRAM users a secured cluster's storage is formatted with: those who authenticate before any ACL exists."""
    return {user: principals.password(config, user) for user in principals.SUPER_USERS}


def _start_nodes(config: ClusterConfig, nodes: list[int], healthy: Callable[[], bool]) -> None:
    """Start the nodes (all of them at once) and wait until `healthy()`. A node that dies is named, with its log's
    end; on any failure the nodes started here are stopped again."""
    jvm_command(config, Path(), Path())  # a missing `java` is reported before anything else
    _check_ports_free(config, nodes)
    libs = ensure_jars()
    prepared = {node: _prepare(config, node, libs) for node in nodes}
    to_format = {node: (jvm, props) for node, (jvm, props, unformatted) in prepared.items() if unformatted}
    if to_format:
        clustered = _clustered(config)
        cluster_id = _cluster_id(config) if clustered else _new_cluster_id()
        users = _bootstrap_users(config) if config.security.enabled else None
        _format_all(
            {
                name(config, n): _format_command(jvm, props, cluster_id, not clustered, users)
                for n, (jvm, props) in to_format.items()
            },
            private=users is not None,
        )
        if users is not None:
            for n in to_format:
                (node_dir(config, n) / SECURED_MARK).touch()

    started: list[int] = []
    try:
        for node in nodes:
            jvm, props, _ = prepared[node]
            host = host_of(config, name(config, node))
            process(config, node).start([*jvm, "kafka.Kafka", str(props)], cwd=node_dir(config, node), host=host)
            started.append(node)
        timeout = CLUSTER_START_TIMEOUT_SECONDS if _clustered(config) else START_TIMEOUT_SECONDS
        what = (
            "kafka"
            if not _clustered(config)
            else f"the Kafka cluster ({', '.join(name(config, n) for n in nodes)} started)"
        )
        wait_until_healthy(
            [Starting(name(config, n), process(config, n), functools.partial(_log_tail, config, n)) for n in started],
            healthy,
            timeout=timeout,
            interval=POLL_SECONDS,
            timeout_error=lambda _: ComponentError(f"{what} did not become healthy within {timeout:.0f}s"),
        )
    except BaseException:
        stop_nodes(config, started)
        raise


def _serving(config: ClusterConfig, started: list[int]) -> bool:
    """Every broker registered, and each node just started answering itself: a node killed a moment ago may still
    be registered (until its session times out) and counted by `is_healthy`."""
    return is_healthy(config, timeout=2.0) and all(node_healthy(config, n, timeout=2.0) for n in started)


def start(config: ClusterConfig) -> str:
    """Start the nodes that are not running (a lost node comes back) and wait until the cluster is healthy.
    Returns a line for the user."""
    k = config.kafka
    down = [n for n in range(k.brokers) if process(config, n).pid() is None]
    if not _clustered(config):
        proc = process(config)
        if not down:
            return f"kafka is already running (pid {proc.pid()}) on {k.bootstrap}"
        _start_nodes(config, down, lambda: is_healthy(config, timeout=2.0))
        return f"kafka started (pid {proc.pid()}) on {k.bootstrap}"
    pids = ", ".join(f"{name(config, n)} pid {process(config, n).pid()}" for n in range(k.brokers) if n not in down)
    if not down:
        return f"kafka is already running ({pids}) on {k.bootstrap}"
    began = time.monotonic()
    _start_nodes(config, down, lambda: _serving(config, down))
    started = ", ".join(f"{name(config, n)} (pid {process(config, n).pid()})" for n in down)
    running = f"; {pids} already running" if pids else ""
    return f"kafka started: {started}{running}; {k.brokers} brokers on {k.bootstrap} in {time.monotonic() - began:.0f}s"


def start_node(config: ClusterConfig, node: int) -> str:
    """Start one node (if it is not running) and wait until its broker is registered: the cluster's other nodes
    must be running for its controller to find a quorum."""
    proc = process(config, node)
    pid = proc.pid()
    if pid is not None:
        return f"{name(config, node)} is already running (pid {pid}) on {address(config, node)}"
    _start_nodes(config, [node], lambda: node_healthy(config, node, timeout=2.0))
    return f"{name(config, node)} started (pid {proc.pid()}) on {address(config, node)}"


def stop_nodes(config: ClusterConfig, nodes: Iterable[int]) -> bool:
    """Stop the nodes, all at once (one by one, the last ones would wait for a controller quorum that is gone).
    False if none was running."""
    procs = [process(config, n) for n in nodes]
    if len(procs) <= 1:
        return any([p.stop(timeout=STOP_TIMEOUT_SECONDS) for p in procs])
    with ThreadPoolExecutor(len(procs)) as pool:
        return any(list(pool.map(lambda p: p.stop(timeout=STOP_TIMEOUT_SECONDS), procs)))


def stop(config: ClusterConfig) -> bool:
    """Stop every node, and any the config no longer has (`unconfigured`). False if none was running."""
    stopped = stop_nodes(config, range(config.kafka.brokers))
    return any([proc.stop(timeout=STOP_TIMEOUT_SECONDS) for proc in unconfigured(config)]) or stopped


def unconfigured(config: ClusterConfig) -> list[ManagedProcess]:
    """Kafka nodes `venice up` started that the config no longer has (`kafka.embedded.brokers` changed) and that
    still run: `venice status` shows them and `venice down` stops them too."""
    configured = {proc.name for proc in processes(config)}
    found = []
    for pid_file in sorted(config.run_dir.glob("kafka*.pid")):
        if pid_file.stem not in configured and (pid_file.stem == "kafka" or pid_file.stem[6:].isdigit()):
            proc = ManagedProcess(pid_file.stem, config.run_dir)
            if proc.pid() is not None:
                found.append(proc)
    return found


def stop_node(config: ClusterConfig, node: int) -> bool:
    return stop_nodes(config, [node])


def kill_node(config: ClusterConfig, node: int) -> None:
    """SIGKILL the node, as a crash would: for fault tests."""
    process(config, node).kill()


if __name__ == "__main__":  # `make install` and `make test` fill the jar cache before anything runs in parallel
    print(f"kafka jars: {ensure_jars()}")
