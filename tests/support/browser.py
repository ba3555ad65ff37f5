"""A real browser for UI tests: Debian's headless Chromium driven by Playwright (whose own browser download is not
used), with a fresh profile per test; signing in to the embedded Airflow; opening a plugin's tab; what the rollout
page shows in a DAG run's tab; and what the page's routes answer a client without a valid token."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import FrameLocator, Page, sync_playwright

from venice_core.config import ClusterConfig
from venice_core.deployment import airflow as deployment
from venice_core.rollout.names import asset_uri, rollout_dag_id

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 60_000  # two busy cores: the UI's bundle and the first request to a plugin take seconds


@contextmanager
def chromium_page(profile: Path) -> Iterator[Page]:
    """A page of a headless Chromium with the profile `profile` (a new directory); the browser is closed after."""
    profile.mkdir(parents=True, exist_ok=False)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=ARGS, headless=True, viewport={"width": 1600, "height": 1000}
        )
        try:
            context.set_default_timeout(TIMEOUT_MS)
            yield context.new_page()
        finally:
            context.close()


def sign_in(page: Page, base_url: str, user: str, password: str) -> None:
    """Through Airflow's login form (the simple auth manager's), as a person does; back on the UI after."""
    page.goto(f"{base_url}/")
    page.locator("input[name='username']").fill(user)
    page.locator("input[name='password']").fill(password)
    page.locator("button[type='submit']").click()
    page.wait_for_url(lambda url: "/auth/" not in url)


def open_tab(page: Page, base_url: str, path: str, title: str) -> FrameLocator:
    """Open a UI page (`dags/<dag>/runs/<run>/plugin/<route>`) and return the plugin's frame in it."""
    page.goto(f"{base_url}/{path}")
    return page.frame_locator(f"iframe[title='{title}']")


def status_without_valid_token(url: str, token: str | None = None) -> int:
    """The HTTP status `url` answers without a token, or with `token` as a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@dataclass(frozen=True)
class RolloutTab:
    """What the rollout page shows, as text, in a DAG run's "Rollout" tab."""

    serving: dict[str, str]  # region -> its current version ("v2")
    version_status: str
    outcomes: dict[str, str]  # region -> its outcome cell in the step matrix ("" where the rollout did not stop)
    steps: dict[str, str]  # region -> its whole row of the step matrix
    listed: str  # the store's row in the list of stores (Browse > Rollouts)
    asset: str  # the store's row in Airflow's Assets view
    screenshot: Path


def rollout_tab(config: ClusterConfig, store: str, run_id: str, workdir: Path) -> RolloutTab:
    """Sign in to the embedded Airflow, open the run's Rollout tab and read it, then the store's row in Browse >
    Rollouts and in Airflow's Assets view. Screenshots in `workdir`: the tab in the UI (`rollout-tab.png`) and the
    whole page, which the UI's frame cuts (`rollout-page.png`)."""
    base, dag = deployment.base_url(config), rollout_dag_id(store)
    screenshot = workdir / "rollout-page.png"
    with chromium_page(workdir / "chromium-profile") as page:
        sign_in(page, base, deployment.USER, deployment.password(config))
        frame = open_tab(page, base, f"dags/{dag}/runs/{run_id}/plugin/venice-rollout-run", "Rollout")
        frame.locator("#matrix").wait_for()

        def by_region(table: str, cell: str | None = None) -> dict[str, str]:
            rows = frame.locator(f"{table} tr[data-region]")
            texts = {}
            for row in (rows.nth(i) for i in range(rows.count())):
                texts[row.get_attribute("data-region") or ""] = (row.locator(cell) if cell else row).inner_text()
            return {region: text.strip() for region, text in texts.items()}

        serving, outcomes, steps = (
            by_region("#regions", "td.current"),
            by_region("#matrix", "td.outcome"),
            by_region("#matrix"),
        )
        version_status = frame.locator("#version-status").inner_text()
        page.screenshot(path=str(workdir / "rollout-tab.png"))
        stores = open_tab(page, base, "plugin/venice-rollouts", "Rollouts")
        stores.locator("#filter input[name='q']").fill(store)  # a page of 50 stores at a time: filtered by name
        stores.locator("#filter button").click()
        listed = stores.locator(f"tr[data-store='{store}']").inner_text()
        page.goto(f"{base}/assets")
        asset = page.locator("tr", has_text=asset_uri(config.cluster_name, store)).first.inner_text()
        page.goto(f"{base}/venice/rollout/{dag}?run_id={urllib.parse.quote(run_id, safe='')}")
        page.screenshot(path=str(screenshot), full_page=True)
    return RolloutTab(serving, version_status, outcomes, steps, listed, asset, screenshot)
