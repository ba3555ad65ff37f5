"""The rollout page without a running Airflow: its registration, its HTML (escaped, each step's start and duration,
its headers), and its app refusing a request without a token (its layout in a real browser is
test_rollout_page_layout.py; the check through real Airflow is in tests/airflow/test_rollout_runs.py)."""

from __future__ import annotations

import asyncio

from venice_plugin import VenicePlugin
from venice_plugin.airflow_runs import RunInfo
from venice_plugin.rollout_html import PAGE_SIZE, StorePage, render_index, render_page
from venice_plugin.rollout_page import URL_PREFIX, LazyApp

from venice_core.controller.versions import RegionProgress
from venice_core.model.status import VersionStatus
from venice_core.rollout.view import Answer, RegionRow, RolloutView, Step, Stop, VersionInfo

EVIL = "<script>alert('x')</script>"
T0 = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC


def test_the_plugin_mounts_the_pages_in_the_nav_and_as_tabs_of_the_dag_and_the_run() -> None:
    (app,) = VenicePlugin.fastapi_apps
    assert app["url_prefix"] == URL_PREFIX and isinstance(app["app"], LazyApp)
    tabs = {v["destination"]: v["href"] for v in VenicePlugin.external_views}
    assert tabs == {
        "nav": "/venice/rollout/",
        "dag": "/venice/rollout/{DAG_ID}",
        "dag_run": "/venice/rollout/{DAG_ID}?run_id={RUN_ID}",
    }


def test_every_text_from_the_store_the_run_and_the_hooks_is_escaped() -> None:
    answer = Answer(f"Hook{EVIL}", "pre_store_version_swap", "dc-1", "WAIT", EVIL, count=2)
    quiet = Answer(f"Quiet{EVIL}", "pre_store_version_swap", "dc-1", "PROCEED", "")  # named in a tooltip
    view = RolloutView(
        store=f"s{EVIL}",
        run_id=f"manual__{EVIL}",
        run_state="failed",
        version=VersionInfo(2, VersionStatus.PARTIALLY_ONLINE, f"aborted: {EVIL}"),
        job_steps=(Step("create_version", "create_version", "success", 1),),
        columns=("pre_swap",),
        regions=(
            RegionRow(
                "dc-1",
                1,
                0,
                {"pre_swap": Step("pre_swap", f"dc_1.pre_swap{EVIL}", f"failed{EVIL}", 2, (answer, quiet), T0)},
                RegionProgress(5, 10),
                Stop("ABORT", "pre_swap", EVIL),
            ),
        ),
    )
    html = render_page(view)
    assert "<script>" not in html and "alert(&#x27;x&#x27;)" in html
    assert "&lt;script&gt;" in html and "ABORT" in html and "5 / 10 records (50%)" in html
    assert "class='failedscriptalertxscript'" in html  # a state becomes a class name of letters only
    assert "title='Quiet&lt;script&gt;" in html
    assert "1 hook(s) PROCEED at pre_store_version_swap in dc-1" in html.replace("<wbr>", "")
    assert "title='dc_1.pre_swap&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;: failed&lt;script&gt;" in html


def _timed(task_id: str, state: str, started: float | None, ended: float | None = None) -> Step:
    return Step(task_id.rpartition(".")[2], task_id, state, 1, (), started, ended)


def test_each_step_shows_its_start_and_how_long_it_took_or_has_been_going() -> None:
    """Start (UTC) and duration in the cell and its title; a step still going (running, a sensor between pokes)
    counts up to now; a step that never ran shows no time though Airflow stamped one."""
    steps = {
        "admitted": _timed("dc_0.admitted", "success", T0, T0 + 12.7),
        "ingestion_complete": _timed("dc_0.ingestion_complete", "success", T0 + 13, T0 + 78),
        "da_vinci_swap": _timed("dc_0.da_vinci_swap", "up_for_reschedule", T0 + 80, T0 + 81),  # between pokes
        "pre_swap": _timed("dc_0.pre_swap", "skipped", T0 + 90, T0 + 90),
        "server_swap": _timed("dc_0.server_swap", "none", None),
    }
    view = RolloutView(
        "users",
        "manual__1",
        "running",
        VersionInfo(2, VersionStatus.STARTED, ""),
        (_timed("spark_push", "success", T0 - 7_400, T0 - 20),),
        tuple(steps),
        (RegionRow("dc-0", 1, 0, steps, None, None),),
    )
    html = render_page(view, now=T0 + 80 + 65.4)
    took = "<span class='took'>1&nbsp;m&nbsp;05&nbsp;s</span>"
    assert "<time datetime='2027-01-15T08:00:00+00:00'>08:00:00</time> <span class='took'>12&nbsp;s</span>" in html
    assert f"<time datetime='2027-01-15T08:00:13+00:00'>08:00:13</time> {took}</div>" in html
    assert f"<time datetime='2027-01-15T08:01:20+00:00'>08:01:20</time> {took} so far</div>" in html  # up to now
    swap = "title='dc_0.da_vinci_swap: up_for_reschedule, started 2027-01-15 08:01:20 UTC, running for 1 m 05 s'"
    assert swap in html
    assert "title='spark_push: success, started 2027-01-15 05:56:40 UTC, took 2 h 03 m'" in html  # a run-level step
    assert html.count("<div class='when'>") == 4  # not the skipped step, nor the one not started
    assert "title='dc_0.pre_swap: skipped'" in html and "title='dc_0.server_swap: none'" in html


