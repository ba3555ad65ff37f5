"""How long a step may keep answering WAIT, if anyone set a limit.

VIP-4's WAIT means "re-run this step later": with no limit, a step is asked again for as long as its hooks answer
WAIT (a swap window over a weekend, a manual approval pending for days). An operator may set a limit, for the
cluster (`venice.store.lifecycle.hooks.wait.max.seconds`) or for one store (the same key among the store's hook
configs, which wins); past it the rollout ends with an ABORT whose reason names the limit and who set it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from venice_core.config import HookSettings
from venice_core.config.keys import HOOKS_WAIT_MAX_SECONDS

# Store-level hook config keys the hooks framework reads itself (no hook declares them).
FRAMEWORK_KEYS = frozenset({HOOKS_WAIT_MAX_SECONDS})


@dataclass(frozen=True)
class WaitLimit:
    seconds: float
    set_by: str  # "the store's hook config" or "the cluster config"

    def reason(self, waited: float) -> str:
        """The ABORT's reason once `waited` seconds of WAIT have passed the limit."""
        return (
            f"still WAIT after {waited:.0f}s, past the maximum wait of {self.seconds:g}s that {self.set_by} sets "
            f"({HOOKS_WAIT_MAX_SECONDS})"
        )


def parse_seconds(value: str) -> float:
    """A limit's value: a positive number of seconds (ValueError saying what is wrong)."""
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"{HOOKS_WAIT_MAX_SECONDS} must be a number of seconds, got {value!r}") from None
    if not seconds > 0:
        raise ValueError(f"{HOOKS_WAIT_MAX_SECONDS} must be positive, got {value!r}")
    return seconds


def wait_limit(settings: HookSettings, store_hook_configs: Mapping[str, str]) -> WaitLimit | None:
    """The limit in effect for a store: its own hook config's, else the cluster's, else None (no limit)."""
    if store_hook_configs.get(HOOKS_WAIT_MAX_SECONDS):
        return WaitLimit(parse_seconds(store_hook_configs[HOOKS_WAIT_MAX_SECONDS]), "the store's hook config")
    if settings.wait_max_seconds is not None:
        return WaitLimit(settings.wait_max_seconds, "the cluster config")
    return None
