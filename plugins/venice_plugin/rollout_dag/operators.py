"""The rollout DAG's operators of its own: a person's approval of a region's swap, the Spark push job."""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk.exceptions import AirflowFailException

from venice_core.controller import versions
from venice_core.hooks.builtin import ManualApproval
from venice_core.meta.context import metadata
from venice_core.rollout.steps import job_request
from venice_core.spark.specs.job_result import JobResult, refusal
from venice_core.spark.submit import push_job_spec, standalone
from venice_plugin.rollout_dag.task_inputs import created_version, keep_failure, result_file, step_inputs


class SwapApprovalOperator(HITLOperator):
    """A person approves or rejects a region's swap in the Airflow UI (Required Actions), when the ManualApproval
    hook asks for it; the decision is recorded on the version, where the hook reads it at pre_swap. Regions the
    store's `manual.approval.regions` leaves out pass at once."""

    APPROVE, REJECT = "Approve", "Reject"

    def __init__(self, *, store: str, region: str, **kwargs: Any) -> None:
        version = "{{ ti.xcom_pull(task_ids='create_version')['version'] }}"
        super().__init__(
            subject=f"Swap '{store}' to its new version in {region}?",
            body=f"Version {version} of '{store}' is ingested in {region}. Approve to let the rollout swap it in; "
            "reject to abort the rollout at this region.",
            options=[self.APPROVE, self.REJECT],
            multiple=False,
            **kwargs,
        )
        self.store, self.region = store, region

    def execute(self, context: Any) -> Any:
        with step_inputs(self.store, context, self.region) as inputs:
            ctx = inputs.rollout.context(self.region)
            if (
                not ManualApproval(inputs.rollout.config.hooks.configs).needs_approval(ctx)
                or self.region in ctx.approvals
            ):
                return None
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        result = super().execute_complete(context, event)
        user = event.get("responded_by_user") or {}
        created = created_version(context)
        with metadata() as (_, meta):
            versions.record_approval(
                meta,
                self.store,
                created.number if created else 0,
                self.region,
                approved=result["chosen_options"] == [self.APPROVE],
                by=user.get("name") or user.get("id") or "an Airflow user",
            )
        return result


class PushJobOperator(SparkSubmitOperator):
    """The Spark push job, as `spark.submit.push_job_spec` renders it for this run (the same spec spark-submit
    runs in `venice push --local`), on the spec's master: the config's `spark.master` (which the `spark_default`
    connection names too) unless the push's `spark.master` conf names another. Input it refuses (it writes why to
    its result file) ends the push at once: the version is killed with the job's reason and the step fails without
    retries, since the same input would be refused again. Any other failure is retried like every step."""

    def __init__(self, *, store: str, **kwargs: Any) -> None:
        super().__init__(application="", conn_id="spark_default", **kwargs)
        self.store = store
        self.master: str | None = None  # the spec's, once `execute` has rendered it

    def _get_hook(self) -> SparkSubmitHook:
        """The connection's hook (its deploy mode), submitting to the spec's master: spark-submit takes `--master`
        (the connection's) over a `--conf spark.master`, and the spec's py-files are for its master."""
        hook = super()._get_hook()
        if self.master:
            hook._connection["master"] = self.master
        return hook

    def execute(self, context: Any) -> None:
        """Run the job; its result (what END_OF_PUSH reports) is the task's XCom: the driver writes it to a file on
        this worker's disk, and the step that reads it may run on another Celery worker, on another machine."""
        created = created_version(context)
        if created is None:
            raise AirflowFailException("no version was created for this run")
        with step_inputs(self.store, context) as inputs:  # a push stopped meanwhile writes nothing more
            results = result_file(inputs.rollout.config, created.push_job_id)
            spec = push_job_spec(inputs.rollout.config, job_request(inputs.request, created), results)
        results.unlink(missing_ok=True)  # a previous try's result is not this one's
        self.application, self.name, self.conf = spec.application, spec.name, dict(spec.conf)
        self.application_args, self._driver_memory = list(spec.args), spec.driver_memory
        self.py_files = ",".join(spec.py_files) or None  # the package the executors import, on a cluster
        self.master = spec.master
        self.env_vars = spec.env or None  # the job's Kafka credentials file (a path), for its driver
        self.properties_file = spec.properties_file  # a secured cluster's Spark settings and secret (a path)
        # An earlier try's application still on a standalone master (its driver's host cut off: nothing told the
        # master) holds the executors this one needs: killed first.
        killed = standalone.kill_applications(inputs.rollout.config, spec.master, spec.name)
        if killed is None:
            self.log.warning("the Spark master's web UI does not answer: an earlier try's application is not killed")
        elif killed:
            self.log.warning("killed the earlier try's Spark application %s: its executors' cores are free", killed)
        try:
            super().execute(context)
        except Exception as exc:
            refused = refusal(results)
            if not refused:
                raise
            reason = f"the push job refused its input: {refused}"
            with metadata() as (_, meta):
                versions.stop_push(meta, self.store, created.number, reason)
            keep_failure(context, reason)
            raise AirflowFailException(reason) from exc
        try:
            context["ti"].xcom_push(key="return_value", value=JobResult.read(results).to_json())
        finally:
            results.unlink(missing_ok=True)
