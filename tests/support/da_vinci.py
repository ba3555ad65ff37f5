"""A stand-in Da Vinci instance for rollout tests: it heartbeats into the registry every few seconds, as a real
client does, so it stays live however slow the machine is, and reports the version it is told it has ingested and
serves."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from venice_core.controller import da_vinci
from venice_core.meta import MetadataStore
from venice_core.model.status import ExecutionStatus

HEARTBEAT_SECONDS = 2.0


class HeartbeatingInstance:
    def __init__(self, meta: MetadataStore, store: str, region: str, instance_id: str) -> None:
        self.meta, self.store, self.region, self.instance_id = meta, store, region, instance_id
        self.version, self.status, self.serving = 0, ExecutionStatus.STARTED, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"da-vinci-{instance_id}")

    def _beat(self) -> None:
        da_vinci.heartbeat(
            self.meta, self.store, self.region, self.instance_id, self.version, self.status, self.serving
        )

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            self._beat()

    def serves(self, version: int) -> None:
        """Report the version as ingested and served (at once, and in every heartbeat after)."""
        self.version, self.status, self.serving = version, ExecutionStatus.COMPLETED, version
        self._beat()


@contextmanager
def heartbeating_instance(
    meta: MetadataStore, store: str, region: str, instance_id: str
) -> Iterator[HeartbeatingInstance]:
    instance = HeartbeatingInstance(meta, store, region, instance_id)
    instance._beat()  # registered before the caller goes on
    instance._thread.start()
    try:
        yield instance
    finally:
        instance._stop.set()
        instance._thread.join(timeout=10)