def test_a_decisions_branches_share_its_header_and_long_names_are_shortened() -> None:
    columns = ("admitted", "da_vinci_swap", "da_vinci_swap_abort", "da_vinci_swap_rollback", "leader_replication_done")
    steps = {c: _timed(f"dc_0.{c}", "success", None) for c in columns}
    job = tuple(_timed(n, "success", None) for n in ("end_of_push", "end_of_push_job", "end_of_push_job_abort"))
    view = RolloutView("users", "r", "success", None, job, columns, (RegionRow("dc-0", 1, 0, steps, None, None),))
    html = render_page(view)
    assert (
        "<tr><th rowspan='2'>region</th><th rowspan='2' class='outcome'>outcome</th>"
        "<th rowspan='2' title='admitted'>admitted</th><th colspan='3' title='da_vinci_swap'>DV swap</th>"
        "<th rowspan='2' title='leader_replication_done'>leader repl done</th></tr>"
        "<tr><th class='sub' title='da_vinci_swap'>ask</th><th class='sub' title='da_vinci_swap_abort'>abort</th>"
        "<th class='sub' title='da_vinci_swap_rollback'>rollback</th></tr>"
    ) in html
    # `end_of_push_job` is not a branch of `end_of_push`.
    assert "<th rowspan='2' title='end_of_push'>end of push</th><th colspan='2' title='end_of_push_job'>" in html


def test_the_store_list_links_each_store_to_its_dags_tab_escaped() -> None:
    store = RolloutView("users", None, None, None, (), (), (RegionRow("dc-0", 2, 1, {}, None, None),))
    html = render_index(
        [(store, RunInfo(f"manual__{EVIL}", f"failed{EVIL}", "2026-11-22T22:00:00+00:00"))],
        StorePage.of(["users"], "", 1),
    )
    assert "<script>" not in html and "class='state failedscriptalertxscript'" in html
    assert "<a href='/dags/venice_push__users/plugin/venice-rollout' target='_top'>users</a>" in html
    assert "dc-0 v2" in html


def test_the_store_list_shows_a_page_at_a_time_filtered_by_name() -> None:
    """At thousands of stores the list reads only one page of them; the filter and the page are in the address,
    so the links before and after keep the filter."""
    names = [f"store{i:04d}" for i in range(3000)]
    first = StorePage.of(names, "", 1)
    assert (first.names[0], len(first.names), first.pages, first.total, first.first) == ("store0000", 50, 60, 3000, 1)
    assert StorePage.of(names, "", 999).number == 60 and StorePage.of(names, "", 999).names[-1] == "store2999"
    matching = StorePage.of(names, "STORE01", 2)  # any case: store0100-0199, the second page
    assert (matching.total, matching.names[0], matching.first) == (100, "store0150", 51)
    assert PAGE_SIZE == 50
    views = [(RolloutView(name, None, None, None, (), (), ()), None) for name in matching.names]
    html = render_index(views, matching)
    assert "Stores 51-100 of 100" in html and "href='?page=1&amp;q=STORE01'>previous</a>" in html
    assert "next</a>" not in html and html.count("<tr data-store=") == 50
    assert "value='STORE01'" in html
    nothing = render_index([], StorePage.of(names, f"no{EVIL}", 1))
    assert "<script>" not in nothing and "No store matches 'no&lt;script&gt;" in nothing
    assert "No store yet." in render_index([], StorePage.of([], "", 1))


def test_a_request_without_a_token_is_refused() -> None:
    """Airflow's own dependency refuses it before the route (or Airflow's auth manager) is reached."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/rollout/venice_push__users",
        "raw_path": b"/rollout/venice_push__users",
        "root_path": "",
        "query_string": b"",
        "headers": [],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    asyncio.run(LazyApp()(scope, receive, send))
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 401


def test_a_long_hook_reason_is_clipped_in_its_cell_and_whole_in_its_title_escaped() -> None:
    reason = "x" * 120 + EVIL
    answer = Answer("Canary", "pre_store_version_swap", "dc-0", "WAIT", reason)
    steps = {"pre_swap": Step("pre_swap", "dc_0.pre_swap", "running", 1, (answer,))}
    view = RolloutView("users", "r", "running", None, (), ("pre_swap",), (RegionRow("dc-0", 1, 0, steps, None, None),))
    html = render_page(view)
    assert f"<span class='reason' title='{'x' * 120}&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;'>" in html
    assert f">{'x' * 99}\u2026</span>" in html and "<script>" not in html


def test_a_replicated_region_shows_its_ready_replicas() -> None:
    def view(progress: RegionProgress) -> RolloutView:
        row = RegionRow("dc-1", 1, 0, {}, progress, None)
        return RolloutView("users", "manual__1", "running", VersionInfo(2, VersionStatus.STARTED, ""), (), (), (row,))

    assert "5 of 8 replicas ready" in render_page(view(RegionProgress(50, 100, replicas_ready=5, replicas=8)))
    assert "replicas ready" not in render_page(view(RegionProgress(50, 100)))  # one replica a partition: not said
