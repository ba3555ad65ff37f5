"""The StoreLifecycleHooks API of VIP-4, in Python names.

Operators subclass `StoreLifecycleHooks` and list the class in `venice.store.lifecycle.hooks`. Every function has
a harmless default (PROCEED, or nothing). Functions that may need to hold a rollout back return a
`StoreVersionLifecycleEventOutcome` (PROCEED, ABORT, WAIT, ROLLBACK) and receive the job status with each region's
status and the time it last changed. A function may also return `(outcome, reason)`: the reason is recorded and,
for validate_hook_config, shown to the user.

Each function may return only its own outcomes (`HOOK_FUNCTIONS`). An outcome it may not return, such as WAIT or
ROLLBACK from a PROCEED/ABORT-only function (validate_hook_config, pre_start_of_push_job,
pre_schema_registration), is not taken as its answer: it is a hook error, decided by the failure policy
(`venice.store.lifecycle.hooks.failure.policy`, where WAIT means ABORT for these functions) like a hook that
raises, and is recorded as `invalid_outcome` on the invocation and counted in
`venice_hook_invalid_outcomes_total{hook_class,function}` rather than in the failures metric. What informational
functions (those returning None) return is ignored.

The hooks of an invocation run at once, each in a worker process of its own forked from the caller
(`hooks.executor`): a hook sees its instance as it is when the call starts, and whatever the call changes in it, or
in its process, ends with the call. Keep what must outlive a call outside the process (a file, a database, a
service), as under Airflow, where every step is a process of its own; make clients (a Kafka producer, a
connection) in the process that uses them. A call past `venice.store.lifecycle.hooks.timeout.seconds` is killed.
A hook makes no Airflow SDK call (a Variable, a Connection): under Airflow its worker is a fork of the step's task
process, whose one channel to Airflow's supervisor it must not share. Store-level configs are data (a
`Mapping[str, str]`), never code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, TypeAlias

from venice_core.model.status import JobStatus


class StoreLifecycleEventOutcome(StrEnum):
    PROCEED = "PROCEED"
    ABORT = "ABORT"


class StoreVersionLifecycleEventOutcome(StrEnum):
    PROCEED = "PROCEED"
    ABORT = "ABORT"
    WAIT = "WAIT"
    ROLLBACK = "ROLLBACK"


# What a function may return: its outcome, or its outcome and the reason for it.
StoreAnswer: TypeAlias = StoreLifecycleEventOutcome | tuple[StoreLifecycleEventOutcome, str]
VersionAnswer: TypeAlias = StoreVersionLifecycleEventOutcome | tuple[StoreVersionLifecycleEventOutcome, str]


@dataclass(frozen=True)
class HookContext:
    """What a hook gets to decide: where in the rollout this call is, and the store-level configs."""

    cluster: str
    store: str
    store_hook_configs: Mapping[str, str] = field(default_factory=dict)
    version: int | None = None
    region: str | None = None
    job_status: JobStatus | None = None
    # People's swap decisions for this version, per region: {"approved": bool, "by": user, "at": epoch seconds}.
    approvals: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)


PROCEED = StoreLifecycleEventOutcome.PROCEED
VERSION_PROCEED = StoreVersionLifecycleEventOutcome.PROCEED


class StoreLifecycleHooks:
    """Base class of operator hooks; `configs` are the `venice.store.lifecycle.hooks.configs.*` values, clipped.

    A hook declares the store-level config keys it reads (`venice store update --hook-config`): exactly
    (`hook_config_keys`) or by prefix (`hook_config_prefixes`). A key that no configured hook reads is refused
    (`hooks.validation`). A hook that declares nothing (`hook_config_keys` None, the default) may read any key, so
    no key is refused while it is configured: a hook written before the declaration keeps working."""

    hook_config_keys: ClassVar[frozenset[str] | None] = None
    hook_config_prefixes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, configs: Mapping[str, str]) -> None:
        self.configs = dict(configs)

    @classmethod
    def reads_hook_config(cls, key: str) -> bool:
        """Does this hook read the store-level config `key`? (Undeclared: it may.)"""
        return cls.hook_config_keys is None or key in cls.hook_config_keys or key.startswith(cls.hook_config_prefixes)

    # Store-level config validation and the push job's start.
    def validate_hook_config(self, ctx: HookContext) -> StoreAnswer:
        return PROCEED

    def pre_start_of_push_job(self, ctx: HookContext) -> StoreAnswer:
        return PROCEED

    def post_start_of_push_job(self, ctx: HookContext) -> None:
        return None

    # Schema registration.
    def pre_schema_registration(self, ctx: HookContext) -> StoreAnswer:
        return PROCEED

    def post_schema_registration(self, ctx: HookContext) -> None:
        return None

    # Version creation, per region: ABORT or ROLLBACK leaves the region out.
    def pre_store_version_creation(self, ctx: HookContext) -> VersionAnswer:
        return VERSION_PROCEED

    def post_store_version_creation(self, ctx: HookContext) -> None:
        return None

    # Da Vinci ingestion, per region.
    def pre_start_of_store_version_ingestion_for_da_vinci(self, ctx: HookContext) -> VersionAnswer:
        return VERSION_PROCEED

    def post_start_of_store_version_ingestion_for_da_vinci(self, ctx: HookContext) -> VersionAnswer:
        return VERSION_PROCEED

    def post_store_version_leader_replication(self, ctx: HookContext) -> None:
        return None

    # The swap, per region.
    def pre_store_version_swap(self, ctx: HookContext) -> VersionAnswer:
        return VERSION_PROCEED

    def post_store_version_swap(self, ctx: HookContext) -> VersionAnswer:
        return VERSION_PROCEED

    # The end of the push job.
    def pre_end_of_push_job(self, ctx: HookContext) -> VersionAnswer:
        return VERSION_PROCEED

    def post_end_of_push_job(self, ctx: HookContext) -> None:
        return None


class LifecycleFunction(StrEnum):
    """The 14 lifecycle functions, in the order of VIP-4's table (the order a push calls them)."""

    VALIDATE_HOOK_CONFIG = "validate_hook_config"
    PRE_START_OF_PUSH_JOB = "pre_start_of_push_job"
    POST_START_OF_PUSH_JOB = "post_start_of_push_job"
    PRE_SCHEMA_REGISTRATION = "pre_schema_registration"
    POST_SCHEMA_REGISTRATION = "post_schema_registration"
    PRE_STORE_VERSION_CREATION = "pre_store_version_creation"
    POST_STORE_VERSION_CREATION = "post_store_version_creation"
    PRE_START_OF_STORE_VERSION_INGESTION_FOR_DA_VINCI = "pre_start_of_store_version_ingestion_for_da_vinci"
    POST_START_OF_STORE_VERSION_INGESTION_FOR_DA_VINCI = "post_start_of_store_version_ingestion_for_da_vinci"
    POST_STORE_VERSION_LEADER_REPLICATION = "post_store_version_leader_replication"
    PRE_STORE_VERSION_SWAP = "pre_store_version_swap"
    POST_STORE_VERSION_SWAP = "post_store_version_swap"
    PRE_END_OF_PUSH_JOB = "pre_end_of_push_job"
    POST_END_OF_PUSH_JOB = "post_end_of_push_job"


