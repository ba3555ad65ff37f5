"""A secured platform (`security.enabled=true`, issue 45's points 2 and 3), on a broker of its own with two regions.

Kafka: SCRAM-SHA-512 over TLS, a certificate of the platform's CA required of every client, KRaft's
StandardAuthorizer, and a principal per role with only its ACLs. Region servers: HTTPS with a client certificate of
the platform's CA, reads authorised per store. A push (spark-submit, as the store's push principal), nearline writes
(as the store's nearline principal), reads in both regions and a Da Vinci client work; an intruder is refused at each
door, each refusal logged by the server it knocked at, and nothing it tried reaches a region."""

from __future__ import annotations

import http.client
import json
import os
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AclOperation, AdminClient

from tests.support.leftovers import leaves_nothing, platform_parts
from tests.support.platform import SCHEMAS, PlatformEnv, make_platform_env
from tests.support.secrets_scan import assert_secrets_kept
from venice_core.client import ReadClient
from venice_core.config import ENV_KAFKA_CLIENT, ClusterConfig
from venice_core.embedded import kafka, platform
from venice_core.errors import ComponentError, VeniceError
from venice_core.pubsub import acls, admin, client_config, identity_settings
from venice_core.security import files as security_files
from venice_core.security import principals
from venice_core.security.ca import Authority
from venice_core.security.files import ca_path, folder
from venice_core.security.secrets import every_secret
from venice_core.utils.waiting import poll_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ANN = {"name": "ann", "age": 30, "score": 1.0}
ANN_NEARLINE = {"name": "ann-nearline", "age": 31, "score": 2.0}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformEnv]:
    """The secured platform, with store `users` (hybrid) pushed once by `venice push --local` (spark-submit) and
    written nearline once, and store `other` (hybrid, never pushed); this process acts as the admin."""
    home = tmp_path_factory.mktemp("secured")
    env = make_platform_env(home, {"security.enabled": "true", "regions": "dc-0,dc-1"})
    config = env.config
    try:
        platform.up(config, report=lambda _line: None)
        key, value = str(SCHEMAS / "user_key.avsc"), str(SCHEMAS / "user_value_v1.avsc")
        for store in ("users", "other"):
            env.venice("store", "create", store, "--key-schema", key, "--value-schema", value, check=True)
            env.venice("store", "update", store, "--hybrid-rewind-seconds", "3600", check=True)
        records = home / "users.jsonl"
        records.write_text(json.dumps({"id": "ann", **ANN}) + "\n" + json.dumps({"id": "bob", **ANN, "age": 40}))
        env.venice("push", "users", "--input", str(records), "--key-field", "id", check=True)
        env.venice("write", "users", "ann", json.dumps(ANN_NEARLINE), check=True)
        with principals.acting_as(config, principals.ADMIN):
            yield env
    finally:
        with leaves_nothing(*platform_parts(config)):
            platform.down(config, report=lambda _line: None)


def _read(env: PlatformEnv, key: str, region: str) -> Any:
    answer = env.venice("get", "users", key, "--region", region, check=True)
    return json.loads(answer.stdout)


def _broker_log(config: ClusterConfig) -> str:
    return (kafka.node_dir(config) / "logs" / "server.log").read_text()


def _as(config: ClusterConfig, principal: str, **settings: Any) -> dict[str, Any]:
    """A client config of `principal`, with its own credentials file."""
    own = identity_settings(principals.client_file(config, principal))
    return client_config(config.kafka.bootstrap, **own, **settings)


