"""Built-in hooks, usable from config alone. Each reads its settings from the store-level hook configs, falling back
to the cluster-level `venice.store.lifecycle.hooks.configs.<key>`, and validates them in validate_hook_config.

- `MinDelayBetweenRegions`: `min.delay.between.regions.seconds`. pre_store_version_swap WAITs until that long
  after the last region swapped to this version (from the job status's per-region swap times).
- `SwapWindow`: `swap.window.days` (e.g. `mon-fri`), `swap.window.hours` (e.g. `9-17`), `swap.window.timezone`
  (IANA, default UTC), `swap.window.jitter.seconds` (default 0; a stable per store/version/region delay into the
  window, so that many stores do not swap at the same second). pre_store_version_swap WAITs outside the window.
- `HealthCheck`: after a region swaps, `health.check.url` (`{region}` and `{store}` substituted; any non-2xx or an
  unreachable URL is unhealthy), or `health.check.prometheus.url` + `health.check.prometheus.query` (`{region}`
  substituted) + `health.check.prometheus.max` (unhealthy when the query's value is above it).
  post_store_version_swap answers ROLLBACK when unhealthy.
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from venice_core.hooks.api import (
    HookContext,
    StoreLifecycleEventOutcome,
    StoreLifecycleHooks,
    StoreVersionLifecycleEventOutcome,
)

PROCEED = StoreVersionLifecycleEventOutcome.PROCEED
WAIT = StoreVersionLifecycleEventOutcome.WAIT
ROLLBACK = StoreVersionLifecycleEventOutcome.ROLLBACK
VALID = StoreLifecycleEventOutcome.PROCEED
INVALID = StoreLifecycleEventOutcome.ABORT
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class _Configured(StoreLifecycleHooks):
    """Settings: store-level first, then the cluster-level hook configs."""

    def setting(self, ctx: HookContext, key: str, default: str | None = None) -> str | None:
        return ctx.store_hook_configs.get(key, self.configs.get(key, default))


class MinDelayBetweenRegions(_Configured):
    KEY = "min.delay.between.regions.seconds"

    def validate_hook_config(self, ctx: HookContext):  # type: ignore[override]
        value = self.setting(ctx, self.KEY, "0")
        try:
            if float(value) < 0:
                raise ValueError
        except ValueError:
            return INVALID, f"{self.KEY} must be a non-negative number of seconds, got {value!r}"
        return VALID

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        delay = float(self.setting(ctx, self.KEY, "0"))
        if not delay or ctx.job_status is None:
            return PROCEED
        swaps = [s.current_since for s in ctx.job_status.regions.values() if s.serving and s.current_since]
        if not swaps:
            return PROCEED
        remaining = max(swaps) + delay - time.time()
        return (WAIT, f"{remaining:.0f}s left of the {delay:.0f}s minimum delay") if remaining > 0 else PROCEED


def _parse_days(text: str) -> set[int]:
    days: set[int] = set()
    for part in text.lower().replace(" ", "").split(","):
        first, _, last = part.partition("-")
        start, end = DAYS.index(first), DAYS.index(last or first)
        days.update(range(start, end + 1) if start <= end else [*range(start, 7), *range(0, end + 1)])
    return days


def _parse_hours(text: str) -> tuple[int, int]:
    start, _, end = text.partition("-")
    begin, finish = int(start), int(end)
    if not (0 <= begin < finish <= 24):
        raise ValueError(text)
    return begin, finish


class SwapWindow(_Configured):
    def _window(self, ctx: HookContext) -> tuple[set[int], tuple[int, int], ZoneInfo, float]:
        return (
            _parse_days(self.setting(ctx, "swap.window.days", "mon-fri")),
            _parse_hours(self.setting(ctx, "swap.window.hours", "9-17")),
            ZoneInfo(self.setting(ctx, "swap.window.timezone", "UTC")),
            float(self.setting(ctx, "swap.window.jitter.seconds", "0")),
        )

    def validate_hook_config(self, ctx: HookContext):  # type: ignore[override]
        try:
            self._window(ctx)
        except (ValueError, ZoneInfoNotFoundError) as exc:
            return INVALID, f"invalid swap window setting: {exc!s} (days like mon-fri, hours like 9-17, an IANA zone)"
        return VALID

    def opens_in(self, ctx: HookContext, now: datetime) -> float:
        """Seconds until swapping is allowed (0 inside the window, after its jitter)."""
        days, (begin, end), zone, jitter = self._window(ctx)
        local = now.astimezone(zone)
        seed = f"{ctx.store}/{ctx.version}/{ctx.region}".encode()
        offset = timedelta(seconds=jitter * int.from_bytes(hashlib.sha256(seed).digest()[:4], "big") / 2**32)
        for day in range(8):
            date = (local + timedelta(days=day)).date()
            if date.weekday() not in days:
                continue
            opens = datetime(date.year, date.month, date.day, begin, tzinfo=zone) + offset
            closes = datetime(date.year, date.month, date.day, 0, tzinfo=zone) + timedelta(hours=end)
            if local < closes and opens < closes:
                # In UTC: the difference of two times in one zone ignores a DST change between them.
                return max(0.0, (opens.astimezone(UTC) - now.astimezone(UTC)).total_seconds())
        return float("inf")

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        wait = self.opens_in(ctx, datetime.now(UTC))
        return PROCEED if wait == 0 else (WAIT, f"outside the swap window ({wait:.0f}s until it opens)")


class HealthCheck(_Configured):
    def validate_hook_config(self, ctx: HookContext):  # type: ignore[override]
        url = self.setting(ctx, "health.check.url")
        prometheus = self.setting(ctx, "health.check.prometheus.url")
        for value in (url, prometheus):
            if value and urllib.parse.urlparse(value).scheme not in ("http", "https"):
                return INVALID, f"health check URL must be http(s), got {value!r}"
        if prometheus:
            if not self.setting(ctx, "health.check.prometheus.query"):
                return INVALID, "health.check.prometheus.query is required with health.check.prometheus.url"
            try:
                float(self.setting(ctx, "health.check.prometheus.max", ""))
            except ValueError:
                return INVALID, "health.check.prometheus.max must be a number"
        return VALID

    def _unhealthy(self, ctx: HookContext) -> str | None:
        timeout = float(self.setting(ctx, "health.check.timeout.seconds", "5"))
        url = self.setting(ctx, "health.check.url")
        if url:
            target = url.format(region=ctx.region, store=ctx.store)
            try:
                with urllib.request.urlopen(target, timeout=timeout) as response:
                    if not 200 <= response.status < 300:
                        return f"{target} answered {response.status}"
            except urllib.error.HTTPError as exc:
                return f"{target} answered {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                return f"{target} is unreachable: {exc}"
        prometheus = self.setting(ctx, "health.check.prometheus.url")
        if prometheus:
            query = self.setting(ctx, "health.check.prometheus.query").format(region=ctx.region, store=ctx.store)
            limit = float(self.setting(ctx, "health.check.prometheus.max"))
            api = f"{prometheus.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
            with urllib.request.urlopen(api, timeout=timeout) as response:
                results = json.load(response)["data"]["result"]
            values = [float(r["value"][1]) for r in results]
            worst = max(values) if values else None
            if worst is not None and worst > limit:
                return f"{query} = {worst:g}, above {limit:g}"
        return None

    def post_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        problem = self._unhealthy(ctx)
        return (ROLLBACK, f"{ctx.region} unhealthy after the swap: {problem}") if problem else PROCEED
