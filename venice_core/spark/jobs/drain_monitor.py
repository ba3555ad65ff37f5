"""`DrainMonitor`: inside a running pipeline's job, polls the metadata store for a drain notification meant for
the current run (seed 004's DrainMonitor). It checks once when asked at start (`check_now`: a notification written
before the job started drains it at start) and then every `interval` seconds on a daemon thread, until it finds one
or is stopped. Notifications of other runs are stale and ignored (`controller.drain.for_run`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from venice_core.controller.drain import StoredNotification

DEFAULT_INTERVAL_SECONDS = 2.0

Poll = Callable[[], "StoredNotification | None"]


class DrainMonitor:
    def __init__(
        self,
        poll: Poll,
        on_drain: Callable[[StoredNotification], None],
        interval: float = DEFAULT_INTERVAL_SECONDS,
        on_error: Callable[[Exception], None] = lambda _exc: None,
    ) -> None:
        if interval <= 0:
            raise ValueError("the drain monitor's interval must be positive")
        self.poll, self.on_drain, self.interval, self.on_error = poll, on_drain, interval, on_error
        self.found: StoredNotification | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check_now(self) -> StoredNotification | None:
        """One check; a notification found is handed to `on_drain` (once)."""
        if self.found is None:
            found = self.poll()
            if found is not None:
                self.found = found
                self.on_drain(found)
        return self.found

    def start(self) -> DrainMonitor:
        self._thread = threading.Thread(target=self._run, name="drain-monitor", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while self.found is None and not self._stop.wait(self.interval):
            try:
                self.check_now()
            except Exception as exc:  # noqa: BLE001 - a metadata store briefly away: try again next interval
                self.on_error(exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval + 5)
