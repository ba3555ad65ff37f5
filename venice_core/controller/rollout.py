"""The rollout of one push through VIP-4's steps, asking the lifecycle hooks at each one.

Each step is a method, so an orchestrator can run them one by one (the Airflow DAG runs each as a task, and its
sensors re-ask on WAIT); `venice push` runs them in order in one process, waiting in place on WAIT.

Outcomes: PROCEED goes on. ABORT stops this step and every later one: regions already swapped keep the new
version, the others keep the old one, and the version's status and reason say so. ROLLBACK returns every region
that already swapped to its previous version and marks the version ROLLED_BACK. A step that keeps answering WAIT
past `venice.store.lifecycle.hooks.wait.max.seconds` is taken as ABORT.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from venice_core.config import ClusterConfig
from venice_core.controller import da_vinci, stores, versions
from venice_core.controller.status import VersionStatus
from venice_core.errors import VeniceError
from venice_core.hooks.api import HookContext
from venice_core.hooks.executor import HookExecutor
from venice_core.hooks.loader import load_hooks
from venice_core.hooks.records import first_asked_at, recorder
from venice_core.jobs.input_files import read_input_schema
from venice_core.jobs.input_schema import input_value, match_value_schema
from venice_core.meta import MetadataStore

DA_VINCI_GATE = "pre_start_of_store_version_ingestion_for_da_vinci"
DA_VINCI_SWAP = "post_start_of_store_version_ingestion_for_da_vinci"


class RolloutStopped(VeniceError):
    """A hook answered ABORT or ROLLBACK: the push did not roll out everywhere (by an operator's decision)."""

    exit_code = 3


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
    swapped: list[str] = field(default_factory=list)
    executor: HookExecutor | None = None
    last_reason: str = ""  # why the hooks answered what they last answered

    def __post_init__(self) -> None:
        hooks = load_hooks(self.config.hooks)
        if hooks:
            self.executor = HookExecutor(self.config.hooks, hooks, recorder(self.meta, self.push_job_id))

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()

    def context(self, region: str | None = None) -> HookContext:
        status = versions.job_status(self.meta, self.store, self.version) if self.version else None
        return HookContext(
            cluster=self.config.cluster_name,
            store=self.store,
            store_hook_configs=self.store_hook_configs,
            version=self.version,
            region=region,
            job_status=status,
            approvals=versions.approvals(self.meta, self.store, self.version) if self.version else {},
        )

    def ensure_not_stopped(self) -> None:
        """A step of a push already stopped (ABORT, ROLLBACK, killed) must not act again. A retried or re-run step
        raises the recorded stop instead of asking the hooks anew, whose answer might now reverse the decision."""
        if self.version is None:
            return
        row = versions.get_version(self.meta, self.store, self.version)
        if versions.push_finished(row) and row.status != VersionStatus.ONLINE:
            reason = (row.details or {}).get("reason", "")
            raise RolloutStopped(
                f"the push has already stopped: version {self.version} is {row.status}"
                + (f": {reason}" if reason else "")
            )

    def ask_once(self, function: str, region: str | None = None) -> str | None:
        """One invocation of a lifecycle function on every hook (what a sensor does at each poke)."""
        if self.executor is None:
            return "PROCEED"
        decision = self.executor.invoke(function, self.context(region))
        self.last_reason = decision.reason
        if decision.outcome not in (None, "PROCEED"):
            where = f" in {region}" if region else ""
            self.progress(
                f"hooks answered {decision.outcome} at {function}{where}"
                + (f": {decision.reason}" if decision.reason else "")
            )
        return decision.outcome

    def ask(self, function: str, region: str | None = None) -> str | None:
        """Invoke until the answer is not WAIT, every wait interval; past the maximum wait, ABORT."""
        waited = 0.0
        interval = self.config.hooks.wait_interval_seconds
        while True:
            outcome = self.ask_once(function, region)
            if outcome != "WAIT":
                return outcome
            if waited + interval > self.config.hooks.wait_max_seconds:
                return self._gave_up(function, waited)
            self.sleep(interval)
            waited += interval

    def _gave_up(self, function: str, waited: float) -> str:
        self.progress(f"{function} kept answering WAIT for {waited:.0f}s: giving up (ABORT)")
        self.last_reason = f"still WAIT after {waited:.0f}s, the maximum wait"
        return "ABORT"

    def poke(self, function: str, region: str | None = None) -> bool:
        """One sensor poke: True once the hooks let the step go on, False to be asked again after the wait
        interval. ABORT and ROLLBACK stop the rollout, and so does a WAIT streak past the maximum wait (counted
        from the first persisted invocation, so it survives a restarted task or scheduler)."""
        outcome = self.ask_once(function, region)
        if outcome == "WAIT":
            since = first_asked_at(self.meta, self.push_job_id, function, region)
            waited = time.time() - since if since is not None else 0.0
            if waited >= self.config.hooks.wait_max_seconds:
                outcome = self._gave_up(function, waited)
        self.check(outcome, function, region)
        return outcome != "WAIT"

    def poke_da_vinci_gate(self, region: str) -> bool:
        """One poke of the Da Vinci ingestion gate: once the hooks let it, the region's clients may ingest."""
        if not self.poke(DA_VINCI_GATE, region):
            return False
        da_vinci.open_gate(self.meta, self.store, self.version, region)
        return True

    def poke_da_vinci_swap(self, region: str) -> bool:
        """One poke of the Da Vinci swap: the region's live instances must have ingested the version, then the
        hooks are asked."""
        return not self.da_vinci_pending(region) and self.poke(DA_VINCI_SWAP, region)

    def da_vinci_pending(self, region: str) -> list[str]:
        """The region's live Da Vinci instances yet to ingest this version. Waiting on them past the maximum wait,
        counted from the region's ingestion completing, is an ABORT."""
        waiting = da_vinci.pending(self.meta, self.store, region, self.version)
        if waiting:
            waited = time.time() - versions.job_status(self.meta, self.store, self.version).regions[region].updated_at
            if waited >= self.config.hooks.wait_max_seconds:
                self.last_reason = (
                    f"Da Vinci instances {', '.join(waiting)} had not ingested it after {waited:.0f}s, the maximum wait"
                )
                self.stop("ABORT", DA_VINCI_SWAP, region)
            self.progress(
                f"waiting for Da Vinci instances in {region} to ingest version {self.version}: {', '.join(waiting)}"
            )
        return waiting

    def inform(self, function: str, region: str | None = None) -> None:
        if self.executor is not None:
            self.executor.invoke(function, self.context(region))

    # Outcomes that stop the rollout.
    def stop(self, outcome: str, function: str, region: str | None = None) -> None:
        why = self.last_reason
        where = f"{function}" + (f" in {region}" if region else "") + (f" ({why})" if why else "")
        if outcome == "ROLLBACK":
            for swapped in reversed(self.swapped):
                versions.rollback_region(self.meta, self.store, swapped)
                self.progress(f"rolled {swapped} back")
            if self.version:
                versions.set_version_status(
                    self.meta, self.store, self.version, VersionStatus.ROLLED_BACK, f"rolled back by a hook at {where}"
                )
                versions.finish_push(self.meta, self.store, self.version)
            raise RolloutStopped(
                f"rolled back by a lifecycle hook at {where}; every region serves the previous version"
            )
        if self.version:
            versions.stop_push(self.meta, self.store, self.version, f"aborted by a hook at {where}")
        served = ", ".join(self.swapped) or "no region"
        raise RolloutStopped(f"aborted by a lifecycle hook at {where}; the new version serves in {served}")

    def check(self, outcome: str | None, function: str, region: str | None = None) -> None:
        if outcome in ("ABORT", "ROLLBACK"):
            self.stop(outcome, function, region)

    # The steps before the data push.
    def start_of_push_job(self) -> None:
        self.check(self.ask("validate_hook_config"), "validate_hook_config")
        self.check(self.ask("pre_start_of_push_job"), "pre_start_of_push_job")
        self.inform("post_start_of_push_job")

    def register_schema(self, input_path: str, key_field: str, value_field: str) -> int | None:
        """Step `schema_registration`, before the version exists: the id of the value schema the input is written
        with. When the store auto-registers and the input needs a new schema, it is registered here, through
        pre_schema_registration (ABORT: RolloutStopped with the hooks' reason, nothing registered) and
        post_schema_registration. None when the input cannot be read here (a URL): the job matches it, and
        registers through the same hooks. Input that fits no schema is refused now, as the job would refuse it."""
        struct = read_input_schema(input_path)
        if struct is None:
            return None
        info = stores.describe_store(self.meta, self.store)
        _, value_struct, single_value = input_value(struct, key_field, value_field)
        try:
            schema_id, _ = match_value_schema(
                self.meta, self.config, info, value_struct, single_value, value_field, self.push_job_id
            )
        except stores.SchemaRefused as exc:
            raise RolloutStopped(str(exc)) from None
        if schema_id not in {entry["id"] for entry in info["value_schemas"]}:
            self.progress(f"registered value schema {schema_id} of '{self.store}' from the input")
        return schema_id

    def regions_for_new_version(self, rollout_order: list[str]) -> list[str]:
        """The regions `pre_store_version_creation` admits (ABORT or ROLLBACK leaves a region out)."""
        admitted = [r for r in rollout_order if self.ask("pre_store_version_creation", r) == "PROCEED"]
        if not admitted:
            self.stop("ABORT", "pre_store_version_creation")
        return admitted

    # Per region, after the data push.
    def swap_region(
        self, region: str, wait_for_ingestion: Callable[[str], None], wait_until_served: Callable[[str], None]
    ) -> None:
        self.check(self.ask(DA_VINCI_GATE, region), DA_VINCI_GATE, region)
        da_vinci.open_gate(self.meta, self.store, self.version, region)
        wait_for_ingestion(region)
        self.inform("post_store_version_leader_replication", region)
        while self.da_vinci_pending(region):
            self.sleep(min(self.config.hooks.wait_interval_seconds, 5.0))
        self.check(self.ask(DA_VINCI_SWAP, region), DA_VINCI_SWAP, region)
        self.check(self.ask("pre_store_version_swap", region), "pre_store_version_swap", region)
        versions.swap_region(self.meta, self.store, region, self.version)
        self.swapped.append(region)
        wait_until_served(region)
        self.progress(f"swapped {region} to version {self.version}")
        self.check(self.ask("post_store_version_swap", region), "post_store_version_swap", region)

    def end_of_push_job(self) -> None:
        self.check(self.ask("pre_end_of_push_job"), "pre_end_of_push_job")
        self.inform("post_end_of_push_job")
