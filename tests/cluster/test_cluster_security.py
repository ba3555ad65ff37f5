"""An intruder on the secured cluster profile (issue 45): on the hosts profile, from a host of its own on the same
bridge (`intruder-0`, 10.213.200.1), knowing every address and port and holding the platform's public CA
certificate, but none of its secrets. Kafka refuses it without credentials, with a wrong password, with another CA's
certificate, and in PLAINTEXT; the region servers refuse it without a certificate and in plain HTTP; the Spark master
never runs an application submitted without the cluster's secret. Each refusal is logged by the server it knocked
at, with the intruder's address; nothing it tried changed anything. PostgreSQL refuses it in plain TCP, without a
certificate and with another CA's (even with the stolen password); Redis in plain TCP, without a certificate and with
another CA's. (On the cluster profile, where no host can be
made, the intruder is a process of this machine.)"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import master_apps
from tests.support.platform import SCHEMAS, PlatformEnv
from tests.support.profiles import CLUSTER_PROFILE, REPO
from tests.support.secrets_scan import assert_secrets_kept
from venice_core.deployment.airflow import home as airflow_home
from venice_core.embedded import kafka, network
from venice_core.security import files as security_files
from venice_core.security import principals
from venice_core.security.ca import Authority
from venice_core.security.files import ca_path, folder
from venice_core.security.secrets import every_secret, secret
from venice_core.security.spark import ENV_CONF_DIR
from venice_core.utils.waiting import poll_until

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.airflow,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.cluster,
]

INTRUDER = "intruder-0"
ANN = {"name": "ann", "age": 30, "score": 1.0}
Intruder = Callable[..., subprocess.CompletedProcess[str]]  # (command, its standard input) -> its run

# What the intruder tries, each a verdict: "refused: <why>" or "allowed". It knows the addresses and the CA.
ATTEMPTS = textwrap.dedent(
    """
    import http.client, json, ssl, sys
    from confluent_kafka.admin import AdminClient
    args = json.load(sys.stdin)  # (a password on the command line is what the platform must never do)
    found = {}

    def kafka(name, **settings):
        try:
            AdminClient({"bootstrap.servers": args["bootstrap"], "socket.timeout.ms": 4000, **settings}).list_topics(
                timeout=8
            )
            found[name] = "allowed"
        except Exception as exc:
            found[name] = f"refused: {exc}"

    secured = {"security.protocol": "SASL_SSL", "ssl.ca.location": args["ca"], "sasl.mechanisms": "SCRAM-SHA-512"}
    kafka("kafka plaintext")
    kafka("kafka no credentials", **{"security.protocol": "SSL", "ssl.ca.location": args["ca"]})
    kafka("kafka wrong password", **secured, **{"sasl.username": "admin", "sasl.password": "guess"})
    kafka("kafka another CA", **secured, **{"sasl.username": "admin", "sasl.password": args["admin_password"],
        "ssl.certificate.location": args["stranger_cert"], "ssl.key.location": args["stranger_key"]})

    def server(name, context):
        host, port = args["server"]
        try:
            conn = (http.client.HTTPConnection(host, port, timeout=5) if context is None
                    else http.client.HTTPSConnection(host, port, timeout=5, context=context))
            conn.request("GET", "/health")
            found[name] = f"allowed: {conn.getresponse().status}"
        except Exception as exc:
            found[name] = f"refused: {exc!r}"

    server("server plain http", None)
    server("server no certificate", ssl.create_default_context(cafile=args["ca"]))
    stranger = ssl.create_default_context(cafile=args["ca"])
    stranger.load_cert_chain(args["stranger_cert"], args["stranger_key"])
    server("server another CA", stranger)

    def database(name, **settings):
        import psycopg2
        host, port = args["postgres"]
        try:
            psycopg2.connect(host=host, port=port, user="venice", dbname="venice", connect_timeout=5,
                             **settings).close()
            found[name] = "allowed"
        except Exception as exc:
            found[name] = f"refused: {exc}"

    database("postgres plain", sslmode="disable", password=args["postgres_password"])
    database("postgres no certificate", sslmode="verify-full", sslrootcert=args["ca"],
             password=args["postgres_password"])
    database("postgres another CA", sslmode="verify-full", sslrootcert=args["ca"], password=args["postgres_password"],
             sslcert=args["stranger_cert"], sslkey=args["stranger_key"])

    def broker(name, context, password):
        import socket
        host, port = args["redis"]
        try:
            with socket.create_connection((host, port), timeout=5) as plain:
                sock = context.wrap_socket(plain, server_hostname=host) if context else plain
                sock.sendall(f"*2\\r\\n$4\\r\\nAUTH\\r\\n${len(password)}\\r\\n{password}\\r\\n".encode())
                answer = sock.recv(64)
            found[name] = f"allowed: {answer!r}" if answer.startswith(b"+OK") else f"refused: {answer!r}"
        except Exception as exc:
            found[name] = f"refused: {exc!r}"

    broker("redis plain", None, args["redis_password"])
    broker("redis no certificate", ssl.create_default_context(cafile=args["ca"]), args["redis_password"])
    broker("redis another CA", stranger, args["redis_password"])
    print(json.dumps(found))
    """
)


@pytest.fixture(scope="module")
def intruder(cluster: PlatformEnv) -> Iterator[Intruder]:
    """Runs a command as the intruder: in its own host on the bridge (the hosts profile), else on this machine."""
    config = cluster.config
    if CLUSTER_PROFILE == "hosts":
        network.create(config, [INTRUDER])  # removed with the others at the platform's `venice down`
        prefix = ["nsenter", f"--net=/run/netns/{config.hosts.namespace(INTRUDER)}"]
    else:
        prefix = []

    def run(command: list[str], given: str = "") -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in cluster.env.items() if k not in ("VENICE_KAFKA_CLIENT", ENV_CONF_DIR)}
        return subprocess.run(
            [*prefix, *command], input=given, capture_output=True, text=True, timeout=300, env=env, cwd=REPO
        )

    yield run


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("another-ca")
    other = Authority.make(folder / "ca.pem", folder / "ca.key", "another CA")
    issued = other.issue(folder, "admin", server=False)  # the admin's name, signed by another CA
    return issued.cert, issued.key


def test_an_intruder_is_refused_by_kafka_and_the_region_servers_and_each_refusal_is_logged(
    cluster: PlatformEnv, intruder: Intruder, stranger: tuple[Path, Path]
) -> None:
    config = cluster.config
    args: dict[str, Any] = {
        "bootstrap": config.kafka.bootstrap,
        "ca": str(ca_path(config)),
        "stranger_cert": str(stranger[0]),
        "stranger_key": str(stranger[1]),
        "server": list(config.server_addresses("dc-0")[0]),
        # Even with the admin's password (stolen, say), another CA's certificate is refused at the handshake; so are
        # PostgreSQL's and Redis's passwords without a certificate of the platform's CA.
        "admin_password": principals.password(config, principals.ADMIN),
        "postgres": [config.postgres.host, config.postgres.port],
        "postgres_password": secret(config, "postgres"),
        "redis": [config.redis.host, config.redis.port],
        "redis_password": secret(config, "redis"),
    }
    attempt = intruder([sys.executable, "-c", ATTEMPTS], json.dumps(args))
    assert attempt.returncode == 0, attempt.stderr
    found = json.loads(attempt.stdout.splitlines()[-1])
    assert set(found) == {
        "kafka plaintext",
        "kafka no credentials",
        "kafka wrong password",
        "kafka another CA",
        "server plain http",
        "server no certificate",
        "server another CA",
        "postgres plain",
        "postgres no certificate",
        "postgres another CA",
        "redis plain",
        "redis no certificate",
        "redis another CA",
    }
    allowed = {name: verdict for name, verdict in found.items() if not verdict.startswith("refused")}
    assert allowed == {}
    # Refused for the reason each tried, not merely unanswered (a timeout or an unreachable host would "refuse" too).
    assert "no pg_hba.conf entry" in found["postgres plain"] and "no encryption" in found["postgres plain"]
    assert "requires a valid client certificate" in found["postgres no certificate"]
    assert "SSL" in found["postgres another CA"] or "certificate" in found["postgres another CA"]
    for broker in ("redis no certificate", "redis another CA"):
        assert "SSL" in found[broker] or "ConnectionResetError" in found[broker], found[broker]  # at the handshake
    assert "timed out" not in found["redis plain"], found["redis plain"]
    whence = config.hosts.address(INTRUDER) if CLUSTER_PROFILE == "hosts" else ""
    brokers = "".join(
        (kafka.node_dir(config, n) / "logs" / "server.log").read_text() for n in range(config.kafka.brokers)
    )
    assert f"Failed authentication with /{whence}" in brokers
    servers = (config.run_dir / "server-dc-0.log").read_text()
    assert f"refused a connection from {whence}" in servers
    database = (config.run_dir / "postgres.log").read_text()
    assert (
        f'no pg_hba.conf entry for host "{whence or "127.0.0.1"}", user "venice", database "venice", no encryption'
        in (database)
    )
    broker = (config.run_dir / "redis.log").read_text()
    assert f"Accepted {whence or '127.0.0.1'}:" in broker and "Error accepting a client connection" in broker


# A reader on the intruder's host with a certificate the operator issued it, but not (yet) on the store's ACL.
READER = textwrap.dedent(
    """
    import http.client, json, ssl, sys
    from venice_core.client import ReadClient
    from venice_core.errors import VeniceError
    args = json.load(sys.stdin)
    context = ssl.create_default_context(cafile=args["ca"])
    context.load_cert_chain(args["cert"], args["private_key"])
    found = {}
    client = ReadClient(seeds=[tuple(seed) for seed in args["seeds"]], timeout=5, region="dc-0", tls=context)
    try:
        found["read"] = client.get(args["store"], args["record"])
    except VeniceError as exc:
        found["read"] = f"refused: {exc}"
    host, port = args["seeds"][0]
    conn = http.client.HTTPSConnection(host, port, timeout=5, context=context)
    conn.request("POST", "/sync")
    found["sync"] = conn.getresponse().status
    print(json.dumps(found))
    """
)


def test_a_reader_on_another_host_reads_a_store_only_once_granted_and_never_syncs(
    cluster: PlatformEnv, intruder: Intruder, tmp_path: Path
) -> None:
    config, store = cluster.config, "guarded"
    key_schema, value_schema = str(SCHEMAS / "user_key.avsc"), str(SCHEMAS / "user_value_v1.avsc")
    cluster.venice("store", "create", store, "--key-schema", key_schema, "--value-schema", value_schema, check=True)
    records = tmp_path / "guarded.jsonl"
    records.write_text(json.dumps({"id": "ann", **ANN}) + "\n")
    cluster.venice("push", store, "--input", str(records), "--key-field", "id", "--local", check=True)
    cluster.venice("security", "certificate", "outsider", check=True)  # the operator issues it a certificate
    cert, key = security_files.certificate(config, "outsider")
    args: dict[str, Any] = {
        "ca": str(ca_path(config)),
        "cert": str(cert),
        "private_key": str(key),
        "store": store,
        "record": "ann",
    }
    args["seeds"] = [list(address) for address in config.server_addresses("dc-0")]

    def attempt() -> dict[str, Any]:
        run = intruder([sys.executable, "-c", READER], json.dumps(args))
        assert run.returncode == 0, run.stderr
        return dict(json.loads(run.stdout.splitlines()[-1]))

    refused = attempt()
    assert "403" in refused["read"] and "outsider may not read store 'guarded'" in refused["read"], refused
    assert refused["sync"] == 403  # the platform's endpoints: its principals alone
    assert f"refused outsider: GET /schema/{store}" in (config.run_dir / "server-dc-0.log").read_text()
    cluster.venice("store", "acl", "grant", store, "--principal", "outsider", "--read", check=True)
    granted = poll_until(lambda: (found := attempt())["read"] == ANN and found, timeout=30, interval=1)
    assert granted["sync"] == 403  # a reader of a store, still not the platform


TINY_APP = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.appName("venice-intruder").getOrCreate()
    Path(sys.argv[1]).write_text(str(spark.sparkContext.parallelize(range(10)).sum()))
    spark.stop()
    """
)


