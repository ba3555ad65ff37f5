"""What a push's rollout asks of the lifecycle hooks, and what their answers do (the steps themselves are the list
in `rollout.steps`, which both `venice push --local` and the Airflow DAG run).

`ask` waits in place while the hooks answer WAIT; `decide` asks once (a sensor's poke) and gives None for WAIT,
else a `Decision`. `apply` carries a decision out: PROCEED goes on. ABORT stops this step and every later one:
regions already swapped keep the new version, the others keep the old one, and the version's status and reason
say so. ROLLBACK ends the push, then returns every region serving the version to its previous one (a region with
none, on a store's first version, then serves no version) and marks the version ROLLED_BACK. WAIT is asked again
for as long as it is answered; only where an operator set `venice.store.lifecycle.hooks.wait.max.seconds` (the
cluster's or the store's, `hooks.wait_limit`) does a longer streak end as an ABORT naming that limit.
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
from venice_core.hooks.wait_limit import WaitLimit, wait_limit
from venice_core.meta import MetadataStore
from venice_core.model.status import VersionStatus

DA_VINCI_GATE = F.PRE_START_OF_STORE_VERSION_INGESTION_FOR_DA_VINCI
DA_VINCI_STARTED = F.POST_START_OF_STORE_VERSION_INGESTION_FOR_DA_VINCI


@dataclass(frozen=True)
class Decision:
    """What the hooks decided at a step that can hold the rollout: PROCEED, ABORT or ROLLBACK, and why. (WAIT is
    no decision: the step is asked again.) It travels from the DAG's decision sensor to its stop tasks as XCom."""

    outcome: Outcome
    reason: str = ""
    regions: tuple[str, ...] = ()  # version creation's PROCEED: the regions it admits
    by_operator: bool = False  # an operator's stop (`venice rollout abort`), already applied

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
        if self.by_operator:
            data["by_operator"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Decision:
        return cls(
            Outcome(data["outcome"]),
            str(data.get("reason", "")),
            tuple(data.get("regions") or ()),
            bool(data.get("by_operator", False)),
        )


@dataclass
class HookDecisions:
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
    _said_waiting: dict[str, list[str]] = field(default_factory=dict)  # region -> the clients last said waited on
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

    def _status(self) -> str:
        return versions.get_version(self.meta, self.store, self.created).status

    def ensure_not_stopped(self, cleared: bool = False) -> None:
        """A step of a push already stopped (ABORT, ROLLBACK, killed) must not act again. A retried or re-run step
        raises the recorded stop instead of asking the hooks anew, whose answer might now reverse the decision. A
        step an operator cleared (`cleared`) runs only while its push goes on: once a push is over, whatever its
        outcome, nothing of it runs again (no swap back to a superseded version, no second announcement)."""
        if self.version is None:
            return
        try:
            row = versions.get_version(self.meta, self.store, self.version)
        except versions.VersionNotFound:
            raise RolloutStopped(f"the push is over: its version {self.version} was retired since") from None
        if cleared and versions.push_finished(row):
            raise RolloutStopped(
                f"the push is over (version {self.version} is {row.status}): a step cleared afterwards does not run "
                "again; to push again, trigger a new run"
            )
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

    @property
    def wait_limit(self) -> WaitLimit | None:
        """How long a step may keep answering WAIT (None: for as long as it is answered)."""
        return wait_limit(self.config.hooks, self.store_hook_configs)

    def ask(self, function: str, region: str | None = None) -> Outcome | None:
        """Invoke until the answer is not WAIT, every wait interval; past a configured maximum wait, ABORT."""
        waited = 0.0
        interval = self.config.hooks.wait_interval_seconds
        limit = self.wait_limit
        while True:
            outcome = self.ask_once(function, region)
            if outcome is not Outcome.WAIT:
                return outcome
            if limit is not None and waited + interval > limit.seconds:
                return self._gave_up(function, waited, limit)
            self.sleep(interval)
            waited += interval

    def _gave_up(self, function: str, waited: float, limit: WaitLimit) -> Outcome:
        self.progress(f"{function} kept answering WAIT for {waited:.0f}s: giving up (ABORT)")
        self.last_reason = limit.reason(waited)
        return Outcome.ABORT

    def decide(self, function: str, region: str | None = None) -> Decision | None:
        """One ask of a decision step (what a sensor does at each poke): None on WAIT, to be asked again after the
        wait interval; else the decision. With a maximum wait configured, a WAIT streak past it is an explicit ABORT
        (counted from the first persisted invocation, so it survives a restarted task or scheduler)."""
        outcome = self.ask_once(function, region)
        limit = self.wait_limit
        if outcome is Outcome.WAIT:
            if limit is None:
                return None
            since = first_asked_at(self.meta, self.push_job_id, function, region)
            waited = time.time() - since if since is not None else 0.0
            if waited < limit.seconds:
                return None
            outcome = self._gave_up(function, waited, limit)
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

    def da_vinci_clients_serve(self, region: str) -> bool:
        """The region's Da Vinci swap, right before its servers' (VIP-4: a region's clients serve the new version
        before its servers do, and after every gate of the region's swap has let it): the region's clients are let
        swap, each serving the version as soon as it has it and reporting that it does. True once every live client
        serves it, or once `davinci.swap.timeout.seconds` have passed: a client that has not reported holds the
        swap no longer, and the job status lists it (`da_vinci_not_serving`) for every hook asked after."""
        opened = da_vinci.open_swap(self.meta, self.store, self.created, region)
        waiting = da_vinci.not_serving(self.meta, self.store, region, self.created)
        if not waiting:
            return True
        timeout = self.config.rollout.davinci_swap_timeout_seconds
        if time.time() - opened < timeout:
            if waiting != self._said_waiting.get(region):  # said once per change, not at every check
                self._said_waiting[region] = waiting
                self.progress(
                    f"waiting for Da Vinci instances in {region} to serve version {self.version}: {', '.join(waiting)}"
                )
            return False
        self.progress(
            f"Da Vinci instances in {region} do not serve version {self.version} after {timeout:g}s: "
            f"{', '.join(waiting)}; {region}'s servers swap without them (the job status lists them)"
        )
        return True

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
        """Apply a decision: PROCEED goes on, ABORT and ROLLBACK stop the rollout (raising `RolloutStopped`). An
        operator's stop was applied when it was made: it is only raised."""
        if decision.by_operator:
            raise RolloutStopped(f"{decision.reason}; version {self.version} is {self._status()}")
        if decision.stops:
            self.last_reason = decision.reason
            self.stop(decision.outcome, function, region)

    def stop(self, outcome: Outcome, function: str, region: str | None = None) -> None:
        """A hook's ABORT or ROLLBACK at `function` (in `region`): applied, then raised as `RolloutStopped`."""
        why = self.last_reason
        where = f"{function}" + (f" in {region}" if region else "") + (f" ({why})" if why else "")
        raise RolloutStopped(self._stop(outcome, "by a lifecycle hook at", "by a hook at", where))

    def stop_by_operator(self, rollback: bool, who: str, how: str) -> str:
        """An operator's stop of the push in flight (`venice rollout abort [--rollback]`), applied as a hook's ABORT
        or ROLLBACK would be, and recorded on the version, so that the orchestrator's run takes that way at its next
        step (`operator_decision`). Returns what became of the version and the regions."""
        outcome = Outcome.ROLLBACK if rollback else Outcome.ABORT
        by = f"by an operator ({who}: {how})"
        versions.record_operator_stop(self.meta, self.store, self.created, outcome.value, by)
        return self._stop(outcome, by, by, "")

    def operator_decision(self) -> Decision | None:
        """The stop an operator made of this push (`stop_by_operator`), as the decision a step's orchestrator takes:
        already applied, its reason made from the stop's own record (written first, so never half there)."""
        if self.version is None:
            return None
        stop = versions.get_version(self.meta, self.store, self.version).lifecycle.operator_stop
        if not stop:
            return None
        outcome = Outcome(stop["outcome"])
        verb = "rolled back" if outcome is Outcome.ROLLBACK else "aborted"
        return Decision(outcome, f"{verb} {stop['by']}", by_operator=True)

    def _stop(self, outcome: Outcome, said_by: str, recorded_by: str, where: str) -> str:
        """Apply an ABORT or a ROLLBACK; what became of the version and the regions, for the stop's error. The
        version records why (`recorded_by` and `where`)."""
        at = f" {where}" if where else ""
        if outcome is Outcome.ROLLBACK and self.version:  # first end the push, so no step beside this one swaps it in
            versions.finish_push(
                self.meta, self.store, self.version, stopped=True, reason=f"rolled back {recorded_by}{at}"
            )
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
                    self.meta, self.store, self.version, VersionStatus.ROLLED_BACK, f"rolled back {recorded_by}{at}"
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
            return f"rolled back {said_by}{at}; {result}"
        if self.version:
            versions.stop_push(self.meta, self.store, self.version, f"aborted {recorded_by}{at}")
        if self.version is None:
            return f"aborted {said_by}{at}; no version was created"
        served = ", ".join(swapped) or "no region"
        return f"aborted {said_by}{at}; the new version serves in {served}"

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
