"""The steps of a push, defined once: an ordered list, each step with its kind and its `run`.

Both orchestrators read this list. `venice push --local` runs it in one process (`run_in_process`: a decision
that answers WAIT is asked again in place); the Airflow DAG (`venice_plugin.rollout_dag`) renders each step as tasks:
an ACTION as a task, a CONDITION as a sensor, a DECISION as one sensor that branches itself (WAIT = poke again;
decided, it takes the next step, or the step's `abort` or `rollback` task). A test checks the DAG's tasks against
this list.

Steps run again safely (a retried or re-run task): version creation resumes its push's version, the control
messages and the Spark job write with GUIDs derived from the push job (ingestion skips what it already has), and
every step of a push that has already stopped raises the recorded stop (`HookDecisions.ensure_not_stopped`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from venice_core.client.serving import wait_until_served
from venice_core.controller import instances, repush_config, stores, versions
from venice_core.controller.hook_decisions import DA_VINCI_GATE, DA_VINCI_STARTED, Decision, HookDecisions
from venice_core.errors import ConfigError, IngestionFailed, RolloutStopped, VeniceError
from venice_core.hooks.api import HOOK_FUNCTIONS, LifecycleFunction, StoreVersionLifecycleEventOutcome
from venice_core.hooks.api import LifecycleFunction as F
from venice_core.hooks.executor import Outcome
from venice_core.model.status import ExecutionStatus
from venice_core.protocol.compression import CompressionStrategy
from venice_core.pubsub.control import send_end_of_push, send_start_of_push
from venice_core.rollout import compression_dictionary
from venice_core.rollout.compression_dictionary import TrainedDictionary
from venice_core.rollout.push_confs import check_push_confs
from venice_core.spark.inputs.input_files import check_readable, read_input_schema
from venice_core.spark.inputs.input_schema import input_value, match_value_schema
from venice_core.spark.specs.job_result import JobResult
from venice_core.spark.submit import PushJobRequest

INGESTION_TIMEOUT_SECONDS = 3600
WAITING_SAID_EVERY_SECONDS = 30.0
# In process (`venice push --local`) a condition is checked this often, not at a sensor's poke interval: a query
# of the metadata store costs milliseconds, and a push's last seconds are spent waiting on it.
IN_PROCESS_POLL_SECONDS = 0.25

log = logging.getLogger(__name__)


class StepKind(StrEnum):
    ACTION = "action"  # runs once
    ADMISSION = "admission"  # is the region part of this push? (the DAG branches past a region left out)
    CONDITION = "condition"  # waits for the platform (a region's ingestion); asks no hook
    DECISION = "decision"  # the hooks decide: WAIT is asked again, then PROCEED, ABORT or ROLLBACK
    SPARK = "spark"  # the push job: spark-submit, or the DAG's SparkSubmitOperator
    APPROVAL = "approval"  # a person approves a region's swap in Airflow's UI (only with ManualApproval configured)
    ANNOUNCE = "announce"  # tells the store's consumers its new version serves everywhere (the DAG: an asset event)


class Scope(StrEnum):
    PUSH = "push"  # once per push
    EVERY_REGION = "every_region"  # for every region of the push at once, right after version creation
    REGION = "region"  # for each region, one region after the other in rollout order


@dataclass(frozen=True)
class PushRequest:
    """What a user asked to push (`venice push` or the DAG run's params)."""

    store: str
    input_path: str
    key_field: str = "key"
    value_field: str = "value"
    confs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CreatedVersion:
    """What version creation made: the version, its partitions and the regions it goes to (XCom in the DAG), and
    the confs its job runs with when creation pinned them (a repush's source and end offsets; empty: the
    request's)."""

    number: int
    partitions: int
    regions: list[str]
    push_job_id: str
    job_confs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.number,
            "partitions": self.partitions,
            "regions": list(self.regions),
            "push_job_id": self.push_job_id,
            "job_confs": dict(self.job_confs),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CreatedVersion:
        return cls(
            int(data["version"]),
            int(data["partitions"]),
            list(data["regions"]),
            str(data["push_job_id"]),
            dict(data.get("job_confs") or {}),
        )


def job_request(request: PushRequest, created: CreatedVersion) -> PushJobRequest:
    """What the push job is asked, for a push request and the version created for it (with the confs version
    creation pinned, a repush's)."""
    return PushJobRequest(
        request.store,
        created.number,
        request.input_path,
        request.key_field,
        request.value_field,
        created.push_job_id,
        created.job_confs or request.confs,
    )


@dataclass
class StepInputs:
    """What a step's run gets: the push's rollout, the request, and what earlier steps produced."""

    rollout: HookDecisions
    request: PushRequest
    created: CreatedVersion | None = None
    region: str | None = None
    job_result: JobResult | None = None  # what the push job wrote, for END_OF_PUSH
    admitted: tuple[str, ...] = ()  # the regions `pre_version_creation` admitted, for version creation
    dictionary: TrainedDictionary | None = None  # a ZSTD_WITH_DICT store's, for version creation's START_OF_PUSH

    @property
    def version(self) -> CreatedVersion:
        if self.created is None:
            raise VeniceError("this step needs the created version")
        return self.created

    @property
    def in_region(self) -> str:
        """The region a region step runs in."""
        if self.region is None:
            raise VeniceError("this step runs in a region")
        return self.region


def _run_by_orchestrator(s: StepInputs) -> None:
    """A step the orchestrator runs itself (the Spark job, a person's approval), never through `Step.run`."""
    raise VeniceError("this step is run by the orchestrator")


@dataclass(frozen=True)
class Step:
    name: str
    kind: StepKind
    scope: Scope = Scope.PUSH
    run: Callable[[StepInputs], Any] = _run_by_orchestrator
    function: LifecycleFunction | None = None  # the lifecycle function a DECISION asks
    holds: str | None = None  # an EVERY_REGION step: the region step it holds back until it proceeds
    admitted_by: str | None = None  # the decision step whose admitted regions this step takes (version creation)
    dictionary_from: str | None = None  # the step whose trained dictionary this step takes (version creation)
    poll_seconds: float = 2.0  # a CONDITION: how often it is checked (a sensor's poke interval), and how long
    timeout_seconds: float = INGESTION_TIMEOUT_SECONDS

    @property
    def can_rollback(self) -> bool:
        return self.function is not None and HOOK_FUNCTIONS[self.function] is StoreVersionLifecycleEventOutcome


# The runs, in step order.
def _start_of_push_job(s: StepInputs) -> str:
    """The push's confs and input checked, then the hooks asked. Returns the input the push reads, which the
    later steps of a DAG run take from here (a scheduled run's rendered template: a schedule edited or turned off
    meanwhile does not change the push in flight)."""
    check_push_confs(s.request.confs)  # a DAG run triggered from the UI form is checked here, before any hook
    if s.request.input_path and not repush_config.is_repush(s.request.confs):
        check_readable(s.request.input_path)  # a missing input (a scheduled run's) ends the push before any hook
    s.rollout.start_of_push_job()
    return s.request.input_path


def _schema_registration(s: StepInputs) -> int | None:
    """Before the version exists: the id of the value schema the input is written with. When the store
    auto-registers and the input needs a new schema, it is registered here, through pre_schema_registration
    (ABORT: RolloutStopped with the hooks' reason, nothing registered) and post_schema_registration. None when the
    input cannot be read here (a URL): the job matches it, and registers through the same hooks. Input that fits no
    schema is refused now, as the job would refuse it."""
    r, request = s.rollout, s.request
    if repush_config.is_repush(request.confs):
        return None  # a repush writes the records of its source as they are, each with its schema id
    if not request.input_path:
        raise ConfigError("a push needs its input files (or source=kafka, a repush)")
    struct = read_input_schema(request.input_path)
    if struct is None:
        return None
    info = stores.describe_store(r.meta, r.store)
    _, value_struct, single_value = input_value(struct, request.key_field, request.value_field)
    try:
        schema_id, _ = match_value_schema(
            r.meta, r.config, info, value_struct, single_value, request.value_field, r.push_job_id
        )
    except stores.SchemaRefused as exc:
        raise RolloutStopped(str(exc)) from None
    if schema_id not in info.schemas_by_id():
        r.progress(f"registered value schema {schema_id} of '{r.store}' from the input")
    return schema_id


def _compression_dictionary(s: StepInputs) -> TrainedDictionary | None:
    """A ZSTD_WITH_DICT store's new dictionary, trained from a sample of the push's values (a repush's: of its source
    version) before the version exists; None at once for any other store."""
    request = s.request
    return compression_dictionary.train(
        s.rollout, request.input_path, request.key_field, request.value_field, request.confs
    )


def _pre_version_creation(s: StepInputs) -> Decision | None:
    """`pre_store_version_creation`, asked for every region at each poke (`HookDecisions.decide_version_creation`):
    WAIT asks again, ROLLBACK stops the push before anything is created, PROCEED names the regions that get the
    version. A re-run of a push whose version exists decides nothing again: its regions are the version's."""
    r = s.rollout
    version = versions.version_of_push(r.meta, r.store, r.push_job_id)
    if version is not None:
        return Decision(Outcome.PROCEED, regions=tuple(versions.version_regions(version)))
    order = stores.store_settings(r.meta, r.store).rollout_order
    return r.decide_version_creation(versions.next_version_number(r.meta, r.store), order)


def _create_version(s: StepInputs) -> CreatedVersion:
    """Create the version for the regions `pre_version_creation` admitted, ask the Da Vinci ingestion gate for each
    of them, send START_OF_PUSH (with a ZSTD_WITH_DICT version's dictionary, which `compression_dictionary`
    trained). A re-run resumes the version its push already created. A repush's source is
    resolved here, just before its version is created, and pinned into the version
    (`controller.repush_config.resolved_confs`: topic, TTL cut-off, each source partition's end offset), so a retried
    job reads exactly the same records."""
    r = s.rollout
    version = versions.version_of_push(r.meta, r.store, r.push_job_id)
    if version is None:
        compression = stores.store_settings(r.meta, r.store).compression
    else:  # a re-run: the version's, as created
        compression = CompressionStrategy[version.compression]
    dictionary = s.dictionary.dictionary if s.dictionary is not None and compression.needs_dictionary else None
    if compression.needs_dictionary and dictionary is None:
        raise ConfigError(
            f"'{r.store}' became ZSTD_WITH_DICT after this push's compression_dictionary step trained nothing: "
            "push again"
        )
    if version is not None:
        regions = versions.version_regions(version)
        r.version = version.number
        job_confs = dict(version.lifecycle.job_confs)
    else:
        if not s.admitted:
            raise VeniceError("version creation needs the regions pre_version_creation admitted")
        regions = list(s.admitted)
        job_confs, rewind, replay_after = _repush_source(r, s.request)
        version = versions.create_version(
            r.meta,
            r.config,
            r.store,
            r.push_job_id,
            regions,
            rewind_seconds=rewind,
            replay_after_ms=replay_after,
            job_confs=job_confs,
        )
        r.version = version.number
        r.progress(
            f"created version {version.number} of '{r.store}' ({version.partition_count} partitions, regions "
            f"{', '.join(regions)}, push job {r.push_job_id})"
        )
        r.inform_regions(F.POST_STORE_VERSION_CREATION, regions)
    # START_OF_PUSH before the gates: a client let in finds the version's dictionary served.
    send_start_of_push(
        r.config, r.store, version.number, version.partition_count, r.push_job_id, compression, dictionary
    )
    r.open_da_vinci_gates(regions)
    return CreatedVersion(version.number, version.partition_count, regions, r.push_job_id, job_confs)


def _repush_source(r: HookDecisions, request: PushRequest) -> tuple[dict[str, str], int | None, int | None]:
    """A repush's pinned confs (its source resolved now: a run queued behind another push reads the version
    current when it starts), and its new version's rewind and replay floor: the rewind a day for a hybrid source,
    as Venice does, since the repush itself takes time (or `rewind.time.in.seconds.override`); with TTL, no
    nearline write at or before the cut-off is replayed. ({}, None, None) for a push."""
    if not repush_config.is_repush(request.confs):
        return {}, None, None
    repush = repush_config.parse(request.confs)
    source = repush_config.resolve(r.meta, r.config, r.store, repush)
    pinned = repush_config.resolved_confs(request.confs, source)
    r.progress(
        f"repush source: version {source.version} in {source.region} ({source.topic}, end offsets "
        f"{list(source.end_offsets)}" + (f", TTL cut-off {source.ttl_start_ms} ms)" if source.ttl_start_ms else ")")
    )
    resolved = repush_config.parse(pinned)
    return pinned, repush_config.new_version_rewind(resolved, source.hybrid), repush_config.replay_after_ms(resolved)


def _da_vinci_ingestion_gate(s: StepInputs) -> Decision | None:
    if s.region not in s.version.regions:
        return Decision(Outcome.PROCEED)  # nothing to gate: the region is not part of the push
    return s.rollout.decide_da_vinci_gate(s.in_region)


def _end_of_push(s: StepInputs) -> int:
    """END_OF_PUSH in every partition, with the count the Spark job wrote to it (ingestion checks it)."""
    created, result = s.version, s.job_result
    if result is None:
        raise VeniceError("END_OF_PUSH needs the push job's result")
    r = s.rollout
    counts = dict(result.record_counts)
    send_end_of_push(r.config, r.store, created.number, created.partitions, r.push_job_id, counts)
    versions.record_push_counts(r.meta, r.store, created.number, counts)
    return result.records


def _admitted(s: StepInputs) -> bool:
    return s.region in s.version.regions


def _ingestion_complete(s: StepInputs) -> bool:
    meta, store, number = s.rollout.meta, s.rollout.store, s.version.number
    status = versions.job_status(meta, store, number).regions[s.in_region]
    if status.status is ExecutionStatus.ERROR:
        raise IngestionFailed(f"ingestion failed in {s.region}: {status.details}")
    ready, placed = versions.replica_readiness(meta, store, number).get(s.in_region, (0, 0))
    log.info("%s: %s, %d of %d replicas ready", s.region, status.status.value, ready, placed)  # each poke's log
    return status.status is ExecutionStatus.COMPLETED


def _da_vinci_started(s: StepInputs) -> Decision | None:
    """`post_start_of_store_version_ingestion_for_da_vinci`: the region's clients have been let ingest (its gate,
    which holds this step, is open)."""
    return s.rollout.decide(DA_VINCI_STARTED, s.in_region)


def _da_vinci_swap(s: StepInputs) -> bool:
    return s.rollout.da_vinci_clients_serve(s.in_region)


def _leader_replication_done(s: StepInputs) -> None:
    s.rollout.inform(F.POST_STORE_VERSION_LEADER_REPLICATION, s.region)


def _pre_swap(s: StepInputs) -> Decision | None:
    return s.rollout.decide(F.PRE_STORE_VERSION_SWAP, s.region)


def _server_swap(s: StepInputs) -> None:
    r, number = s.rollout, s.version.number
    versions.swap_region(r.meta, r.store, s.in_region, number)

    def stopped() -> bool:  # (a ROLLBACK beside this step, an operator's abort: the region goes back)
        return versions.get_version(r.meta, r.store, number).lifecycle.stopped

    wait_until_served(r.config, r.store, number, [s.in_region], abandoned=stopped)
    r.ensure_not_stopped()
    r.progress(f"swapped {s.region} to version {number}")


def _post_swap(s: StepInputs) -> Decision | None:
    return s.rollout.decide(F.POST_STORE_VERSION_SWAP, s.region)


def _end_of_push_job(s: StepInputs) -> Decision | None:
    return s.rollout.decide(F.PRE_END_OF_PUSH_JOB)


def _finish_push_job(s: StepInputs) -> list[int]:
    r = s.rollout
    r.inform(F.POST_END_OF_PUSH_JOB)
    versions.finish_push(r.meta, r.store, s.version.number)
    retired = versions.retire_old_versions(r.meta, r.config, r.store)
    if retired:
        r.progress(f"retired versions {retired}")
    return retired


def _announce_version(s: StepInputs) -> dict[str, Any] | None:
    """What the store's consumers are told once the push is over: the version, the regions serving it, its record
    count, the push job. None unless every region of the store serves it (a push stopped part-way, an ABORT at
    the end, a region left out at creation): then nothing is announced."""
    r, created = s.rollout, s.version
    order = stores.store_settings(r.meta, r.store).rollout_order
    serving = set(versions.regions_serving(r.meta, r.store, created.number))
    if not set(order) <= serving:
        r.progress(f"version {created.number} does not serve in every region: nothing announced")
        return None
    counts = versions.get_version(r.meta, r.store, created.number).lifecycle.record_counts or {}
    return {
        "store": r.store,
        "version": created.number,
        "regions": order,
        "records": sum(counts.values()),
        "push_job_id": created.push_job_id,
        "repush": repush_config.is_repush(s.request.confs),
    }


STEPS: tuple[Step, ...] = (
    Step("start_of_push_job", StepKind.ACTION, run=_start_of_push_job),
    Step("schema_registration", StepKind.ACTION, run=_schema_registration),
    Step("compression_dictionary", StepKind.ACTION, run=_compression_dictionary),
    Step(
        "pre_version_creation",
        StepKind.DECISION,
        run=_pre_version_creation,
        function=F.PRE_STORE_VERSION_CREATION,
    ),
    Step(
        "create_version",
        StepKind.ACTION,
        run=_create_version,
        admitted_by="pre_version_creation",
        dictionary_from="compression_dictionary",
    ),
    Step(
        "da_vinci_ingestion_gate",
        StepKind.DECISION,
        Scope.EVERY_REGION,
        _da_vinci_ingestion_gate,
        DA_VINCI_GATE,
        holds="da_vinci_ingestion",
    ),
    Step("spark_push", StepKind.SPARK),
    Step("end_of_push", StepKind.ACTION, run=_end_of_push),
    Step("admitted", StepKind.ADMISSION, Scope.REGION, _admitted),
    Step("ingestion_complete", StepKind.CONDITION, Scope.REGION, _ingestion_complete),
    Step("da_vinci_ingestion", StepKind.DECISION, Scope.REGION, _da_vinci_started, DA_VINCI_STARTED),
    Step("leader_replication_done", StepKind.ACTION, Scope.REGION, _leader_replication_done),
    Step("approval", StepKind.APPROVAL, Scope.REGION),
    Step("pre_swap", StepKind.DECISION, Scope.REGION, _pre_swap, F.PRE_STORE_VERSION_SWAP),
    # The region's Da Vinci clients swap first, once every gate of the swap has let it (bounded: its timeout).
    Step("da_vinci_swap", StepKind.CONDITION, Scope.REGION, _da_vinci_swap, timeout_seconds=10 * 365 * 24 * 3600),
    Step("server_swap", StepKind.ACTION, Scope.REGION, _server_swap),
    Step("post_swap", StepKind.DECISION, Scope.REGION, _post_swap, F.POST_STORE_VERSION_SWAP),
    Step("end_of_push_job", StepKind.DECISION, run=_end_of_push_job, function=F.PRE_END_OF_PUSH_JOB),
    Step("finish_push_job", StepKind.ACTION, run=_finish_push_job),
    Step("announce_version", StepKind.ANNOUNCE, run=_announce_version),
)


def step(name: str) -> Step:
    return next(s for s in STEPS if s.name == name)


def plan(regions: list[str]) -> Iterator[tuple[Step, str | None]]:
    """The steps in the order one process runs them: each run of consecutive region steps as a block, region after
    region. An every-region step runs in each region's block just before the step it holds (the Da Vinci gate
    before the region's Da Vinci swap), so a WAITing gate holds up that region only, as in the DAG."""
    held = {s.holds: s for s in STEPS if s.scope is Scope.EVERY_REGION and s.holds}
    block: list[Step] = []
    for current in (*STEPS, None):
        if current is not None and current.scope is Scope.REGION:
            block.append(current)
            continue
        for region in regions if block else ():
            for region_step in block:
                if region_step.name in held:
                    yield held[region_step.name], region
                yield region_step, region
        block = []
        if current is None:
            return
        if current.scope is Scope.EVERY_REGION:
            if not current.holds:
                yield from ((current, region) for region in regions)
        else:
            yield current, None


def stop(inputs: StepInputs, decided: Step, decision: Decision) -> None:
    """The `abort` or `rollback` of a decision step: apply it (raises `RolloutStopped`)."""
    inputs.rollout.apply(decision, decided.function or decided.name, inputs.region)


# Runs the push job for a request and its version; returns what it wrote (`record_counts` per partition as strings,
# `schema_id`, `records`).
JobRunner = Callable[[PushRequest, CreatedVersion], JobResult]


def run_in_process(
    rollout: HookDecisions,
    request: PushRequest,
    run_job: JobRunner,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Run every step in this process (`venice push --local`); the version every region serves at the end. A
    failure that is not a hook's decision ends the push: the version is killed (or PARTIALLY_ONLINE where a region
    already serves it); the previous version keeps serving."""
    inputs = StepInputs(rollout, request)
    skipped_region: str | None = None
    try:
        for current, region in plan(stores.store_settings(rollout.meta, request.store).rollout_order):
            if region is not None and region == skipped_region:
                continue
            rollout.ensure_not_stopped()  # an operator's `venice rollout abort` from elsewhere ends it here
            inputs.region = region
            if current.kind is StepKind.SPARK:
                inputs.job_result = _run_job(inputs, run_job)
            elif current.kind is StepKind.APPROVAL:
                continue  # in process, the ManualApproval hook WAITs at pre_swap for `venice rollout approve`
            elif current.kind is StepKind.ADMISSION:
                skipped_region = None if current.run(inputs) else region
            elif current.kind is StepKind.CONDITION:
                _wait_for(inputs, current, sleep)
            elif current.kind is StepKind.DECISION:
                _decide_in_place(inputs, current, sleep)
            else:
                result = current.run(inputs)
                if isinstance(result, CreatedVersion):
                    inputs.created = result
                elif isinstance(result, TrainedDictionary):
                    inputs.dictionary = result
    except RolloutStopped:
        raise
    except BaseException as exc:
        number = inputs.created.number if inputs.created is not None else rollout.version  # created, then failed
        if number is not None and versions.version_of_push(rollout.meta, request.store, rollout.push_job_id):
            versions.stop_push(rollout.meta, request.store, number, str(exc))
        raise
    return inputs.version.number


def _run_job(inputs: StepInputs, run_job: JobRunner) -> JobResult:
    r = inputs.rollout
    started = time.monotonic()
    result = run_job(inputs.request, inputs.version)
    took = time.monotonic() - started
    if result.repush is not None:
        left = result.repush
        r.progress(
            f"repush job read {left.source} ({left.plan}) and wrote {result.records} records and "
            f"{left.tombstones} tombstones in {took:.1f}s (left out: {left.superseded} superseded, "
            f"{left.deleted} deleted, {left.expired} expired by TTL)"
        )
    else:
        r.progress(f"spark job wrote {result.records} records with value schema {result.schema_id} in {took:.1f}s")
    return result


def _wait_for(inputs: StepInputs, current: Step, sleep: Callable[[float], None]) -> None:
    started = time.monotonic()
    deadline, said = started + current.timeout_seconds, started
    while not current.run(inputs):
        now = time.monotonic()
        if now > deadline:
            raise IngestionFailed(
                f"{current.name} in {inputs.region} did not happen within {current.timeout_seconds:.0f}s"
            )
        if now - said >= WAITING_SAID_EVERY_SECONDS:  # a long wait says what it waits for
            said = now
            inputs.rollout.progress(f"{inputs.region}: still waiting for {current.name} ({_waiting_on(inputs)})")
        sleep(min(current.poll_seconds, IN_PROCESS_POLL_SECONDS))
        inputs.rollout.ensure_not_stopped()
    inputs.rollout.progress(f"{inputs.region}: {current.name}")


def _waiting_on(inputs: StepInputs) -> str:
    """A region's ingestion as a waiting push says it: its status and ready replicas."""
    meta, store, number = inputs.rollout.meta, inputs.rollout.store, inputs.version.number
    status = versions.job_status(meta, store, number).regions.get(inputs.in_region)
    ready, placed = versions.replica_readiness(meta, store, number).get(inputs.in_region, (0, 0))
    what = status.status.value if status is not None else "no status yet"
    config = inputs.rollout.config
    down = [
        i.instance
        for i in instances.instances(meta, config.server.instance_lease_seconds, inputs.in_region)
        if not i.live
    ]
    gone = f"; instance{'s' if len(down) > 1 else ''} {', '.join(map(str, down))} of the region down" if down else ""
    return f"{what}, {ready} of {placed} replicas ready{gone}"


def _decide_in_place(inputs: StepInputs, current: Step, sleep: Callable[[float], None]) -> None:
    """A decision step, asked again every wait interval (as the DAG's sensor pokes) until it decides."""
    while (decision := current.run(inputs)) is None:
        sleep(inputs.rollout.config.hooks.wait_interval_seconds)
        inputs.rollout.ensure_not_stopped()
    if decision.stops:
        stop(inputs, current, decision)
    if decision.regions:
        inputs.admitted = decision.regions
