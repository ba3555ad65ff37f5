from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from zoneinfo import ZoneInfo

import pytest

from tests.support.sandbox import free_ports
from venice_core.hooks import HookContext
from venice_core.hooks.builtin import HealthCheck, ManualApproval, MinDelayBetweenRegions, SwapWindow
from venice_core.model.status import ExecutionStatus, JobStatus, RegionJobStatus, VersionStatus


def ctx(configs: dict[str, str], job_status: JobStatus | None = None, region: str = "dc-1") -> HookContext:
    return HookContext(
        cluster="c", store="users", store_hook_configs=configs, version=4, region=region, job_status=job_status
    )


def status(swapped_seconds_ago: float | None) -> JobStatus:
    now = time.time()
    regions = {
        "dc-0": RegionJobStatus(
            ExecutionStatus.COMPLETED,
            now - 500,
            serving=swapped_seconds_ago is not None,
            current_since=None if swapped_seconds_ago is None else now - swapped_seconds_ago,
        ),
        "dc-1": RegionJobStatus(ExecutionStatus.COMPLETED, now - 400),
    }
    return JobStatus("users", 4, VersionStatus.PARTIALLY_ONLINE, ExecutionStatus.COMPLETED, regions)


class TestMinDelayBetweenRegions:
    hook = MinDelayBetweenRegions({"min.delay.between.regions.seconds": "60"})

    def test_waits_until_the_delay_after_the_last_swap(self) -> None:
        outcome, reason = self.hook.pre_store_version_swap(ctx({}, status(swapped_seconds_ago=10)))
        assert outcome == "WAIT" and "50s left" in reason
        assert self.hook.pre_store_version_swap(ctx({}, status(swapped_seconds_ago=61))) == "PROCEED"

    def test_first_region_does_not_wait(self) -> None:
        assert self.hook.pre_store_version_swap(ctx({}, status(swapped_seconds_ago=None))) == "PROCEED"

    def test_store_level_config_overrides_and_is_validated(self) -> None:
        store = {"min.delay.between.regions.seconds": "5"}
        assert self.hook.pre_store_version_swap(ctx(store, status(swapped_seconds_ago=10))) == "PROCEED"
        outcome, reason = self.hook.validate_hook_config(ctx({"min.delay.between.regions.seconds": "soon"}))
        assert outcome == "ABORT" and "non-negative number" in reason