F = LifecycleFunction
# function -> the outcome type it returns (None: informational, its result is ignored)
HOOK_FUNCTIONS: dict[LifecycleFunction, type[StrEnum] | None] = {
    F.VALIDATE_HOOK_CONFIG: StoreLifecycleEventOutcome,
    F.PRE_START_OF_PUSH_JOB: StoreLifecycleEventOutcome,
    F.POST_START_OF_PUSH_JOB: None,
    F.PRE_SCHEMA_REGISTRATION: StoreLifecycleEventOutcome,
    F.POST_SCHEMA_REGISTRATION: None,
    F.PRE_STORE_VERSION_CREATION: StoreVersionLifecycleEventOutcome,
    F.POST_STORE_VERSION_CREATION: None,
    F.PRE_START_OF_STORE_VERSION_INGESTION_FOR_DA_VINCI: StoreVersionLifecycleEventOutcome,
    F.POST_START_OF_STORE_VERSION_INGESTION_FOR_DA_VINCI: StoreVersionLifecycleEventOutcome,
    F.POST_STORE_VERSION_LEADER_REPLICATION: None,
    F.PRE_STORE_VERSION_SWAP: StoreVersionLifecycleEventOutcome,
    F.POST_STORE_VERSION_SWAP: StoreVersionLifecycleEventOutcome,
    F.PRE_END_OF_PUSH_JOB: StoreVersionLifecycleEventOutcome,
    F.POST_END_OF_PUSH_JOB: None,
}
