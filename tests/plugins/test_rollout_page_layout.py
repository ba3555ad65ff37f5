"""The rollout page's layout in a real browser (Debian's Chromium, through Playwright): a three-region run with
every step of the DAG and long hook reasons fits the Airflow UI's frame in a 1600-pixel window, about 1400 pixels,
with no column hidden. The page is rendered to a file and shown in such a frame, no Airflow needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from venice_plugin.airflow_runs import RunInfo
from venice_plugin.rollout_html import render_page

from tests.support.browser import chromium_page
from venice_core.controller.versions import RegionProgress
from venice_core.model.status import VersionStatus
from venice_core.rollout.view import Answer, RegionRow, RolloutView, Step, Stop, VersionInfo

pytestmark = pytest.mark.browser

FRAME_WIDTH = 1400  # the plugin tab's frame in a 1600-pixel window, beside Airflow's navigation
T0 = 1_800_000_000.0
JOB = (
    "start_of_push_job",
    "schema_registration",
    "compression_dictionary",
    "pre_version_creation",
    "pre_version_creation_abort",
    "pre_version_creation_rollback",
    "create_version",
    "spark_push",
    "end_of_push",
)
END = (
    "end_of_push_job",
    "end_of_push_job_abort",
    "end_of_push_job_rollback",
    "finish_push_job",
    "announce_version",
)
# Every task of a region's group, in the DAG's order (manual approval on).
REGION = (
    "da_vinci_ingestion_gate",
    "da_vinci_ingestion_gate_abort",
    "da_vinci_ingestion_gate_rollback",
    "admitted",
    "ingestion_complete",
    "da_vinci_ingestion",
    "da_vinci_ingestion_abort",
    "da_vinci_ingestion_rollback",
    "leader_replication_done",
    "approval",
    "not_admitted",
    "pre_swap",
    "pre_swap_abort",
    "pre_swap_rollback",
    "da_vinci_swap",
    "server_swap",
    "post_swap",
    "post_swap_abort",
    "post_swap_rollback",
    "region_done",
)
REASON = (
    "still WAIT after 3600s, the maximum wait: the canary's error rate 0.0731 is above the threshold 0.05 for "
    "https://metrics.example.com/d/venice-canary?var-store=users_with_a_long_name&var-region=dc-1&from=now-1h"
)


def _answers(region: str) -> tuple[Answer, ...]:
    return (
        Answer("CanaryErrorRateHookWithALongClassName", "pre_store_version_swap", region, "WAIT", REASON, count=14),
        Answer("AnswerFromConfig", "pre_store_version_swap", region, "PROCEED", "", count=14),
        Answer("RecordEveryCall", "pre_store_version_swap", region, "PROCEED", ""),
        Answer("BrokenWebhook", "post_store_version_swap", region, None, "ConnectionRefusedError: " + REASON),
    )


def _steps(region: str, states: tuple[str, ...]) -> dict[str, Step]:
    group = region.replace("-", "_")
    steps = {}
    for i, (name, state) in enumerate(zip(REGION, states, strict=True)):
        answers = _answers(region) if name in ("pre_swap", "post_swap", "da_vinci_ingestion") else ()
        started = T0 + 60 * i if state != "none" else None
        ended = None if started is None else started + 65
        steps[name] = Step(name, f"{group}.{name}", state, 3 if answers else 1, answers, started, ended)
    return steps


def _view() -> RolloutView:
    """dc-0 done, dc-1 aborted at its pre swap, dc-2 still ingesting (a retry) with its approval asked for."""
    ok, no, wait = "success", "skipped", "up_for_reschedule"
    to_pre_swap = (ok, no, no, ok, ok, ok, no, no, ok, ok, no)
    done = (*to_pre_swap, ok, no, no, ok, ok, ok, no, no, ok)
    aborted = (*to_pre_swap, ok, "failed", no, no, no, no, no, no, "upstream_failed")
    going = (ok, no, no, ok, "up_for_retry", wait, "none", "none", "none", "awaiting_input")
    going += ("none",) * 10
    job = tuple(Step(n, n, "success", 1, (), T0 - 30 + i, T0 - 29 + i) for i, n in enumerate(JOB))
    job += tuple(Step(n, n, "none", 0) for n in END)
    reason = f"aborted by a hook at pre_store_version_swap in dc-1 ({REASON})"
    version = VersionInfo(7, VersionStatus.PARTIALLY_ONLINE, reason)
    full, part = RegionProgress(1_000_000, 1_000_000), RegionProgress(312_000, 1_000_000)
    rows = (
        RegionRow("dc-0", 7, 6, _steps("dc-0", done), full, None),
        RegionRow("dc-1", 6, 5, _steps("dc-1", aborted), full, Stop("ABORT", "pre_swap", version.reason)),
        RegionRow("dc-2", 6, 5, _steps("dc-2", going), part, None),
    )
    return RolloutView("users_with_a_long_name", "manual__1", "running", version, job, REGION, rows)


def test_a_run_with_every_step_fits_the_airflow_frame_without_hiding_a_column(tmp_path: Path) -> None:
    runs = [RunInfo(f"manual__2027-01-{day:02d}T08:00:00+00:00", "success", "") for day in range(15, 0, -1)]
    (tmp_path / "rollout.html").write_text(render_page(_view(), runs, now=T0 + 3600))
    (tmp_path / "frame.html").write_text(
        f"<!doctype html><body style='margin:0'><iframe name='rollout' src='rollout.html' "
        f"style='width:{FRAME_WIDTH}px;height:980px;border:0'></iframe></body>"
    )
    with chromium_page(tmp_path / "chromium-profile") as page:
        page.goto((tmp_path / "frame.html").as_uri())
        frame = page.frame(name="rollout")
        assert frame is not None
        frame.locator("#matrix").wait_for()
        page.screenshot(path=str(tmp_path / "frame.png"))  # to look at when it fails
        width, scroll = frame.evaluate("[document.documentElement.clientWidth, document.documentElement.scrollWidth]")
        headers = frame.evaluate(
            "[...document.querySelectorAll('#matrix th, #job th')].map(th => "
            "[th.title || th.textContent, th.getBoundingClientRect().left, th.getBoundingClientRect().right])"
        )
        cells = frame.locator("#matrix tr[data-region] td").count()
    assert width >= FRAME_WIDTH - 20 and scroll <= width, (width, scroll)  # (less a scroll bar)
    outside = [(name, left, right) for name, left, right in headers if left < 0 or right > width]
    assert not outside, outside
    titled = {name for name, _, _ in headers}
    assert set(REGION) <= titled and set(JOB + END) <= titled  # every column shown, in its header's title
    assert cells == 3 * (1 + len(REGION))  # the outcome and a cell per step, in each region