class TestSwapWindow:
    hook = SwapWindow(
        {"swap.window.days": "mon-fri", "swap.window.hours": "9-17", "swap.window.timezone": "America/New_York"}
    )

    @staticmethod
    def at(*args: int) -> datetime:
        return datetime(*args, tzinfo=ZoneInfo("America/New_York"))

    def test_inside_the_window(self) -> None:
        assert self.hook.opens_in(ctx({}), self.at(2026, 11, 18, 10, 0)) == 0  # a Wednesday

    def test_weekend_and_after_hours_wait_for_monday(self) -> None:
        assert self.hook.opens_in(ctx({}), self.at(2026, 11, 21, 12, 0)) == 45 * 3600  # Saturday noon
        assert self.hook.opens_in(ctx({}), self.at(2026, 11, 20, 17, 30)) == (2 * 24 + 15.5) * 3600  # Friday

    def test_dst_change_over_the_weekend(self) -> None:
        # 2026-03-08 02:00 clocks go forward: Saturday noon EST to Monday 09:00 EDT is 44 hours, not 45.
        assert self.hook.opens_in(ctx({}), self.at(2026, 3, 7, 12, 0)) == 44 * 3600
        # 2026-11-01 clocks go back: 46 hours.
        assert self.hook.opens_in(ctx({}), self.at(2026, 10, 31, 12, 0)) == 46 * 3600

    def test_jitter_is_stable_and_bounded(self) -> None:
        configs = {"swap.window.jitter.seconds": "600"}
        monday_nine = self.at(2026, 11, 23, 9, 0)
        first = self.hook.opens_in(ctx(configs), monday_nine)
        assert 0 <= first < 600 and self.hook.opens_in(ctx(configs), monday_nine) == first
        assert self.hook.opens_in(ctx(configs, region="dc-2"), monday_nine) != first

    def test_allows_every_hour_until_configured(self) -> None:
        unset = SwapWindow({})
        saturday_night = self.at(2026, 11, 21, 3, 0)
        assert unset.opens_in(ctx({}), saturday_night) == 0
        assert unset.pre_store_version_swap(ctx({})) == "PROCEED"
        assert unset.validate_hook_config(ctx({})) == "PROCEED"
        # A zone or a jitter alone sets no window.
        assert (
            unset.opens_in(
                ctx({"swap.window.timezone": "Asia/Tokyo", "swap.window.jitter.seconds": "600"}), saturday_night
            )
            == 0
        )
        # Enabled per store: each setting restricts on its own (hours alone: those hours, every day).
        assert unset.opens_in(ctx({"swap.window.hours": "9-17"}), saturday_night) == 3600  # 09:00 UTC
        assert unset.opens_in(ctx({"swap.window.days": "mon-fri"}), saturday_night) == 40 * 3600  # Monday 00:00 UTC

    def test_wrapping_days_and_validation(self) -> None:
        weekend = SwapWindow({"swap.window.days": "sat-sun", "swap.window.hours": "0-24"})
        assert weekend.opens_in(ctx({}), datetime(2026, 11, 22, 3, 0, tzinfo=ZoneInfo("UTC"))) == 0
        outcome, reason = self.hook.validate_hook_config(ctx({"swap.window.timezone": "Mars/Olympus"}))
        assert outcome == "ABORT" and "invalid swap window" in reason
        assert self.hook.validate_hook_config(ctx({"swap.window.hours": "18-9"}))[0] == "ABORT"

    @pytest.mark.parametrize(
        ("key", "value", "reason"),
        [
            ("swap.window.timezone", "Mars/Base", "unknown time zone 'Mars/Base' (an IANA zone, e.g. Europe/Paris)"),
            ("swap.window.days", "mon-xyz", "unknown day in 'mon-xyz'"),
            ("swap.window.hours", "18-6", "hours '18-6' cross midnight: overnight windows are not supported"),
            ("swap.window.hours", "nine-5", "hours must be like 9-17 within 0-24, got 'nine-5'"),
            ("swap.window.holidays", "2026-12-24,2026-13-01", "'2026-13-01' is not a date YYYY-MM-DD (month must be"),
            ("swap.window.jitter.seconds", "-5", "must be a number of seconds, 0 or more, got '-5'"),
            ("swap.window.jitter.seconds", "soon", "must be a number of seconds, 0 or more, got 'soon'"),
        ],
    )
    def test_each_setting_is_checked_on_its_own_when_set(self, key: str, value: str, reason: str) -> None:
        """Alone, before any day, hour or holiday makes the window: a time zone set first is checked too."""
        outcome, said = SwapWindow({}).validate_hook_config(ctx({key: value}))
        assert outcome == "ABORT" and said.startswith(f"invalid swap window setting {key}: ") and reason in said
        assert SwapWindow({key: value}).validate_hook_config(ctx({}))[0] == "ABORT"  # cluster-level alike
        assert SwapWindow({}).validate_hook_config(ctx({"swap.window.timezone": "Europe/Paris"})) == "PROCEED"


