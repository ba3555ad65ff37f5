"""The lifecycle-event hook, VIP-4's "informational events in monitoring systems": every lifecycle function sends an
event to a Kafka topic and/or an HTTP webhook, then answers PROCEED.

Delivery never holds a rollout back. One call waits at most `lifecycle.events.timeout.seconds` (default 2) for both
deliveries together, nothing is retried, and a failed delivery is logged and given as the PROCEED's reason (it is
recorded on the invocation). A hanging webhook is abandoned on a daemon thread; an event Kafka has not confirmed in
time is purged, so it never leaves a producer busy.

Settings, store-level first, then the cluster-level `venice.store.lifecycle.hooks.configs.<key>`:
- `lifecycle.events.topic` with `lifecycle.events.kafka.bootstrap.servers`: the topic, keyed by store. Every other
  `lifecycle.events.kafka.<name>` is a Kafka producer config (security settings, for example).
- `lifecycle.events.webhook.url`: an http(s) URL the event is POSTed to as JSON.
- `lifecycle.events.timeout.seconds`.

The event: `{"cluster", "store", "version", "region", "function", "time"}`, `time` in epoch seconds. (The hooks of
an invocation run at once, so none knows what the others answer.)

Each call runs in a worker process of its own (`hooks.executor`), and librdkafka is not fork-safe: a producer is
used only in the process that made it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from confluent_kafka import KafkaException, Producer

from venice_core.hooks.api import (
    HOOK_FUNCTIONS,
    PROCEED,
    HookContext,
    LifecycleFunction,
    StoreAnswer,
    StoreLifecycleEventOutcome,
)
from venice_core.hooks.builtin import Configured
from venice_core.pubsub import KAFKA_LOGGER

log = logging.getLogger(__name__)

TOPIC = "lifecycle.events.topic"
WEBHOOK = "lifecycle.events.webhook.url"
TIMEOUT = "lifecycle.events.timeout.seconds"
KAFKA_PREFIX = "lifecycle.events.kafka."
DEFAULT_TIMEOUT = "2"


def event_of(function: str, ctx: HookContext) -> dict[str, Any]:
    return {
        "cluster": ctx.cluster,
        "store": ctx.store,
        "version": ctx.version,
        "region": ctx.region,
        "function": function,
        "time": time.time(),
    }


class LifecycleEvents(Configured):
    hook_config_keys = frozenset({TOPIC, WEBHOOK, TIMEOUT})
    hook_config_prefixes = (KAFKA_PREFIX,)  # the producer's own properties

    def __init__(self, configs: dict[str, str]) -> None:
        super().__init__(configs)
        self._producers: dict[tuple[int, tuple[tuple[str, str], ...]], Producer] = {}  # by process id, settings
        self._lock = threading.Lock()

    def _settings(self, ctx: HookContext) -> dict[str, str]:
        """Every `lifecycle.events.*` setting, store-level over cluster-level."""
        merged = {**self.configs, **ctx.store_hook_configs}
        return {k: v for k, v in merged.items() if k.startswith("lifecycle.events.")}

    def validate_hook_config(self, ctx: HookContext) -> StoreAnswer:
        settings = self._settings(ctx)
        url = settings.get(WEBHOOK)
        if url and urllib.parse.urlparse(url).scheme not in ("http", "https"):
            return StoreLifecycleEventOutcome.ABORT, f"{WEBHOOK} must be an http(s) URL, got {url!r}"
        if settings.get(TOPIC) and not settings.get(f"{KAFKA_PREFIX}bootstrap.servers"):
            return StoreLifecycleEventOutcome.ABORT, f"{TOPIC} needs {KAFKA_PREFIX}bootstrap.servers"
        try:
            if float(settings.get(TIMEOUT, DEFAULT_TIMEOUT)) <= 0:
                raise ValueError
        except ValueError:
            return StoreLifecycleEventOutcome.ABORT, f"{TIMEOUT} must be a positive number of seconds"
        answer: StoreAnswer = self.emit("validate_hook_config", ctx)
        return answer

    def emit(self, function: str, ctx: HookContext) -> Any:
        """Send the event (at most the timeout, whatever happens), then PROCEED, or nothing for an informational
        function; a failed delivery is the PROCEED's reason."""
        problems = self.send(event_of(function, ctx), self._settings(ctx))
        for problem in problems:
            log.warning("lifecycle event %s of '%s' not delivered: %s", function, ctx.store, problem)
        if HOOK_FUNCTIONS[LifecycleFunction(function)] is None:
            return None
        return (PROCEED, "; ".join(problems)) if problems else PROCEED

    def send(self, event: dict[str, Any], settings: dict[str, str]) -> list[str]:
        """Deliver to the webhook and the topic at once; returns what failed."""
        try:
            timeout = float(settings.get(TIMEOUT, DEFAULT_TIMEOUT))
        except ValueError:
            timeout = float(DEFAULT_TIMEOUT)
        deadline = time.monotonic() + timeout
        body = json.dumps(event).encode()
        problems: list[str] = []
        webhook = None
        if url := settings.get(WEBHOOK):
            webhook = threading.Thread(
                target=self._post, args=(url, body, timeout, problems), daemon=True, name="lifecycle-event-webhook"
            )
            webhook.start()
        if topic := settings.get(TOPIC):
            problem = self._produce(topic, event["store"], body, settings, timeout, deadline)
            if problem:
                problems.append(problem)
        if webhook is not None:
            webhook.join(max(0.0, deadline - time.monotonic()))
            if webhook.is_alive():
                problems.append(f"webhook {url} did not answer within {timeout:g}s")
        return list(problems)

    @staticmethod
    def _post(url: str, body: bytes, timeout: float, problems: list[str]) -> None:
        request = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                if not 200 <= response.status < 300:
                    problems.append(f"webhook {url} answered {response.status}")
        except urllib.error.HTTPError as exc:
            problems.append(f"webhook {url} answered {exc.code}")
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):  # the socket's own timeout, the same bound as the caller's wait
                problems.append(f"webhook {url} did not answer within {timeout:g}s")
            else:
                problems.append(f"webhook {url} is unreachable: {reason}")

    def _producer(self, settings: dict[str, str], timeout: float) -> Producer:
        kafka = {k[len(KAFKA_PREFIX) :]: v for k, v in settings.items() if k.startswith(KAFKA_PREFIX)}
        key = (os.getpid(), tuple(sorted(kafka.items())))  # never one a forked worker inherited
        with self._lock:
            if key not in self._producers:
                # Bounded: an event not delivered within the timeout fails, without retries past it.
                bounded = {"delivery.timeout.ms": int(timeout * 1000), "linger.ms": 0, "logger": KAFKA_LOGGER}
                self._producers[key] = Producer({**bounded, **kafka})
            return self._producers[key]

    def _produce(
        self, topic: str, store: str, body: bytes, settings: dict[str, str], timeout: float, deadline: float
    ) -> str | None:
        delivered: list[str | None] = []

        def on_delivery(error: Any, _message: Any) -> None:
            delivered.append(None if error is None else str(error))

        try:
            producer = self._producer(settings, timeout)
            producer.produce(topic, body, key=store.encode(), on_delivery=on_delivery)
            producer.flush(max(0.0, deadline - time.monotonic()))
        except (KafkaException, BufferError, ValueError, TypeError) as exc:
            return f"topic {topic}: {exc}"
        if not delivered:
            producer.purge()  # not confirmed in time: drop it rather than deliver it late or hold the process
            producer.poll(0)
            return f"topic {topic}: not confirmed within the timeout"
        return None if delivered[0] is None else f"topic {topic}: {delivered[0]}"


def _emitter(function: str) -> Any:
    def hook(self: LifecycleEvents, ctx: HookContext) -> Any:
        return self.emit(function, ctx)

    hook.__name__ = hook.__qualname__ = function
    hook.__doc__ = f"Send the {function} event; answer PROCEED."
    return hook


# Every lifecycle function but validate_hook_config (defined above, it validates first) sends its event.
for _function in HOOK_FUNCTIONS:
    if _function != "validate_hook_config":
        setattr(LifecycleEvents, _function, _emitter(_function))