def test_the_spark_master_never_runs_an_application_without_the_clusters_secret(
    cluster: PlatformEnv, intruder: Intruder, tmp_path: Path
) -> None:
    config = cluster.config
    app, ran = tmp_path / "tiny.py", tmp_path / "ran"
    app.write_text(TINY_APP)
    spark_submit = str(Path(sys.executable).with_name("spark-submit"))
    try:
        attempt = intruder(
            [
                "timeout", "90", spark_submit, "--master", config.spark.master,
                "--conf", "spark.driver.host=" + (config.hosts.address(INTRUDER) if CLUSTER_PROFILE == "hosts"
                                                  else "127.0.0.1"),
                str(app), str(ran),
            ]
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        attempt = None
    assert not ran.exists()  # nothing of it ran
    assert attempt is None or attempt.returncode != 0
    state = master_apps(cluster)
    listed = [app.get("name") for key in ("activeapps", "completedapps") for app in state.get(key, [])]
    assert "venice-intruder" not in listed  # the master never took it


def test_no_secret_on_a_command_line_or_in_a_log_after_a_full_push(cluster: PlatformEnv) -> None:
    """After the demo's push through Airflow (`test_cluster_profile.py`, first in the package) and the intruder's
    tries: no secret of the platform on any process's command line, nor in any file of the data dir (the platform's
    logs, Airflow's task logs, the Spark workers' application logs) but the private ones that keep it."""
    config = cluster.config
    found = every_secret(config)
    assert {"kafka-admin", "kafka-broker", "spark-authenticate", "redis", "postgres"} <= set(found)
    keeping = [folder(config), airflow_home(config) / "airflow.cfg", config.data_dir / "redis" / "redis.conf"]
    keeping += [kafka.node_dir(config, n) / "server.properties" for n in range(config.kafka.brokers)]
    # PostgreSQL's data dir: its tables' files (the password is kept there only as a SCRAM verifier).
    skipped = [config.data_dir / "postgres", *(kafka.node_dir(config, n) / "data" for n in range(config.kafka.brokers))]
    scanned = assert_secrets_kept(config, keeping, skipped, largest=50_000_000)
    assert scanned > 50  # the logs were there to look at