@pytest.fixture
def health_server() -> Iterator[int]:
    """A real HTTP server on loopback: /ok, /bad and a Prometheus-style /api/v1/query."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            if self.path.startswith("/api/v1/query"):
                value = "0.5" if "dc-1" in self.path else "7"
                body = json.dumps(
                    {
                        "status": "success",
                        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [time.time(), value]}]},
                    }
                ).encode()
                code = 200
            else:
                code, body = (200, b"ok") if self.path.startswith("/ok") else (500, b"down")
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


class TestHealthCheck:
    def test_http_probe(self, health_server: int) -> None:
        hook = HealthCheck({})
        ok = {"health.check.url": f"http://127.0.0.1:{health_server}/ok/{{region}}"}
        assert hook.post_store_version_swap(ctx(ok)) == "PROCEED"
        bad = {"health.check.url": f"http://127.0.0.1:{health_server}/bad/{{region}}"}
        outcome, reason = hook.post_store_version_swap(ctx(bad))
        assert outcome == "ROLLBACK" and "/bad/dc-1 answered 500" in reason
        (closed,) = free_ports(1)
        outcome, reason = hook.post_store_version_swap(ctx({"health.check.url": f"http://127.0.0.1:{closed}/"}))
        assert outcome == "ROLLBACK" and "unreachable" in reason

    def test_prometheus_query_against_a_threshold(self, health_server: int) -> None:
        hook = HealthCheck(
            {
                "health.check.prometheus.url": f"http://127.0.0.1:{health_server}",
                "health.check.prometheus.query": 'error_rate{{region="{region}"}}',
                "health.check.prometheus.max": "1",
            }
        )
        assert hook.post_store_version_swap(ctx({}, region="dc-1")) == "PROCEED"
        outcome, reason = hook.post_store_version_swap(ctx({}, region="dc-2"))
        assert outcome == "ROLLBACK" and 'error_rate{region="dc-2"} = 7, above 1' in reason

    def test_validation(self) -> None:
        hook = HealthCheck({})
        assert hook.validate_hook_config(ctx({"health.check.url": "file:///etc/passwd"}))[0] == "ABORT"
        assert hook.validate_hook_config(ctx({"health.check.prometheus.url": "http://p"}))[0] == "ABORT"
        assert hook.validate_hook_config(ctx({"health.check.url": "http://h/{region}"})) == "PROCEED"


class TestManualApproval:
    ALL = {"manual.approval.regions": "*"}

    def answer(self, configs: dict[str, str], approvals: dict, cluster: dict[str, str] | None = None, region="dc-1"):
        context = HookContext(
            cluster="c", store="users", store_hook_configs=configs, version=4, region=region, approvals=approvals
        )
        return ManualApproval(cluster or {}).pre_store_version_swap(context)

    def test_asks_in_no_region_until_configured(self) -> None:
        assert self.answer({}, {}) == "PROCEED"
        assert self.answer({}, {}, region="dc-0") == "PROCEED"
        assert self.answer({"manual.approval.regions": ""}, {}) == "PROCEED"

    def test_waits_until_someone_decides(self) -> None:
        outcome, reason = self.answer(self.ALL, {})
        assert outcome == "WAIT" and reason == "waiting for a person to approve version 4 in dc-1"

    def test_approved_proceeds_and_rejected_aborts_naming_who(self) -> None:
        approved = {"dc-1": {"approved": True, "by": "ana", "at": 1.0}}
        assert self.answer(self.ALL, approved) == ("PROCEED", "approved by ana")
        assert self.answer(self.ALL, {"dc-1": {"approved": False, "by": "bo", "at": 1.0}}) == (
            "ABORT",
            "rejected by bo",
        )

    def test_only_the_configured_regions_wait(self) -> None:
        assert self.answer({"manual.approval.regions": "dc-2, dc-3"}, {}) == "PROCEED"
        assert self.answer({"manual.approval.regions": "dc-0,dc-1"}, {})[0] == "WAIT"
        # Enabled cluster-wide, or per store; a store overrides the cluster's setting.
        assert self.answer({}, {}, cluster=self.ALL)[0] == "WAIT"
        assert self.answer({"manual.approval.regions": ""}, {}, cluster=self.ALL) == "PROCEED"
        assert self.answer(self.ALL, {}, cluster={"manual.approval.regions": ""})[0] == "WAIT"
        # Another region's approval does not count.
        assert self.answer(self.ALL, {"dc-0": {"approved": True, "by": "ana", "at": 1.0}})[0] == "WAIT"
