"""The lifecycle-event hook against real local endpoints: a webhook served by `http.server` on loopback, a port
that refuses connections, a listener that never answers, a Kafka bootstrap nobody listens on. Whatever happens to
delivery, the hook answers PROCEED within its timeout. (Delivery to a real topic: tests/integration/
test_rollout_hooks.py.)"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from tests.support.sandbox import free_ports
from tests.support.webhook import Webhook
from venice_core.config import HookSettings
from venice_core.hooks import HookContext
from venice_core.hooks.api import HOOK_FUNCTIONS
from venice_core.hooks.events import LifecycleEvents
from venice_core.hooks.executor import HookExecutor
from venice_core.hooks.loader import load_hooks

EVENTS = "venice_core.hooks.events.LifecycleEvents"


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def hanging_url() -> Iterator[str]:
    """A listener that accepts connections (the kernel does) and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/events"
    listener.close()


def ctx(configs: dict[str, str], region: str | None = "dc-1") -> HookContext:
    return HookContext(cluster="c", store="users", store_hook_configs=configs, version=4, region=region)


def test_every_function_posts_its_event_and_proceeds(webhook: Webhook) -> None:
    hook = LifecycleEvents({"lifecycle.events.webhook.url": webhook.url})
    before = time.time()
    for function, kind in HOOK_FUNCTIONS.items():
        assert getattr(hook, function)(ctx({})) == (None if kind is None else "PROCEED"), function
    assert [e["function"] for e in webhook.events] == list(HOOK_FUNCTIONS)
    event = webhook.events[-1]
    assert event.pop("time") >= before
    assert event == {
        "cluster": "c",
        "store": "users",
        "version": 4,
        "region": "dc-1",
        "function": "post_end_of_push_job",
    }


def test_store_level_settings_enable_it(webhook: Webhook) -> None:
    hook = LifecycleEvents({})  # nothing configured cluster-wide: sends nothing
    assert hook.pre_store_version_swap(ctx({})) == "PROCEED"
    assert hook.pre_store_version_swap(ctx({"lifecycle.events.webhook.url": webhook.url})) == "PROCEED"
    assert len(webhook.events) == 1


def test_each_worker_sends_its_own_event(webhook: Webhook) -> None:
    """Through the executor, each call in a worker process of its own: one round asking three regions sends one
    event per region, beside the other hook's answers."""
    settings = HookSettings(
        ("tests.hooks_fixtures.sample_hooks.AnswerFromConfig", EVENTS),
        4,
        5,
        60,
        "PROCEED",
        {"lifecycle.events.webhook.url": webhook.url},
    )
    run = HookExecutor(settings, load_hooks(settings))
    regions = ["dc-0", "dc-1", "dc-2"]
    configs = {"answer.pre_store_version_swap.dc-1": "WAIT"}
    decisions = run.invoke_all("pre_store_version_swap", [ctx(configs, region) for region in regions])
    assert [d.outcome for d in decisions] == ["PROCEED", "WAIT", "PROCEED"]
    assert all(i.error is None and i.reason == "" for d in decisions for i in d.invocations)
    assert sorted(e["region"] for e in webhook.events) == regions
    assert {e["function"] for e in webhook.events} == {"pre_store_version_swap"}


def test_a_refusing_or_failing_webhook_does_not_block() -> None:
    (closed,) = free_ports(1)
    hook = LifecycleEvents({"lifecycle.events.webhook.url": f"http://127.0.0.1:{closed}/events"})
    started = time.monotonic()
    outcome, reason = hook.pre_store_version_swap(ctx({}))
    assert outcome == "PROCEED" and reason.startswith(f"webhook http://127.0.0.1:{closed}/events is unreachable")
    assert hook.post_store_version_creation(ctx({})) is None
    assert time.monotonic() - started < 2
    failing = Webhook(status=500)
    try:
        outcome, reason = LifecycleEvents({"lifecycle.events.webhook.url": failing.url}).pre_end_of_push_job(ctx({}))
    finally:
        failing.close()
    assert (outcome, reason) == ("PROCEED", f"webhook {failing.url} answered 500")


def test_a_hanging_webhook_costs_at_most_the_timeout(hanging_url: str) -> None:
    hook = LifecycleEvents({"lifecycle.events.webhook.url": hanging_url, "lifecycle.events.timeout.seconds": "0.5"})
    started = time.monotonic()
    outcome, reason = hook.pre_store_version_swap(ctx({}))
    elapsed = time.monotonic() - started
    assert (outcome, reason) == ("PROCEED", f"webhook {hanging_url} did not answer within 0.5s")
    assert 0.4 < elapsed < 1.5


def test_an_unreachable_broker_costs_at_most_the_timeout(webhook: Webhook) -> None:
    (closed,) = free_ports(1)
    hook = LifecycleEvents(
        {
            "lifecycle.events.topic": "lifecycle-events",
            "lifecycle.events.kafka.bootstrap.servers": f"127.0.0.1:{closed}",
            "lifecycle.events.webhook.url": webhook.url,
            # 1 s, not 0.5: the webhook must answer within it, and a burst of the fast tier's other tests once held
            # this process's webhook thread past 0.5 s (both sinks then timed out, not only the broker).
            "lifecycle.events.timeout.seconds": "1",
        }
    )
    started = time.monotonic()
    outcome, reason = hook.post_store_version_swap(ctx({}))
    assert time.monotonic() - started < 2.0  # the timeout, and no more than a second over it
    assert outcome == "PROCEED" and reason.startswith("topic lifecycle-events:")
    assert len(webhook.events) == 1  # the webhook still got it


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"lifecycle.events.webhook.url": "file:///etc/passwd"}, "must be an http(s) URL"),
        ({"lifecycle.events.topic": "t"}, "needs lifecycle.events.kafka.bootstrap.servers"),
        ({"lifecycle.events.timeout.seconds": "soon"}, "must be a positive number"),
        ({"lifecycle.events.timeout.seconds": "0"}, "must be a positive number"),
    ],
)
def test_store_level_settings_are_validated(configs: dict[str, str], message: str) -> None:
    outcome, reason = LifecycleEvents({}).validate_hook_config(ctx(configs, region=None))
    assert outcome == "ABORT" and message in reason
