"""What a push's rollout asks of the lifecycle hooks, and what their answers do (the steps themselves are the list
in `rollout.steps`, which both `venice push --local` and the Airflow DAG run).

`ask` waits in place while the hooks answer WAIT; `decide` asks once (a sensor's poke) and gives None for WAIT,
else a `Decision`. `apply` carries a decision out: PROCEED goes on. ABORT stops this step and every later one:
regions already swapped keep the new version, the others keep the old one, and the version's status and reason
say so. ROLLBACK ends the push, then returns every region serving the version to its previous one (a region with
none, on a store's first version, then serves no version) and marks the version ROLLED_BACK. A step that keeps
answering WAIT past `venice.store.lifecycle.hooks.wait.max.seconds` is taken as ABORT.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from venice_core.config import ClusterConfig
from venice_core.controller import da_vinci, stores, versions
from venice_core.errors import RolloutStopped, VeniceError
from venice_core.hooks.api import HookContext
from venice_core.hooks.api import LifecycleFunction as F
from venice_core.hooks.executor import HookDecision, HookExecutor, Outcome
from venice_core.hooks.loader import load_hooks
from venice_core.hooks.records import first_asked_at, recorder, settled_answers
from venice_core.meta import MetadataStore
from venice_core.status import VersionStatus

DA_VINCI_GATE = F.PRE_START_OF_STORE_VERSION_INGESTION_FOR_DA_VINCI
DA_VINCI_SWAP = F.POST_START_OF_STORE_VERSION_INGESTION_FOR_DA_VINCI


@dataclass(frozen=True)
class Decision:
    """What the hooks decided at a step that can hold the rollout: PROCEED, ABORT or ROLLBACK, and why. (WAIT is
    no decision: the step is asked again.) It travels from the DAG's decision sensor to its stop tasks as XCom."""

    outcome: Outcome
    reason: str = ""
    regions: tuple[str, ...] = ()  # version creation's PROCEED: the regions it admits

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", Outcome(self.outcome))  # from XCom JSON too
        object.__setattr__(self, "regions", tuple(self.regions))

    @property
    def stops(self) -> bool:
        return self.outcome in (Outcome.ABORT, Outcome.ROLLBACK)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"outcome": self.outcome.value, "reason": self.reason}
        if self.regions:
            data["regions"] = list(self.regions)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Decision:
        return cls(Outcome(data["outcome"]), str(data.get("reason", "")), tuple(data.get("regions") or ()))


