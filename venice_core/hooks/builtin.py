"""Built-in hooks, usable from config alone. Each reads its settings from the store-level hook configs, falling back
to the cluster-level `venice.store.lifecycle.hooks.configs.<key>`, and validates them in validate_hook_config. As
VIP-4's test plan asks, each is a no-op until a setting enables it, so a hook can be listed cluster-wide and
enabled store by store.

- `MinDelayBetweenRegions`: `min.delay.between.regions.seconds` (default 0: no delay). pre_store_version_swap
  WAITs until that long after the last region swapped to this version (from the job status's per-region swap
  times).
- `SwapWindow`: `swap.window.days` (e.g. `mon-fri`; default every day), `swap.window.hours` (e.g. `9-17`; default
  all day), `swap.window.timezone` (IANA, default UTC), `swap.window.holidays` (ISO dates, comma-separated),
  `swap.window.jitter.seconds` (default 0; a stable per store/version/region delay into the window, so that many
  stores do not swap at the same second). pre_store_version_swap WAITs outside the window. With none of days,
  hours or holidays set, there is no window: every hour is allowed.
- `HealthCheck`: after a region swaps, `health.check.url` (`{region}` and `{store}` substituted; any non-2xx or an
  unreachable URL is unhealthy), or `health.check.prometheus.url` + `health.check.prometheus.query` (`{region}`
  substituted) + `health.check.prometheus.max` (unhealthy when the query's value is above it).
  post_store_version_swap answers ROLLBACK when unhealthy. Without a URL it checks nothing.
- `ManualApproval`: `manual.approval.regions` (comma-separated region names, `*` for all; default none).
  pre_store_version_swap WAITs in those regions until a person approves the swap (PROCEED) or rejects it (ABORT):
  in the Airflow UI, where the region's `approval` task is a human-in-the-loop ApprovalOperator, or with
  `venice rollout approve`.
- `LifecycleEvents` (in `hooks.events`): sends an event of every lifecycle function to a Kafka topic and/or a
  webhook; always PROCEEDs.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import ClassVar, overload

from venice_core.hooks.api import (
    HookContext,
    StoreAnswer,
    StoreLifecycleEventOutcome,
    StoreLifecycleHooks,
    StoreVersionLifecycleEventOutcome,
    VersionAnswer,
)
from venice_core.schedules.calendar import BusinessCalendar, parse_days, parse_holiday, parse_hours, parse_zone

PROCEED = StoreVersionLifecycleEventOutcome.PROCEED
WAIT = StoreVersionLifecycleEventOutcome.WAIT
ROLLBACK = StoreVersionLifecycleEventOutcome.ROLLBACK
ABORT = StoreVersionLifecycleEventOutcome.ABORT
VALID = StoreLifecycleEventOutcome.PROCEED
INVALID = StoreLifecycleEventOutcome.ABORT


class Configured(StoreLifecycleHooks):
    """Settings: store-level first, then the cluster-level hook configs."""

    @overload
    def setting(self, ctx: HookContext, key: str, default: str) -> str: ...

    @overload
    def setting(self, ctx: HookContext, key: str, default: None = None) -> str | None: ...

    def setting(self, ctx: HookContext, key: str, default: str | None = None) -> str | None:
        return ctx.store_hook_configs.get(key, self.configs.get(key, default))


class MinDelayBetweenRegions(Configured):
    KEY = "min.delay.between.regions.seconds"
    hook_config_keys = frozenset({KEY})

    def validate_hook_config(self, ctx: HookContext) -> StoreAnswer:
        value = self.setting(ctx, self.KEY, "0")
        try:
            if float(value) < 0:
                raise ValueError
        except ValueError:
            return INVALID, f"{self.KEY} must be a non-negative number of seconds, got {value!r}"
        return VALID

    def pre_store_version_swap(self, ctx: HookContext) -> VersionAnswer:
        delay = float(self.setting(ctx, self.KEY, "0"))
        if not delay or ctx.job_status is None:
            return PROCEED
        swaps = [s.current_since for s in ctx.job_status.regions.values() if s.serving and s.current_since]
        if not swaps:
            return PROCEED
        remaining = max(swaps) + delay - time.time()
        return (WAIT, f"{remaining:.0f}s left of the {delay:.0f}s minimum delay") if remaining > 0 else PROCEED


def _holidays(text: str) -> None:
    for holiday in text.split(","):
        if holiday.strip():
            parse_holiday(holiday)


def _seconds(text: str) -> None:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        raise ValueError(f"must be a number of seconds, 0 or more, got {text!r}")


class SwapWindow(Configured):
    ENABLING = ("swap.window.days", "swap.window.hours", "swap.window.holidays")
    # Each setting's check (ValueError says what is wrong).
    CHECKS: ClassVar[dict[str, Callable[[str], object]]] = {
        "swap.window.days": parse_days,
        "swap.window.hours": parse_hours,
        "swap.window.timezone": parse_zone,
        "swap.window.holidays": _holidays,
        "swap.window.jitter.seconds": _seconds,
    }
    hook_config_keys = frozenset(CHECKS)

    def calendar(self, ctx: HookContext) -> BusinessCalendar | None:
        """The window's calendar; None (every hour allowed) until a setting restricts it."""
        if not any(self.setting(ctx, key) for key in self.ENABLING):
            return None
        return BusinessCalendar.parse(
            days=self.setting(ctx, "swap.window.days") or "mon-sun",
            hours=self.setting(ctx, "swap.window.hours") or "0-24",
            timezone=self.setting(ctx, "swap.window.timezone", "UTC"),
            holidays=(self.setting(ctx, "swap.window.holidays", "") or "").split(","),
        )

    def validate_hook_config(self, ctx: HookContext) -> StoreAnswer:
        """Each setting checked on its own, whenever it is set (a time zone alone is checked too, before a day,
        hour or holiday makes the window)."""
        for key, check in self.CHECKS.items():
            value = self.setting(ctx, key)
            if value is None:
                continue
            try:
                check(value)
            except ValueError as exc:
                return INVALID, f"invalid swap window setting {key}: {exc}"
        return VALID

    def opens_in(self, ctx: HookContext, now: datetime) -> float:
        """Seconds until swapping is allowed (0 inside the window, after its jitter)."""
        calendar = self.calendar(ctx)
        if calendar is None:
            return 0.0
        jitter = float(self.setting(ctx, "swap.window.jitter.seconds", "0"))
        seed = f"{ctx.store}/{ctx.version}/{ctx.region}".encode()
        delay = timedelta(seconds=jitter * int.from_bytes(hashlib.sha256(seed).digest()[:4], "big") / 2**32)
        opens = calendar.next_open(now, delay)
        return float("inf") if opens is None else (opens - now.astimezone(UTC)).total_seconds()

    def pre_store_version_swap(self, ctx: HookContext) -> VersionAnswer:
        wait = self.opens_in(ctx, datetime.fromtimestamp(time.time(), UTC))  # `time`: a test's hand-moved clock
        return PROCEED if wait == 0 else (WAIT, f"outside the swap window ({wait:.0f}s until it opens)")


