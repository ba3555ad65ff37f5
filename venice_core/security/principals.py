"""Who talks to Kafka, and with which credentials.

Each principal is a SCRAM-SHA-512 user (its password one of the platform's secrets) that also presents a
certificate of the platform's CA (the brokers require one: another CA's is refused during the handshake):

| principal            | who                                    | its certificate  |
|----------------------|----------------------------------------|------------------|
| `broker`             | the brokers, to each other             | the node's own   |
| `admin`              | the controller: the CLI, Airflow tasks | `admin`          |
| `region-<region>`    | a region's server instances            | `region-server`  |
| `push.<store>`       | a store's push and repush jobs         | `push-job`       |
| `nearline.<store>`   | a store's nearline writers             | `nearline-writer`|
| `davinci-client`     | Da Vinci clients                       | `davinci-client` |

What each may do is `pubsub.acls`. A process finds its credentials in the librdkafka properties file named by
`$VENICE_KAFKA_CLIENT` (`client_file`, mode 0600): the variable holds a path, never the secret, so neither `ps` nor a
Spark conf shows one.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from venice_core.config import ENV_KAFKA_CLIENT, ClusterConfig
from venice_core.security.files import ca_path, certificate, folder, keep_private
from venice_core.security.secrets import forget as forget_secret
from venice_core.security.secrets import secret

MECHANISM = "SCRAM-SHA-512"
BROKERS_KEY = "venice.brokers"

BROKER = "broker"
ADMIN = "admin"
DAVINCI = "davinci-client"
SUPER_USERS = (BROKER, ADMIN)

# The certificate (`ca.issue_all`'s client roles) each kind of principal presents.
_CERTIFICATE = {"region-": "region-server", "push.": "push-job", "nearline.": "nearline-writer"}


def region(name: str) -> str:
    return f"region-{name}"


def push(store: str) -> str:
    return f"push.{store}"


def nearline(store: str) -> str:
    return f"nearline.{store}"


def static(config: ClusterConfig) -> list[str]:
    """The principals that exist from `venice up` on (a store's appear with the store)."""
    return [ADMIN, DAVINCI, *(region(r.name) for r in config.regions)]


def password(config: ClusterConfig, principal: str) -> str:
    return secret(config, f"kafka-{principal}")


def certificate_name(principal: str) -> str:
    for prefix, role in _CERTIFICATE.items():
        if principal.startswith(prefix):
            return role
    return principal


def client_settings(config: ClusterConfig, principal: str) -> dict[str, str]:
    """librdkafka's settings for `principal`: SCRAM over TLS, the platform's CA, the principal's certificate."""
    cert, key = certificate(config, certificate_name(principal))
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": MECHANISM,
        "sasl.username": principal,
        "sasl.password": password(config, principal),
        "ssl.ca.location": str(ca_path(config)),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
        # Not librdkafka's: the brokers these credentials are for (`pubsub.client_config` offers them to no other).
        BROKERS_KEY: ",".join(dict.fromkeys(b.strip() for r in config.regions for b in r.kafka_bootstrap.split(","))),
    }


def client_path(config: ClusterConfig, principal: str) -> Path:
    return folder(config) / "kafka" / f"{principal}.properties"


def client_file(config: ClusterConfig, principal: str) -> Path:
    """The principal's librdkafka properties file (written when missing or changed), for `$VENICE_KAFKA_CLIENT`."""
    text = "".join(f"{key}={value}\n" for key, value in client_settings(config, principal).items())
    return keep_private(client_path(config, principal), text)


def client_env(config: ClusterConfig, principal: str) -> dict[str, str]:
    """The environment entry that makes a process's Kafka clients `principal` (none without security)."""
    return {ENV_KAFKA_CLIENT: str(client_file(config, principal))} if config.security.enabled else {}


@contextlib.contextmanager
def acting_as(config: ClusterConfig, principal: str) -> Iterator[None]:
    """Within the block, this process's Kafka clients are `principal` on a secured platform, unless the process was
    started as one (`$VENICE_KAFKA_CLIENT` set): `venice up` as the admin, whoever calls it."""
    if not config.security.enabled or os.environ.get(ENV_KAFKA_CLIENT):
        yield
        return
    os.environ[ENV_KAFKA_CLIENT] = str(client_file(config, principal))
    try:
        yield
    finally:
        os.environ.pop(ENV_KAFKA_CLIENT, None)


def forget(config: ClusterConfig, principal: str) -> None:
    """The principal's password and credentials file, gone (its store was deleted)."""
    forget_secret(config, f"kafka-{principal}")
    client_path(config, principal).unlink(missing_ok=True)