@dataclass
class Rollout:
    config: ClusterConfig
    meta: MetadataStore
    store: str
    push_job_id: str
    store_hook_configs: dict[str, str]
    progress: Callable[[str], None] = print
    sleep: Callable[[float], None] = time.sleep
    version: int | None = None
    executor: HookExecutor | None = None
    last_reason: str = ""  # why the hooks answered what they last answered
    # Answers of a round that asked several regions at once, each taken by its region's ask (`asked_together`).
    _answered: dict[tuple[str, str | None], HookDecision] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        hooks = load_hooks(self.config.hooks)
        if hooks:
            self.executor = HookExecutor(self.config.hooks, hooks, recorder(self.meta, self.push_job_id))

    def context(self, region: str | None = None) -> HookContext:
        status, approvals = None, {}
        if self.version:
            try:
                status = versions.job_status(self.meta, self.store, self.version)
                approvals = versions.approvals(self.meta, self.store, self.version)
            except versions.VersionNotFound:  # pre_store_version_creation: the version is about to be created
                order = stores.store_settings(self.meta, self.store).rollout_order
                status = versions.job_status_before_creation(self.meta, self.store, self.version, order)
        return HookContext(
            cluster=self.config.cluster_name,
            store=self.store,
            store_hook_configs=self.store_hook_configs,
            version=self.version,
            region=region,
            job_status=status,
            approvals=approvals,
        )

    @property
    def created(self) -> int:
        """The push's version, for the steps after its creation."""
        if self.version is None:
            raise VeniceError("this step needs the push's version, which is not created yet")
        return self.version

    def ensure_not_stopped(self) -> None:
        """A step of a push already stopped (ABORT, ROLLBACK, killed) must not act again. A retried or re-run step
        raises the recorded stop instead of asking the hooks anew, whose answer might now reverse the decision."""
        if self.version is None:
            return
        row = versions.get_version(self.meta, self.store, self.version)
        if row.lifecycle.stopped or (versions.push_finished(row) and row.status != VersionStatus.ONLINE):
            reason = row.lifecycle.reason
            raise RolloutStopped(
                f"the push has already stopped: version {self.version} is {row.status}"
                + (f": {reason}" if reason else "")
            )

    def ask_once(self, function: str, region: str | None = None) -> Outcome | None:
        """One invocation of a lifecycle function on every hook (what a sensor does at each poke)."""
        if self.executor is None:
            return Outcome.PROCEED
        decision = self._answered.pop((function, region), None) or self.executor.invoke(function, self.context(region))
        self.last_reason = decision.reason
        if decision.outcome not in (None, Outcome.PROCEED):
            where = f" in {region}" if region else ""
            self.progress(
                f"hooks answered {decision.outcome} at {function}{where}"
                + (f": {decision.reason}" if decision.reason else "")
            )
        return decision.outcome

    def ask(self, function: str, region: str | None = None) -> Outcome | None:
        """Invoke until the answer is not WAIT, every wait interval; past the maximum wait, ABORT."""
        waited = 0.0
        interval = self.config.hooks.wait_interval_seconds
        while True:
            outcome = self.ask_once(function, region)
            if outcome is not Outcome.WAIT:
                return outcome
            if waited + interval > self.config.hooks.wait_max_seconds:
                return self._gave_up(function, waited)
            self.sleep(interval)
            waited += interval

    def _gave_up(self, function: str, waited: float) -> Outcome:
        self.progress(f"{function} kept answering WAIT for {waited:.0f}s: giving up (ABORT)")
        self.last_reason = f"still WAIT after {waited:.0f}s, the maximum wait"
        return Outcome.ABORT

    def decide(self, function: str, region: str | None = None) -> Decision | None:
        """One ask of a decision step (what a sensor does at each poke): None on WAIT, to be asked again after the
        wait interval; else the decision. A WAIT streak past the maximum wait is an explicit ABORT (counted from
        the first persisted invocation, so it survives a restarted task or scheduler)."""
        outcome = self.ask_once(function, region)
        if outcome is Outcome.WAIT:
            since = first_asked_at(self.meta, self.push_job_id, function, region)
            waited = time.time() - since if since is not None else 0.0
            if waited < self.config.hooks.wait_max_seconds:
                return None
            outcome = self._gave_up(function, waited)
        if outcome in (None, Outcome.PROCEED):
            return Decision(Outcome.PROCEED)
        return Decision(outcome, self.last_reason)

    def decide_da_vinci_gate(self, region: str) -> Decision | None:
        """The Da Vinci ingestion gate of a region, when version creation left it WAITing: once the hooks let it,
        the region's clients may ingest."""
        if da_vinci.gate_open(self.meta, self.store, self.created, region):
            return Decision(Outcome.PROCEED)
        decision = self.decide(DA_VINCI_GATE, region)
        if decision is not None and decision.outcome is Outcome.PROCEED:
            da_vinci.open_gate(self.meta, self.store, self.created, region)
        return decision

    def decide_da_vinci_swap(self, region: str) -> Decision | None:
        """The Da Vinci swap: the region's live instances must have ingested the version, then the hooks are asked.
        Waiting on instances past the maximum wait, counted from the region's ingestion completing, is an ABORT."""
        waiting = da_vinci.pending(self.meta, self.store, region, self.created)
        if not waiting:
            return self.decide(DA_VINCI_SWAP, region)
        waited = time.time() - versions.job_status(self.meta, self.store, self.created).regions[region].updated_at
        if waited >= self.config.hooks.wait_max_seconds:
            return Decision(
                Outcome.ABORT,
                f"Da Vinci instances {', '.join(waiting)} had not ingested it after {waited:.0f}s, the maximum wait",
            )
        self.progress(
            f"waiting for Da Vinci instances in {region} to ingest version {self.version}: {', '.join(waiting)}"
        )
        return None

    @contextmanager
    def asked_together(self, function: str, regions: Sequence[str]) -> Iterator[None]:
        """Ask `function` in every region of a step at once (one round of the hooks' pool); inside, each region's
        `ask_once` (and `decide`) takes its answer from that round instead of asking again, so each region is decided
        from its own answer as it would be alone."""
        if self.executor is not None and regions:
            decisions = self.executor.invoke_all(function, [self.context(region) for region in regions])
            self._answered.update({(function, region): d for region, d in zip(regions, decisions, strict=True)})
        try:
            yield
        finally:
            self._answered.clear()

    def inform(self, function: str, region: str | None = None) -> None:
        self.inform_regions(function, [region])

    def inform_regions(self, function: str, regions: Sequence[str | None]) -> None:
        """An informational function, asked in every region at once."""
        if self.executor is not None:
            self.executor.invoke_all(function, [self.context(region) for region in regions])

    # Outcomes that stop the rollout.
    def swapped_regions(self) -> list[str]:
        """The regions that serve this push's version now, in rollout order (what a ROLLBACK returns)."""
        if self.version is None:
            return []
        serving = set(versions.regions_serving(self.meta, self.store, self.version))
        order = stores.store_settings(self.meta, self.store).rollout_order
        return [r for r in order if r in serving] + sorted(serving - set(order))

    def apply(self, decision: Decision, function: str, region: str | None = None) -> None:
        """Apply a decision: PROCEED goes on, ABORT and ROLLBACK stop the rollout (raising `RolloutStopped`)."""
        if decision.stops:
            self.last_reason = decision.reason
            self.stop(decision.outcome, function, region)

    def stop(self, outcome: Outcome, function: str, region: str | None = None) -> None:
        why = self.last_reason
        where = f"{function}" + (f" in {region}" if region else "") + (f" ({why})" if why else "")
        if outcome is Outcome.ROLLBACK and self.version:  # first end the push, so no step beside this one swaps it in
            versions.finish_push(self.meta, self.store, self.version, stopped=True)
        swapped = self.swapped_regions()
        if outcome is Outcome.ROLLBACK:
            # Every region serving the version goes back, in reverse rollout order, whichever task swapped it. A
            # region with no previous version (the store's first) then serves none: a rolled-back version must
            # never serve.
            unserved = []
            for back in reversed(swapped):
                now = versions.rollback_region(self.meta, self.store, back, to_no_version=True)
                self.progress(f"rolled {back} back to " + (f"version {now}" if now else "no version (none before)"))
                if not now:
                    unserved.append(back)
            if self.version:
                versions.set_version_status(
                    self.meta, self.store, self.version, VersionStatus.ROLLED_BACK, f"rolled back by a hook at {where}"
                )
            if self.version is None:  # stopped before the version was created
                result = "no version was created; every region keeps the version it served"
            elif unserved:
                verb = "serves" if len(unserved) == 1 else "serve"
                result = (
                    f"every region serves the version it served before; {', '.join(unserved)} {verb} no version "
                    "(there was none before)"
                )
            else:
                result = "every region serves the previous version"
            raise RolloutStopped(f"rolled back by a lifecycle hook at {where}; {result}")
        if self.version:
            versions.stop_push(self.meta, self.store, self.version, f"aborted by a hook at {where}")
        if self.version is None:
            raise RolloutStopped(f"aborted by a lifecycle hook at {where}; no version was created")
        served = ", ".join(swapped) or "no region"
        raise RolloutStopped(f"aborted by a lifecycle hook at {where}; the new version serves in {served}")

    def check(self, outcome: Outcome | None, function: str, region: str | None = None) -> None:
        if outcome is Outcome.ABORT or outcome is Outcome.ROLLBACK:
            self.stop(outcome, function, region)

    # The steps before the data push.
    def start_of_push_job(self) -> None:
        self.check(self.ask(F.VALIDATE_HOOK_CONFIG), F.VALIDATE_HOOK_CONFIG)
        self.check(self.ask(F.PRE_START_OF_PUSH_JOB), F.PRE_START_OF_PUSH_JOB)
        self.inform(F.POST_START_OF_PUSH_JOB)

    def decide_version_creation(self, number: int, rollout_order: list[str]) -> Decision | None:
        """One ask of `pre_store_version_creation` in every region for version `number` (a sensor's poke), each with
        the job status of the version about to be created (every region NOT_CREATED). A ROLLBACK from any region
        stops the push: VIP-4's "back to the version the store had before the push, in all regions", so no region
        may get it. An ABORT leaves its region out (as does a WAIT past the maximum wait). While a region answers
        WAIT: None, asked again; a region that has answered otherwise is not asked again (its answer stands). Else
        PROCEED with the regions admitted, or ABORT when none is."""
        settled = settled_answers(self.meta, self.push_job_id, F.PRE_STORE_VERSION_CREATION)
        decided: dict[str, Decision | None] = {}
        self.version = number
        try:
            with self.asked_together(F.PRE_STORE_VERSION_CREATION, [r for r in rollout_order if r not in settled]):
                for region in rollout_order:
                    if region in settled:
                        outcome, reason = settled[region]
                        decided[region] = Decision(outcome, reason if outcome is not Outcome.PROCEED else "")
                    else:
                        decided[region] = self.decide(F.PRE_STORE_VERSION_CREATION, region)
        finally:
            self.version = None
        rolled_back = [(r, d) for r, d in decided.items() if d is not None and d.outcome is Outcome.ROLLBACK]
        if rolled_back:
            return Decision(Outcome.ROLLBACK, "; ".join(f"{r}: {d.reason}" if d.reason else r for r, d in rolled_back))
        if any(d is None for d in decided.values()):
            return None
        admitted = tuple(r for r, d in decided.items() if d is not None and d.outcome is Outcome.PROCEED)
        if not admitted:
            return Decision(Outcome.ABORT, "; ".join(f"{r}: {d.reason}" for r, d in decided.items() if d and d.reason))
        return Decision(Outcome.PROCEED, regions=admitted)

    def open_da_vinci_gates(self, regions: list[str]) -> None:
        """VIP-4's first design recommendation: at version creation, `pre_start_of_store_version_ingestion_for_da_vinci`
        is asked once for every region, all in one round; where it proceeds, the region's Da Vinci clients may ingest
        at once (all regions together, not behind earlier regions' swaps). A WAIT leaves the region's gate to its own
        step, which asks again; ABORT or ROLLBACK in any region stops the push (ROLLBACK first, as within a region),
        before any gate opens."""
        closed = [r for r in regions if not da_vinci.gate_open(self.meta, self.store, self.created, r)]
        answers: dict[str, tuple[Outcome | None, str]] = {}
        with self.asked_together(DA_VINCI_GATE, closed):
            for region in closed:
                answers[region] = (self.ask_once(DA_VINCI_GATE, region), self.last_reason)
        for stop in (Outcome.ROLLBACK, Outcome.ABORT):
            for region, (outcome, reason) in answers.items():
                if outcome is stop:
                    self.last_reason = reason
                    self.stop(stop, DA_VINCI_GATE, region)
        for region, (outcome, _) in answers.items():
            if outcome is not Outcome.WAIT:
                da_vinci.open_gate(self.meta, self.store, self.created, region)
