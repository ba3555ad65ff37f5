"""`venice rollout ...`: watch a store's latest rollout run, approve or reject a region's swap, abort a rollout."""

from __future__ import annotations

import getpass
import json
import time
from typing import Any

import typer

from venice_core.cli.context import metadata
from venice_core.controller import da_vinci, stores, versions
from venice_core.controller.hook_decisions import HookDecisions
from venice_core.controller.job import job_reply
from venice_core.errors import ComponentError, VeniceError
from venice_core.hooks.records import describe, invocations, is_notable
from venice_core.orchestration.airflow.api import AirflowApi
from venice_core.orchestration.airflow.run_following import failure_reasons, steps_not_taken
from venice_core.rollout.airflow_states import ENDED, SKIPPED, AirflowState
from venice_core.rollout.names import push_job_id, region_group, rollout_dag_id
from venice_core.utils.waiting import poll_until

rollout_app = typer.Typer(help="Follow and steer rollouts (the stores' Airflow DAG runs).", no_args_is_help=True)
StoreArg = typer.Argument(..., help="Store name.")


class NoRollout(VeniceError):
    pass


@rollout_app.command("status")
def status(store: str = StoreArg, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The store's latest rollout run: its state, each step's state, the hooks' answers, what each region serves."""
    with metadata() as (config, meta):
        info = stores.describe_store(meta, store)
        if not config.airflow.enabled:
            raise NoRollout(
                f"`venice rollout status` follows the store's Airflow runs, and this platform runs without Airflow "
                f"(airflow.enabled=false): `venice store show {store}` shows each version's status"
            )
        api = AirflowApi(config)
        run = api.latest_run(rollout_dag_id(store))
        if run is None:
            raise NoRollout(f"store '{store}' has no rollout run yet (start one with `venice push {store} ...`)")
        job_id = push_job_id(store, run["dag_run_id"], run.get("conf"))
        tasks = sorted(
            api.task_instances(rollout_dag_id(store), run["dag_run_id"]), key=lambda t: t["start_date"] or "~"
        )
        failed = [t["task_id"] for t in tasks if t["state"] == AirflowState.FAILED]
        failures = failure_reasons(api, rollout_dag_id(store), run["dag_run_id"], failed)
        version = info.version_of_push(job_id)
        answers = [r for r in invocations(meta, job_id) if is_notable(r)]
        instances = da_vinci.instances(meta, store)
        job = job_reply(meta, store, version.number) if version else None
        readiness = versions.replica_readiness(meta, store, version.number) if version else {}
    report = {
        "run_id": run["dag_run_id"],
        "state": run["state"],
        "start_date": run.get("start_date"),
        "end_date": run.get("end_date"),
        "version": None if version is None else {k: version.to_json()[k] for k in ("number", "status", "reason")},
        "serving": info.serving(),
        # Why the run failed, as its failed steps kept it (a run that failed before a version existed says it only
        # here): "<task>: <reason>", each failed step's also under its step.
        "error": "; ".join(f"{task}: {why}" for task, why in failures.items() if why) or None,
        "steps": [_step(t, failures.get(t["task_id"])) for t in tasks],
        "hook_answers": [
            {
                "hook": r.hook_class,
                "function": r.function,
                "region": r.region,
                "outcome": r.outcome,
                "reason": r.error or r.reason,
            }
            for r in answers
        ],
        "da_vinci_instances": instances,
        "job": job,  # VIP-4's /job reply: each region's status and the time it last changed
        # Each region's ready replicas of the version, of how many are placed.
        "replicas": {region: {"ready": ready, "placed": placed} for region, (ready, placed) in readiness.items()},
    }
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    typer.echo(f"{store}: run {report['run_id']} {report['state']} (started {report['start_date']})")
    if version:
        typer.echo(f"version {version.number}: {version.status}" + (f" ({version.reason})" * bool(version.reason)))
    typer.echo("serving: " + ", ".join(f"{r}=v{n}" for r, n in report["serving"].items()))
    for region, state in (job or {}).get("regions", {}).items():
        ready, placed = readiness.get(region, (0, 0))
        replicas = f", {ready} of {placed} replicas ready" if placed else ""
        typer.echo(f"  {region}: {state['status']} since {_clock(state['updated_at'])}{replicas}")
    not_run = [step for step in report["steps"] if step["state"] in SKIPPED]  # one line, as `venice push` says it
    for step in report["steps"]:
        if step["state"] not in SKIPPED:
            typer.echo(f"  {step['task']:<40} {step['state']}" + (f": {step['error']}" if "error" in step else ""))
    if not_run:
        typer.echo(f"  {steps_not_taken(len(not_run), report['state'])}")
    for record in answers:
        detail = record.error or record.reason
        typer.echo(f"  {describe(record)}" + (f": {detail}" if detail else ""))
    for row in instances:
        state = "live" if row["live"] else "gone"
        typer.echo(f"Da Vinci {row['instance']} in {row['region']}: v{row['version']} {row['status'] or '-'} ({state})")


def _step(task: dict[str, Any], error: str | None) -> dict[str, Any]:
    step = {"task": task["task_id"], "state": task["state"] or "none", "tries": task["try_number"]}
    return {**step, "error": error} if error else step


def _clock(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch)) if epoch else "-"


