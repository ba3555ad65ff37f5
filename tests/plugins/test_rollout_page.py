"""The rollout page without a running Airflow: its registration, its HTML (escaped), and its app refusing a request
without a token (the check through real Airflow is in tests/airflow/test_rollout_runs.py)."""

from __future__ import annotations

import asyncio

from venice_plugin import VenicePlugin
from venice_plugin.airflow_runs import RunInfo
from venice_plugin.rollout_html import render_index, render_page
from venice_plugin.rollout_page import URL_PREFIX, LazyApp

from venice_core.controller.versions import RegionProgress
from venice_core.jobs.rollout_view import Answer, RegionRow, RolloutView, Step, Stop, VersionInfo

EVIL = "<script>alert('x')</script>"


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
        version=VersionInfo(2, "PARTIALLY_ONLINE", f"aborted: {EVIL}"),
        job_steps=(Step("create_version", "create_version", "success", 1),),
        columns=("pre_swap",),
        regions=(
            RegionRow(
                "dc-1",
                1,
                0,
                {"pre_swap": Step("pre_swap", "dc_1.pre_swap", f"failed{EVIL}", 2, (answer, quiet))},
                RegionProgress(5, 10),
                Stop("ABORT", "pre_swap", EVIL),
            ),
        ),
    )
    html = render_page(view)
    assert "<script>" not in html and "alert(&#x27;x&#x27;)" in html
    assert "&lt;script&gt;" in html and "ABORT" in html and "5 / 10 records (50%)" in html
    assert "class='failedscriptalertxscript'" in html  # a state becomes a class name of letters only
    assert "title='Quiet&lt;script&gt;" in html and "1 hook(s) PROCEED at pre_store_version_swap in dc-1" in html


def test_the_store_list_links_each_store_to_its_dags_tab_escaped() -> None:
    store = RolloutView("users", None, None, None, (), (), (RegionRow("dc-0", 2, 1, {}, None, None),))
    html = render_index([(store, RunInfo(f"manual__{EVIL}", f"failed{EVIL}", "2026-11-22T22:00:00+00:00"))])
    assert "<script>" not in html and "class='state failedscriptalertxscript'" in html
    assert "<a href='/dags/venice_push__users/plugin/venice-rollout' target='_top'>users</a>" in html
    assert "dc-0 v2" in html


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
