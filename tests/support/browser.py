"""A real browser for UI tests: Debian's headless Chromium driven by Playwright (whose own browser download is not
used), with a fresh profile per test; signing in to the embedded Airflow; opening a plugin's tab; and what the
page's routes answer a client without a valid token."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import FrameLocator, Page, sync_playwright

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