@rollout_app.command("approve")
def approve(
    store: str = StoreArg,
    region: str = typer.Option(..., "--region", help="The region whose swap is decided."),
    reject: bool = typer.Option(False, "--reject", help="Reject the swap: the rollout aborts at this region."),
    version: int | None = typer.Option(None, "--version", help="The version (default: the push in flight)."),
) -> None:
    """Approve (or reject) swapping a region to the new version, for the ManualApproval hook. Answers the region's
    human-in-the-loop task when its Airflow run waits on it; records the decision directly otherwise."""
    with metadata() as (config, meta):
        order = stores.store_settings(meta, store).rollout_order
        if region not in order:
            raise NoRollout(f"store '{store}' has no region '{region}' (regions: {', '.join(order)})")
        version = version or versions.version_in_flight(meta, store)
        if version is None:
            raise NoRollout(f"store '{store}' has no push in flight to approve")
        option, done = ("Reject", "rejected") if reject else ("Approve", "approved")
        if config.airflow.enabled and _answer_approval_task(AirflowApi(config), store, region, option):
            typer.echo(f"{done} the swap of '{store}' version {version} in {region} (its Airflow run goes on)")
            return
        versions.record_approval(meta, store, version, region, approved=not reject, by="venice CLI")
    typer.echo(f"{done} the swap of '{store}' version {version} in {region}")


def _answer_approval_task(api: AirflowApi, store: str, region: str, option: str) -> bool:
    run = api.latest_run(rollout_dag_id(store))
    task_id = f"{region_group(region)}.approval"
    if (
        run is None
        or api.task_states(rollout_dag_id(store), run["dag_run_id"]).get(task_id) != AirflowState.AWAITING_INPUT
    ):
        return False
    api.respond(rollout_dag_id(store), run["dag_run_id"], task_id, option)
    return True


# After an abort, the run takes its stop's way at its next step: a decision sensor's next poke (every wait interval),
# a running step when it ends. Past this much more, the run is marked failed (Airflow stops its running tasks).
ABORT_GRACE_SECONDS = 30.0


@rollout_app.command("abort")
def abort(
    store: str = StoreArg,
    rollback: bool = typer.Option(
        False, "--rollback", help="Roll every region that swapped back to the version it served before."
    ),
) -> None:
    """Stop the store's rollout in flight on purpose, as a lifecycle hook's ABORT would (the regions already swapped
    keep the new version, the others the old one), or with --rollback as its ROLLBACK (every region back to the
    version it served before). The store takes the next push at once; the Airflow run ends taking that way (its
    `<step>_abort` or `<step>_rollback` task in the grid)."""
    how = "`venice rollout abort" + (" --rollback`" if rollback else "`")
    who = getpass.getuser()
    with metadata() as (config, meta):
        settings = stores.store_settings(meta, store)  # an unknown store: one clear error
        number = versions.version_in_flight(meta, store)
        job = None
        if number is not None:  # the stop first, whatever Airflow says: the store is released at once
            job = versions.get_version(meta, store, number).push_job_id or ""
            rollout = HookDecisions(
                config, meta, store, job, settings.hook_configs, progress=typer.echo, version=number
            )
            summary = rollout.stop_by_operator(rollback, who, how)
            typer.echo(f"{summary}; version {number} is {versions.get_version(meta, store, number).status}")
        if not config.airflow.enabled:
            if number is None:
                raise NoRollout(f"store '{store}' has no rollout in flight")
            return
        try:
            api = AirflowApi(config)
            run = _run_of(api, store, job)
        except ComponentError as exc:
            if number is None:
                raise
            typer.echo(f"warning: the push is stopped, but its Airflow run could not be ended: {exc}", err=True)
            return
        if run is None:
            if number is None:
                raise NoRollout(f"store '{store}' has no rollout in flight")
            return  # a push of another process (`venice push --local`): it stops at its next check
        if number is None:  # a run before its version exists (a WAIT at version creation): nothing to undo
            api.set_run_state(rollout_dag_id(store), run, "failed", f"aborted by {who} with {how}")
            typer.echo(f"ended run {run} of '{store}' before it created a version: nothing to undo")
            return
        typer.echo(_end_run(api, store, run, config.hooks.wait_interval_seconds + ABORT_GRACE_SECONDS, summary))


def _run_of(api: AirflowApi, store: str, job: str | None) -> str | None:
    """The store's running rollout run: the one of push job `job`, or (None) one that has no version yet."""
    dag = rollout_dag_id(store)
    for run_id in api.active_runs(dag):
        run = api.run(dag, run_id)
        if run["state"] == AirflowState.RUNNING and (job is None or push_job_id(store, run_id, run.get("conf")) == job):
            return run_id
    return None


def _end_run(api: AirflowApi, store: str, run: str, patience: float, summary: str) -> str:
    """Wait for the aborted run to take its stop's way; past `patience`, mark it failed. What happened, as a line."""
    dag = rollout_dag_id(store)
    if not poll_until(lambda: api.run_state(dag, run) in ENDED, timeout=patience, interval=1.0):
        api.set_run_state(dag, run, "failed", summary)
        return f"run {run} was still at a step that takes long: marked failed in Airflow"
    states = api.task_states(dag, run)
    ways = sorted(t for t, s in states.items() if t.endswith(("_abort", "_rollback")) and s not in SKIPPED)
    failed = sorted(t for t, s in states.items() if s == AirflowState.FAILED)
    return f"run {run} ended at {', '.join(ways or failed) or 'its next step'}"
