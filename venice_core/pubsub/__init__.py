"""Kafka: admin operations, the protocol writer, consumers. Topic names come from `RegionConfig.version_topic`."""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import Any

from venice_core.config import ENV_KAFKA_CLIENT
from venice_core.errors import ConfigError
from venice_core.security.principals import BROKERS_KEY

# librdkafka's own log lines go through Python logging: to a region server's log file, and not onto a CLI
# user's terminal (the package logger has a NullHandler), where errors are reported as one line.
KAFKA_LOGGER = logging.getLogger("venice_core.kafka")

# Idempotent, acknowledged by all replicas, batched: the writers, and a leader producing what it takes on to its
# region's version topic.
PRODUCER_CONFIG: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 20,
    "batch.num.messages": 10000,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 200_000,
    "queue.buffering.max.kbytes": 512 * 1024,
}
# Once a partition's local queue passes `queued.min.messages`, librdkafka waits `fetch.queue.backoff.ms` (1 s by
# default) before it fetches that partition again, however fast the queue drains: a consumer reading a topic's
# backlog stalled a second for every few hundred thousand records (one 250k-record partition: 2.4 s -> 0.5 s).
FAST_REFETCH: dict[str, Any] = {"fetch.queue.backoff.ms": 20}
# Assigned partitions, offsets kept in the platform's own checkpoints (never committed to Kafka, so none is stored
# either: storing each consumed message's offset took a lock per message, about a tenth of a consumer's CPU). A
# fetch waits for 256 KB or 100 ms: a consumer that keeps up with its producer would otherwise fetch every few
# records, and the broker's request handling was the largest CPU cost of a push after Spark.
CONSUMER_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "fetch.min.bytes": 256 * 1024,
    "fetch.wait.max.ms": 100,
    "queued.min.messages": 50_000,
    **FAST_REFETCH,
}


def client_config(bootstrap: str, **settings: Any) -> dict[str, Any]:
    """The config of every Kafka client the platform creates: as the principal whose credentials file
    `$VENICE_KAFKA_CLIENT` names (none: a platform without security) when `bootstrap` is one of the platform's
    clusters (another cluster, a stream's source say, is not offered the platform's credentials); a caller acting as
    another principal passes that one's `identity_settings` among `settings`."""
    path = os.environ.get(ENV_KAFKA_CLIENT)
    credentials = {}
    if path:
        own, brokers = _identity(Path(path))
        if not brokers or not brokers.isdisjoint(server.strip() for server in bootstrap.split(",")):
            credentials = own
    return {"bootstrap.servers": bootstrap, "logger": KAFKA_LOGGER, **credentials, **settings}


def identity_settings(path: Path) -> dict[str, str]:
    """A principal's librdkafka settings (`security.principals.client_file`), read once per process."""
    return _identity(path)[0]


@functools.cache
def _identity(path: Path) -> tuple[dict[str, str], frozenset[str]]:
    """The settings of a credentials file, and the brokers they are for (`venice.brokers`: the platform's)."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the Kafka credentials in {path} (${ENV_KAFKA_CLIENT}): {exc.strerror}"
        ) from None
    settings = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    if "sasl.username" not in settings:
        raise ConfigError(f"{path} (${ENV_KAFKA_CLIENT}) names no sasl.username: not a Kafka credentials file")
    brokers = frozenset(b.strip() for b in settings.pop(BROKERS_KEY, "").split(",") if b.strip())
    return settings, brokers
