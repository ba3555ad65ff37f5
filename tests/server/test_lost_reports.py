"""A replica's status report the metadata store did not take (its database restarting) is sent again at the next
sync, unless a newer report was made meanwhile: a replica's last report (its COMPLETED) is followed by no other, and
lost, it left the version PROGRESS in its region for good (seen with PostgreSQL restarted mid-push)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.platform import make_platform_env
from venice_core.model.status import ExecutionStatus
from venice_core.server import hosting
from venice_core.server.region_server import RegionServer


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RegionServer, list[tuple], list[bool]]:
    """A region server (never synced) whose reports go to a stand-in that fails while `down[0]`."""
    sent: list[tuple] = []
    down = [True]

    def report_replica(_meta: object, store: str, number: int, region: str, partition: int, *rest: object) -> None:
        if down[0]:
            raise OSError("the database system is shutting down")
        sent.append((store, number, partition, rest[1]))

    monkeypatch.setattr(hosting.controller, "report_replica", report_replica)
    return RegionServer(make_platform_env(tmp_path / "home").config, "dc-0"), sent, down


def test_a_lost_last_report_is_sent_again_at_the_next_sync(server: tuple) -> None:
    region, sent, down = server
    report = region.hosting.reporter(SimpleNamespace(store="users", number=1, min_ready=1), 0)
    report(ExecutionStatus.COMPLETED, 100, 50, "")
    assert sent == []
    region.hosting.resend_reports()  # still down: kept
    down[0] = False
    region.hosting.resend_reports()
    assert sent == [("users", 1, 0, ExecutionStatus.COMPLETED)]
    region.hosting.resend_reports()  # taken: not sent again
    assert len(sent) == 1


def test_a_newer_report_replaces_a_lost_one(server: tuple) -> None:
    region, sent, down = server
    report = region.hosting.reporter(SimpleNamespace(store="users", number=1, min_ready=1), 0)
    report(ExecutionStatus.PROGRESS, 10, 5, "")  # lost
    down[0] = False
    report(ExecutionStatus.COMPLETED, 100, 50, "")
    region.hosting.resend_reports()  # the lost PROGRESS is not sent after the COMPLETED
    assert sent == [("users", 1, 0, ExecutionStatus.COMPLETED)]
