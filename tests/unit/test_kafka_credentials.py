"""The Kafka principals' credentials (no broker): generated secrets, each principal's credentials file and how a
process finds it, and the secured broker's settings and storage format (security.secrets, security.principals,
pubsub.client_config, embedded.kafka)."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.platform import make_platform_env
from venice_core.config import ENV_KAFKA_CLIENT, ClusterConfig, process_env
from venice_core.embedded import kafka
from venice_core.errors import ConfigError
from venice_core.pubsub import client_config, identity_settings
from venice_core.security import ca, principals
from venice_core.security.secrets import every_secret, secret


@pytest.fixture
def secured(tmp_path: Path) -> ClusterConfig:
    return make_platform_env(tmp_path / "home", {"security.enabled": "true"}).config


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_KAFKA_CLIENT, raising=False)


def _private(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_secret_is_made_once_private_and_the_same_for_everyone_asking_at_once(secured: ClusterConfig) -> None:
    with ThreadPoolExecutor(8) as pool:
        values = set(pool.map(lambda _: secret(secured, "kafka-admin"), range(32)))
    assert len(values) == 1
    (value,) = values
    assert len(value) >= 32 and value == secret(secured, "kafka-admin")
    assert every_secret(secured) == {"kafka-admin": value}
    path = secured.data_dir / "security" / "secrets" / "kafka-admin"
    assert _private(path) and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no partial file left
    assert secret(secured, "kafka-broker") != value
    with pytest.raises(ConfigError, match="invalid secret name"):
        secret(secured, "../escape")


def test_a_principals_credentials_file_is_private_and_names_its_certificate(secured: ClusterConfig) -> None:
    path = principals.client_file(secured, principals.push("users"))
    assert _private(path)
    settings = identity_settings(path)
    assert settings["sasl.username"] == "push.users"
    assert settings["sasl.password"] == principals.password(secured, "push.users")
    assert settings["security.protocol"] == "SASL_SSL" and settings["sasl.mechanisms"] == "SCRAM-SHA-512"
    assert settings["ssl.certificate.location"].endswith("certs/push-job.pem")
    assert settings["ssl.ca.location"] == str(secured.data_dir / "security" / "ca.pem")
    assert principals.client_env(secured, principals.ADMIN) == {
        ENV_KAFKA_CLIENT: str(principals.client_path(secured, principals.ADMIN))
    }
    unsecured = make_platform_env(secured.data_dir.parent / "plain").config
    assert principals.client_env(unsecured, principals.ADMIN) == {}


def test_a_process_acts_as_the_principal_it_was_started_as_and_passes_it_to_no_other(
    secured: ClusterConfig, clean_env: None
) -> None:
    platform = secured.kafka.bootstrap
    assert "sasl.username" not in client_config(platform)  # no principal: a platform without security
    with principals.acting_as(secured, principals.ADMIN):
        assert client_config(platform)["sasl.username"] == "admin"
        assert "sasl.username" not in client_config("elsewhere:9092")  # another cluster is offered no credentials
        assert "venice.brokers" not in client_config(platform)  # the platform's own key stays out of librdkafka's
        assert ENV_KAFKA_CLIENT not in process_env(secured)  # each process's starter names its own
        davinci = identity_settings(principals.client_file(secured, principals.DAVINCI))
        assert client_config(platform, **davinci)["sasl.username"] == "davinci-client"  # a caller acting as another
        with principals.acting_as(secured, principals.DAVINCI):  # started as the admin: stays the admin
            assert client_config(platform)["sasl.username"] == "admin"
    assert ENV_KAFKA_CLIENT not in os.environ


def test_a_missing_credentials_file_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_KAFKA_CLIENT, str(tmp_path / "nowhere.properties"))
    with pytest.raises(ConfigError, match=r"cannot read the Kafka credentials in .*nowhere.properties"):
        client_config("host:1")
    (tmp_path / "empty.properties").write_text("# nothing\n")
    monkeypatch.setenv(ENV_KAFKA_CLIENT, str(tmp_path / "empty.properties"))
    with pytest.raises(ConfigError, match="names no sasl.username"):
        client_config("host:1")


def _properties(config: ClusterConfig, node: int = 0) -> dict[str, str]:
    lines = kafka.server_properties(config, node).splitlines()
    return dict(line.split("=", 1) for line in lines)


def test_a_secured_broker_takes_scram_over_tls_with_a_certificate_and_allows_only_what_is_granted(
    secured: ClusterConfig,
) -> None:
    settings = _properties(secured)
    assert settings["listeners"].startswith("SASL_SSL://") and ",CONTROLLER://" in settings["listeners"]
    assert settings["listener.security.protocol.map"] == "CONTROLLER:SSL,SASL_SSL:SASL_SSL"
    assert settings["inter.broker.listener.name"] == "SASL_SSL"
    assert settings["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert settings["listener.name.sasl_ssl.ssl.client.auth"] == "required"  # KIP-684: by the listener's name
    assert settings["listener.name.controller.ssl.client.auth"] == "required"
    assert settings["authorizer.class.name"].endswith("StandardAuthorizer")
    assert settings["allow.everyone.if.no.acl.found"] == "false"
    assert settings["super.users"] == "User:broker;User:admin;User:kafka"  # the controllers by certificate name
    assert principals.password(secured, "broker") in settings["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    plain = _properties(make_platform_env(secured.data_dir.parent / "plain").config)
    assert plain["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert not any(key.startswith(("ssl.", "sasl.", "authorizer")) for key in plain)


def test_the_brokers_users_are_formatted_from_a_private_argument_file(secured: ClusterConfig, tmp_path: Path) -> None:
    users = {"broker": "b-secret", "admin": "a-secret"}
    command = kafka._format_command(["java", "-cp", "x"], tmp_path / "server.properties", "id", True, users)
    assert "--add-scram=SCRAM-SHA-512=[name=admin,password=a-secret]" in command
    argv, argfile = kafka._private_argv(command, tmp_path)
    assert argv == ["java", f"@{argfile}"] and not any("secret" in arg for arg in argv)
    assert _private(argfile) and '"--add-scram=SCRAM-SHA-512=[name=broker,password=b-secret]"' in argfile.read_text()


def test_storage_formatted_without_security_is_refused_by_a_secured_broker(secured: ClusterConfig) -> None:
    data = kafka.node_dir(secured) / "data"
    data.mkdir(parents=True)
    (data / "meta.properties").write_text("cluster.id=x\n")
    with pytest.raises(ConfigError, match="formatted without security.enabled: it holds no SCRAM users"):
        kafka._prepare(secured, 0, Path("/nonexistent-libs"))
    assert _private(kafka.node_dir(secured) / "server.properties")  # it holds the broker's password


class _Stop(Exception):
    """Ends a start before any JVM runs."""


def test_a_secured_brokers_first_start_formats_it_from_a_private_argument_file(
    secured: ClusterConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca.issue_all(secured, ["kafka"])  # the node's certificate, for its key store
    formats: list[tuple[dict[str, list[str]], bool]] = []

    def format_all(commands: dict[str, list[str]], private: bool = False) -> None:
        formats.append((commands, private))
        raise _Stop

    monkeypatch.setattr(kafka, "_format_all", format_all)
    monkeypatch.setattr(kafka, "ensure_jars", lambda: Path("/nonexistent-libs"))
    monkeypatch.setattr(kafka, "_check_ports_free", lambda *_args: None)
    with pytest.raises(_Stop):
        kafka._start_nodes(secured, [0], lambda: True)
    ((commands, private),) = formats
    assert private  # the passwords below go through a 0600 argument file, never onto the process table
    (command,) = commands.values()
    broker = principals.password(secured, principals.BROKER)
    assert f"--add-scram=SCRAM-SHA-512=[name=broker,password={broker}]" in command
    assert _private(kafka.keystore(secured, 0))