class HealthCheck(Configured):
    hook_config_keys = frozenset(
        {
            "health.check.url",
            "health.check.prometheus.url",
            "health.check.prometheus.query",
            "health.check.prometheus.max",
            "health.check.timeout.seconds",
        }
    )

    def validate_hook_config(self, ctx: HookContext) -> StoreAnswer:
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
            template = self.setting(ctx, "health.check.prometheus.query")
            maximum = self.setting(ctx, "health.check.prometheus.max")
            if template is None or maximum is None:  # refused by validate_hook_config: a hook failure here
                raise ValueError("health.check.prometheus.url needs health.check.prometheus.query and .max")
            query, limit = template.format(region=ctx.region, store=ctx.store), float(maximum)
            api = f"{prometheus.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
            with urllib.request.urlopen(api, timeout=timeout) as response:
                results = json.load(response)["data"]["result"]
            values = [float(r["value"][1]) for r in results]
            worst = max(values) if values else None
            if worst is not None and worst > limit:
                return f"{query} = {worst:g}, above {limit:g}"
        return None

    def post_store_version_swap(self, ctx: HookContext) -> VersionAnswer:
        problem = self._unhealthy(ctx)
        return (ROLLBACK, f"{ctx.region} unhealthy after the swap: {problem}") if problem else PROCEED


class ManualApproval(Configured):
    KEY = "manual.approval.regions"
    hook_config_keys = frozenset({KEY})

    def needs_approval(self, ctx: HookContext) -> bool:
        value = (self.setting(ctx, self.KEY, "") or "").strip()
        return value == "*" or ctx.region in {r.strip() for r in value.split(",")}

    def pre_store_version_swap(self, ctx: HookContext) -> VersionAnswer:
        if not self.needs_approval(ctx):
            return PROCEED
        decision = ctx.approvals.get(ctx.region or "")
        if decision is None:
            return WAIT, f"waiting for a person to approve version {ctx.version} in {ctx.region}"
        if decision["approved"]:
            return PROCEED, f"approved by {decision['by']}"
        return ABORT, f"rejected by {decision['by']}"
