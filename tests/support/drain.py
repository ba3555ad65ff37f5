"""What the drain tests share: a steady producer of keyed events that knows each event's offset (the oracle),
and the real-time topic's writes as ingestion takes them (DIV per partition: duplicates skipped)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer

from tests.support.platform import PlatformEnv
from tests.support.topics import read_partition
from venice_core.protocol import serde
from venice_core.protocol.div import Validator
from venice_core.protocol.envelope import MessageType, checksum_bytes, decode
from venice_core.pubsub import client_config


@dataclass
class Produced:
    """An event and where it landed."""

    event: dict[str, Any]
    partition: int
    offset: int


@dataclass
class SteadyProducer:
    """Produces `{"user": u<i % users>, "n": i, "ts": <wall ms>}` at `rate` events/s, round-robin over the
    partitions, on a thread, until stopped; every delivered event with its offset."""

    bootstrap: str
    topic: str
    partitions: int
    rate: float
    users: int = 5
    produced: list[Produced] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> SteadyProducer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer(client_config(self.bootstrap, **{"linger.ms": 5}))
        lock = threading.Lock()

        def delivered(event: dict[str, Any]) -> Callable[[Any, Any], None]:
            def callback(error: Any, msg: Any) -> None:
                assert error is None, error
                with lock:
                    self.produced.append(Produced(event, msg.partition(), msg.offset()))

            return callback

        started, i = time.monotonic(), 0
        while not self._stop.is_set():
            due = started + i / self.rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            event = {"user": f"u{i % self.users}", "n": i, "ts": int(time.time() * 1000)}
            producer.produce(self.topic, json.dumps(event).encode(), partition=i % self.partitions,
                             on_delivery=delivered(event))  # fmt: skip
            producer.poll(0)
            i += 1
        assert producer.flush(30) == 0

    def stop(self) -> list[Produced]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
        return self.produced

    def upto(self, offsets: dict[str, int]) -> list[Produced]:
        """The events below the given offsets (what a run that reached them has read)."""
        return [p for p in self.produced if p.offset < offsets.get(str(p.partition), 0)]


def rt_puts(env: PlatformEnv, region: str, store: str, partitions: int, key_schema: Any, value_schema: Any) -> list:
    """Every PUT of the store's real-time topic in `region` that ingestion would apply, decoded: (key, value)."""
    r = env.config.region(region)
    puts = []
    for partition in range(partitions):
        validator = Validator()
        for key, value in read_partition(r.kafka_bootstrap, r.real_time_topic(store), partition):
            message = decode(key, value)
            checksum = None if message.is_control else checksum_bytes(key, value)
            if validator.accept(message, checksum) and message.type is MessageType.PUT:
                key_value = serde.deserialize(key_schema, message.key), serde.deserialize(value_schema, message.value)
                puts.append(key_value)
    return puts
