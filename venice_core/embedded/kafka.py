"""The embedded Apache Kafka 4 broker: one KRaft node (broker + controller) on 127.0.0.1.

Its jars come from Maven Central through `kafka-pom.xml` (beside this file) into a cache folder keyed by the
pom's content; its storage is formatted on first start; its data and logs live in the data dir.
"""

from __future__ import annotations

import base64
import socket
import subprocess
import uuid
from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.embedded.maven import fetch_jars
from venice_core.embedded.process import ManagedProcess, require_program
from venice_core.errors import ComponentError

POM = Path(__file__).with_name("kafka-pom.xml")
START_TIMEOUT_SECONDS = 90.0

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
    return config.home / "kafka"


def process(config: ClusterConfig) -> ManagedProcess:
    return ManagedProcess("kafka", config.run_dir)


def server_properties(config: ClusterConfig) -> str:
    k = config.kafka
    controller = f"{k.host}:{k.controller_port}"
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": controller,
        "listeners": f"PLAINTEXT://{k.bootstrap},CONTROLLER://{controller}",
        "advertised.listeners": f"PLAINTEXT://{k.bootstrap},CONTROLLER://{controller}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(_data_dir(config) / "data"),
        "num.partitions": "1",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Version topics are the source of repushes: keep them until the controller deletes them.
        "log.retention.ms": "-1",
        "auto.create.topics.enable": "false",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def is_healthy(config: ClusterConfig, timeout: float = 5.0) -> bool:
    if not _port_open(config.kafka.host, config.kafka.port):
        return False
    from confluent_kafka.admin import AdminClient

    from venice_core.pubsub import client_config

    admin = AdminClient(client_config(config.kafka.bootstrap))
    try:
        admin.list_topics(timeout=timeout)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not healthy"
        return False


def format_storage(jvm: list[str], props: Path, cluster_id: str) -> None:
    """Format the KRaft storage once. The id goes as `--cluster-id=<id>`: a random base64 id starts with '-' one
    time in 64, and as a separate argument the tool would take it for an option."""
    result = subprocess.run(
        [*jvm, "kafka.tools.StorageTool", "format", "--standalone", f"--cluster-id={cluster_id}", "-c", str(props)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ComponentError(f"cannot format Kafka storage for {props}: {result.stdout}{result.stderr}")


def jvm_command(config: ClusterConfig, libs: Path, log4j: Path) -> list[str]:
    java = require_program("java", "a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)")
    return [
        java,
        f"-Xmx{config.kafka.heap}",
        "-Xms64m",
        *config.kafka.jvm_options,
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{libs}/*",
    ]


def start(config: ClusterConfig) -> str:
    """Start the broker and wait until it answers. Returns a line for the user."""
    proc = process(config)
    pid = proc.pid()
    if pid is not None:
        return f"kafka is already running (pid {pid}) on {config.kafka.bootstrap}"
    jvm_command(config, Path(), Path())  # a missing `java` is reported before anything else
    if _port_open(config.kafka.host, config.kafka.port):
        raise ComponentError(
            f"port {config.kafka.bootstrap} is taken by another process: stop it or set kafka.embedded.port"
        )
    libs = ensure_jars()
    data_dir = _data_dir(config)
    (data_dir / "logs").mkdir(parents=True, exist_ok=True)
    props = data_dir / "server.properties"
    props.write_text(server_properties(config))
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(LOG4J2_PROPERTIES.format(log_dir=data_dir / "logs"))
    jvm = jvm_command(config, libs, log4j)

    if not (data_dir / "data" / "meta.properties").exists():
        format_storage(jvm, props, base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode())

    proc.start([*jvm, "kafka.Kafka", str(props)], cwd=data_dir)
    proc.wait_until_healthy("kafka", lambda: is_healthy(config, timeout=2.0), START_TIMEOUT_SECONDS, 0.5)
    return f"kafka started (pid {proc.pid()}) on {config.kafka.bootstrap}"


def stop(config: ClusterConfig) -> bool:
    return process(config).stop(timeout=60.0)


if __name__ == "__main__":  # `make install` and `make test` fill the jar cache before anything runs in parallel
    print(f"kafka jars: {ensure_jars()}")
