"""`pubsub.admin.check_reachable` without a broker: a bootstrap server that turns connections down is reported at
once, naming why; one that accepts them is left to the Kafka client."""

from __future__ import annotations

import socket

import pytest

from venice_core.errors import ComponentError
from venice_core.pubsub import admin


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once closed


def test_a_refused_or_unknown_bootstrap_server_is_named_without_waiting_for_the_kafka_client() -> None:
    port = _closed_port()
    with pytest.raises(ComponentError, match=rf"127.0.0.1:{port} is unreachable: 127.0.0.1:{port}: Connection refused"):
        admin.check_reachable(f"127.0.0.1:{port}", timeout=60)
    both = f"PLAINTEXT://127.0.0.1:{port},no-such-host.invalid:9092"
    reason = admin.refused(both)
    assert reason is not None and reason.startswith(f"PLAINTEXT://127.0.0.1:{port}: Connection refused; ")
    assert "no-such-host.invalid:9092: " in reason


def test_a_server_that_takes_the_connection_is_left_to_the_kafka_client() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert admin.refused(f"127.0.0.1:{_closed_port()},127.0.0.1:{port}") is None