def _produce(settings: dict[str, Any], topic: str) -> KafkaError | None:
    """One record to `topic` (partition 0): the delivery's error, None if written."""
    errors: list[KafkaError | None] = []
    producer = Producer({**settings, "message.timeout.ms": 8000, "enable.idempotence": False, "acks": "all"})
    producer.produce(topic, b"intruder", b"intruder", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    return errors[0] if errors else KafkaError(KafkaError._MSG_TIMED_OUT)


def _refused(settings: dict[str, Any]) -> bool:
    try:
        AdminClient({**settings, "socket.timeout.ms": 4000}).list_topics(timeout=6)
    except KafkaException:
        return True
    return False


def test_a_push_nearline_writes_and_reads_work_each_as_its_principal(secured: PlatformEnv) -> None:
    config = secured.config
    for region in ("dc-0", "dc-1"):
        assert _read(secured, "ann", region) == ANN_NEARLINE  # the push, then the nearline write, in both regions
        assert _read(secured, "bob", region)["age"] == 40
    granted = {(b.name, b.operation) for b in acls.bindings_of(config.kafka.bootstrap, principals.push("users"))}
    for region in config.regions:
        assert (region.version_topic("users", 1), AclOperation.WRITE) in granted
    assert not any(name.endswith("_rt") for name, _ in granted)  # the push job writes version topics only


def test_a_client_without_the_platforms_credentials_is_refused(secured: PlatformEnv, tmp_path: Path) -> None:
    config = secured.config
    bootstrap = config.kafka.bootstrap
    admin_settings = _as(config, principals.ADMIN)
    before = _broker_log(config).count("Failed authentication")
    assert _refused({"bootstrap.servers": bootstrap})  # PLAINTEXT
    sasl = ("sasl.mechanisms", "sasl.username", "sasl.password")
    no_credentials = {**{k: v for k, v in admin_settings.items() if k not in sasl}, "security.protocol": "SSL"}
    assert _refused(no_credentials)  # the admin's certificate, but no SCRAM: the broker asks for it
    assert _refused({**admin_settings, "sasl.password": "not-the-password"})
    other = Authority.make(tmp_path / "other-ca.pem", tmp_path / "other-ca.key", "another CA")
    stranger = other.issue(tmp_path, "admin", server=False)  # a certificate of the admin's name, from another CA
    assert _refused(
        {**admin_settings, "ssl.certificate.location": str(stranger.cert), "ssl.key.location": str(stranger.key)}
    )
    no_certificate = {
        k: v for k, v in admin_settings.items() if k not in ("ssl.certificate.location", "ssl.key.location")
    }
    assert _refused(no_certificate)
    assert not _refused(admin_settings)  # the admin's own, for contrast
    assert _broker_log(config).count("Failed authentication") >= before + 5  # each refusal logged by the broker
    os.environ[ENV_KAFKA_CLIENT] = str(_wrong_password_file(config, tmp_path))
    try:  # the platform's own clients say it in one line
        with pytest.raises(ComponentError, match=f"Kafka at {bootstrap} refused admin: .*invalid credentials"):
            admin.check_reachable(bootstrap, timeout=5)
    finally:
        os.environ[ENV_KAFKA_CLIENT] = str(principals.client_path(config, principals.ADMIN))


def _wrong_password_file(config: ClusterConfig, tmp_path: Path) -> Path:
    settings = {**principals.client_settings(config, principals.ADMIN), "sasl.password": "wrong"}
    path = tmp_path / "wrong.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def test_each_principal_writes_only_what_it_must(secured: PlatformEnv) -> None:
    config = secured.config
    region = config.region("dc-0")
    ends = _ends(config)
    nearline = _as(config, principals.nearline("users"))
    denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _code(_produce(nearline, region.real_time_topic("other"))) == denied  # another store's real-time topic
    assert _code(_produce(nearline, region.version_topic("users", 1))) == denied  # any version topic
    davinci = _as(config, principals.DAVINCI)
    assert _code(_produce(davinci, region.version_topic("users", 1))) == denied  # a Da Vinci client produces nothing
    assert _code(_produce(davinci, region.real_time_topic("users"))) == denied
    push = _as(config, principals.push("users"))
    assert _code(_produce(push, region.real_time_topic("other"))) == denied  # a push job, another store's topics
    denials = [line for line in _broker_log(config).splitlines() if " is Denied operation" in line]
    for who, topic in (
        (principals.nearline("users"), region.real_time_topic("other")),
        (principals.nearline("users"), region.version_topic("users", 1)),
        (principals.DAVINCI, region.version_topic("users", 1)),
    ):  # one line naming the principal and what it asked for
        assert any(f"Principal = User:{who} is" in line and f"Topic:LITERAL:{topic} " in line for line in denials)
    assert _ends(config) == ends  # nothing the intruders tried reached a topic
    for name in ("dc-0", "dc-1"):
        assert _read(secured, "ann", name) == ANN_NEARLINE  # nor a region


def _code(error: KafkaError | None) -> int | None:
    return None if error is None else error.code()


def _ends(config: ClusterConfig) -> dict[str, list[int]]:
    """Each topic's end offsets: the version and real-time topics of `users`, and `other`'s real-time topics."""
    topics = []
    for region in config.regions:
        topics += [region.version_topic("users", 1), region.real_time_topic("users"), region.real_time_topic("other")]
    return {topic: admin.end_offsets(config.kafka.bootstrap, topic, 4) for topic in topics}


def test_no_secret_on_a_command_line_or_in_a_log(secured: PlatformEnv) -> None:
    config = secured.config
    found = every_secret(config)
    assert {f"kafka-{p}" for p in (*principals.SUPER_USERS, principals.push("users"))} <= set(found)
    kept = [folder(config), kafka.node_dir(config) / "server.properties"]  # the secrets' own files, all 0600
    assert_secrets_kept(config, kept, skipped_suffixes=(".db", ".duckdb"))


def _reader(config: ClusterConfig, certificate: tuple[Path, Path] | None = None) -> ReadClient:
    """A client of dc-0 presenting `certificate` (default: the platform's `reader` one)."""
    cert, key = certificate or security_files.certificate(config, "reader")
    context = ssl.create_default_context(cafile=str(ca_path(config)))
    context.load_cert_chain(str(cert), str(key))
    return ReadClient(seeds=config.server_addresses("dc-0"), timeout=5, region="dc-0", tls=context)


def _https(config: ClusterConfig, method: str, path: str, certificate: str | None) -> int:
    """The status of one request to dc-0's first instance, as `certificate`'s principal (None: without one)."""
    host, port = config.server_addresses("dc-0")[0]
    context = ssl.create_default_context(cafile=str(ca_path(config)))
    if certificate is not None:
        context.load_cert_chain(*(str(p) for p in security_files.certificate(config, certificate)))
    conn = http.client.HTTPSConnection(host, port, timeout=5, context=context)
    try:
        conn.request(method, path)
        return conn.getresponse().status
    finally:
        conn.close()


def _server_log(config: ClusterConfig) -> str:
    return (config.run_dir / "server-dc-0.log").read_text()


def test_a_region_server_reads_for_the_stores_readers_alone(secured: PlatformEnv, tmp_path: Path) -> None:
    config = secured.config
    host, port = config.server_addresses("dc-0")[0]
    with pytest.raises(ConnectionError):  # plain HTTP: the server speaks TLS alone
        plain = http.client.HTTPConnection(host, port, timeout=5)
        plain.request("GET", "/health")
        plain.getresponse()
    with pytest.raises((ssl.SSLError, ConnectionError)):  # no certificate
        _https(config, "GET", "/health", None)
    other = Authority.make(tmp_path / "other-ca.pem", tmp_path / "other-ca.key", "another CA")
    stranger = other.issue(tmp_path, "admin", server=False)  # the admin's name, from another CA
    with pytest.raises(ComponentError, match="is unreachable"):
        _reader(config, (stranger.cert, stranger.key)).get("users", "ann")
    refusals = [line for line in _server_log(config).splitlines() if "at the TLS handshake" in line]
    for why in ("HTTP_REQUEST", "PEER_DID_NOT_RETURN_A_CERTIFICATE", "CERTIFICATE_VERIFY_FAILED"):
        assert any(why in line and "refused a connection from 127.0.0.1:" in line for line in refusals), why
    reader = _reader(config)
    with pytest.raises(VeniceError, match="403.*reader may not read store 'users'"):
        reader.get("users", "ann")
    assert "refused reader: GET /schema/users" in _server_log(config)  # the principal and what it asked for
    secured.venice("store", "acl", "grant", "users", "--principal", "reader", "--read", check=True)
    assert _eventually(lambda: _read_as(reader, "ann")) == ANN_NEARLINE  # each instance syncs the grant
    listed = secured.venice("store", "acl", "list", "users", "--json", check=True)
    assert json.loads(listed.stdout) == {"store": "users", "read": ["reader"]}
    assert _https(config, "POST", "/sync", "reader") == 403  # the platform's endpoints: its principals alone
    assert _https(config, "GET", "/metrics", "reader") == 403
    assert _https(config, "POST", "/sync", "admin") == 202
    secured.venice("store", "acl", "revoke", "users", "--principal", "reader", "--read", check=True)
    assert _eventually(lambda: _read_as(reader, "ann") is None)  # refused again
    reader.close()


def _read_as(reader: ReadClient, key: str) -> Any:
    """The value, None if the server refused the reader."""
    try:
        return reader.get("users", key)
    except VeniceError as exc:
        if "403" not in str(exc):
            raise
        return None


def _eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    return poll_until(check, timeout=timeout, interval=0.2)


def test_a_da_vinci_client_reads_as_its_principal(secured: PlatformEnv, tmp_path: Path) -> None:
    """`venice davinci run` as `davinci-client`: the store's version topics from Kafka, its schemas over HTTPS."""
    process = secured.venice_background(
        "davinci", "run", "users", "--region", "dc-1", "--duckdb", str(tmp_path / "users.duckdb"),
        "--progress-seconds", "1",
    )  # fmt: skip
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            if "serving v1" in line:
                break
        assert any("serving v1" in line for line in lines), "".join(lines)
    finally:
        process.terminate()
        process.communicate(timeout=30)
    denied = [line for line in _broker_log(secured.config).splitlines() if "User:davinci-client is Denied" in line]
    assert denied == [] or all("WRITE" in line or "IDEMPOTENT" in line for line in denied)


def test_a_deleted_stores_principals_acls_and_secrets_go_with_it(secured: PlatformEnv) -> None:
    config = secured.config
    key, value = str(SCHEMAS / "user_key.avsc"), str(SCHEMAS / "user_value_v1.avsc")
    secured.venice("store", "create", "gone", "--key-schema", key, "--value-schema", value, check=True)
    secured.venice("store", "update", "gone", "--hybrid-rewind-seconds", "60", check=True)
    writer = principals.nearline("gone")
    assert acls.bindings_of(config.kafka.bootstrap, writer)  # its real-time topics' writer
    assert f"kafka-{writer}" in every_secret(config)
    principals.client_file(config, writer)  # as its first writer makes it
    secured.venice("store", "delete", "gone", check=True)
    assert acls.bindings_of(config.kafka.bootstrap, writer) == []
    assert not principals.client_path(config, writer).exists() and f"kafka-{writer}" not in every_secret(config)
