"""Store and schema operations: the one place that creates, changes and deletes stores and their schemas."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from venice_core.config import ClusterConfig
from venice_core.controller.store_description import (
    RegionPushStatus,
    RegionVersions,
    RegisteredSchema,
    StoreDescription,
    StoreSettings,
    VersionDescription,
)
from venice_core.errors import ConfigError, InvalidName, StoreAlreadyExists, StoreNotFound, VeniceError
from venice_core.hooks.api import HookContext
from venice_core.hooks.executor import HookExecutor, Outcome
from venice_core.hooks.loader import load_hooks
from venice_core.hooks.records import recorder
from venice_core.hooks.validation import validate_store_hook_configs
from venice_core.meta import MetadataStore
from venice_core.meta.models import (
    PartitionStatus,
    RegionCurrentVersion,
    Store,
    StoreReader,
    ValueSchema,
    Version,
    VersionRegionStatus,
)
from venice_core.model.hybrid import DEFAULT_OFFSET_LAG_THRESHOLD
from venice_core.model.status import HOSTABLE, ExecutionStatus, VersionStatus
from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.partitioner_config import PartitionerConfig, load_partitioner
from venice_core.pubsub import acls, admin
from venice_core.pubsub.admin import TopicAdmin
from venice_core.schedules.calendar import CalendarUpdate
from venice_core.schedules.push import PushSchedule, check_input_template
from venice_core.schedules.repush import RepushSchedule, check_ttl
from venice_core.schedules.runs import Schedule
from venice_core.schema import Schema, canonical_json, check_value_schema_compatible, parse_schema

NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,127}")
DEFAULT_PARTITIONS = 4
DEFAULT_VERSIONS_TO_PRESERVE = 2
MAX_PARTITIONS = 1024
MAX_HYBRID_SETTING = 2**31 - 1  # an INTEGER column on PostgreSQL as on SQLite


def check_name(kind: str, name: str) -> str:
    """The one naming rule of stores and pipelines (a name is also part of topics, DAG ids and directories)."""
    if not NAME_PATTERN.fullmatch(name or ""):  # (`$` would take a name ending in a newline)
        raise InvalidName(
            f"invalid {kind} name {name!r}: it must start with a letter and hold only letters, digits, '_' and '-' "
            "(at most 128 characters)"
        )
    return name


def validate_store_name(name: str) -> str:
    return check_name("store", name)


def _validate_partitions(partitions: int) -> int:
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ConfigError(f"partition count must be between 1 and {MAX_PARTITIONS}, got {partitions}")
    return partitions


def _validate_compression(compression: str) -> str:
    """The strategy's name, as the store's column keeps it."""
    try:
        return CompressionStrategy[compression.upper()].name
    except KeyError:
        known = ", ".join(strategy.name for strategy in CompressionStrategy)
        raise ConfigError(f"unknown compression {compression!r} (one of {known})") from None


def _validate_rollout_order(config: ClusterConfig, order: Sequence[str]) -> list[str]:
    regions = list(order)
    unknown = [r for r in regions if r not in config.region_names]
    if unknown:
        raise ConfigError(f"rollout order names unknown regions {unknown} (configured: {list(config.region_names)})")
    if sorted(regions) != sorted(config.region_names):
        raise ConfigError(f"rollout order must list every region exactly once: {list(config.region_names)}")
    return regions


def _validate_versions_to_preserve(count: int) -> int:
    if count < 1:
        raise ConfigError(f"versions to preserve must be at least 1, got {count}")
    return count


def get_store(session: Session, name: str) -> Store:
    store = session.get(Store, name)
    if store is None:
        raise StoreNotFound(name)
    return store


def value_schemas(session: Session, name: str) -> list[ValueSchema]:
    return list(
        session.scalars(select(ValueSchema).where(ValueSchema.store_name == name).order_by(ValueSchema.schema_id))
    )


def _validate_replication_factor(config: ClusterConfig, factor: int | None) -> int | None:
    """A replication factor every region can hold: one error at `store create/update`, not a push that never
    completes."""
    if factor is None:
        return None
    if factor < 1:
        raise ConfigError(f"replication factor must be at least 1, got {factor}")
    for region in config.regions:
        if factor > region.instances:
            raise ConfigError(
                f"replication factor {factor} is above the {region.instances} instance"
                f"{'s' if region.instances != 1 else ''} of region {region.name} (region.{region.name}.instances)"
            )
    return factor


def _validate_partitioner(
    config: ClusterConfig, partitioner: PartitionerConfig, key_schema: str
) -> dict[str, Any] | None:
    """The store's partitioner column, once the partitioner is checked as its writers and readers will load it: a
    class of `venice.partitioner.classes` (or the default), loadable, accepting its params with the store's key
    schema (ConfigError naming the problem)."""
    load_partitioner(partitioner, json.loads(key_schema), config.partitioner_classes)
    return None if partitioner.is_default else partitioner.to_json()


def create_store(
    meta: MetadataStore,
    config: ClusterConfig,
    name: str,
    key_schema: str,
    value_schema: str,
    partitions: int = DEFAULT_PARTITIONS,
    compression: str = "NO_OP",
    rollout_order: Sequence[str] | None = None,
    auto_register_schemas: bool = False,
    versions_to_preserve: int = DEFAULT_VERSIONS_TO_PRESERVE,
    replication_factor: int | None = None,
    partitioner_class: str | None = None,
    partitioner_params: Mapping[str, str] | None = None,
) -> None:
    """Create a store with its key schema and first value schema; `partitioner_class` and `partitioner_params`:
    Venice's `partitioner.class` and `partitioner.params` (default: MD5, no params)."""
    validate_store_name(name)
    key = parse_schema(key_schema, "key schema")
    value = parse_schema(value_schema, "value schema")
    partitioner = PartitionerConfig(partitioner_class or PartitionerConfig().class_path, dict(partitioner_params or {}))
    store = Store(
        name=name,
        key_schema=canonical_json(key),
        partition_count=_validate_partitions(partitions),
        compression=_validate_compression(compression),
        rollout_order=_validate_rollout_order(config, rollout_order or config.region_names),
        auto_register_schemas=auto_register_schemas,
        versions_to_preserve=_validate_versions_to_preserve(versions_to_preserve),
        replication_factor=_validate_replication_factor(config, replication_factor),
        partitioner_config=_validate_partitioner(config, partitioner, canonical_json(key)),
        hook_configs={},
        largest_used_version=0,
    )
    try:
        with meta.session() as session:
            if session.get(Store, name) is not None:
                raise StoreAlreadyExists(name)
            session.add(store)
            session.flush()
            session.add(ValueSchema(store_name=name, schema_id=1, schema=canonical_json(value)))
    except IntegrityError:
        raise StoreAlreadyExists(name) from None


def _hybrid_number(setting: str, value: object) -> int:
    """A hybrid setting as a whole number, 0 or more: an int, or its text (as a command line gives it)."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\s*\+?\d+\s*", value):
        number = int(value)
    if number is None or not 0 <= number <= MAX_HYBRID_SETTING:
        raise ConfigError(f"{setting} must be a whole number from 0 to {MAX_HYBRID_SETTING}, got {value!r}")
    return number


def _hybrid_updates(
    store: Store,
    rewind_seconds: object | None,
    offset_lag_threshold: object | None,
    hybrid: bool | None,
) -> dict[str, int | None]:
    """The hybrid columns an update sets (none if it leaves hybrid alone); ConfigError for a bad combination."""
    rewind = None if rewind_seconds is None else _hybrid_number("hybrid rewind seconds", rewind_seconds)
    threshold = (
        None if offset_lag_threshold is None else _hybrid_number("hybrid offset lag threshold", offset_lag_threshold)
    )
    if hybrid is False:
        if rewind is not None or threshold is not None:
            raise ConfigError("turning hybrid off takes no hybrid rewind seconds or offset lag threshold")
        return {"hybrid_rewind_seconds": None, "hybrid_offset_lag_threshold": None}
    current = store.hybrid
    if current is None and rewind is None:
        if threshold is not None or hybrid:
            what = "an offset lag threshold alone does not make it hybrid; it" if threshold is not None else "it"
            raise ConfigError(
                f"store '{store.name}' is batch-only: {what} becomes hybrid with a rewind time "
                "(venice store update --hybrid-rewind-seconds N)"
            )
        return {}
    if rewind is None and threshold is None:
        return {}
    if current is not None:
        rewind = current.rewind_seconds if rewind is None else rewind
        threshold = current.offset_lag_threshold if threshold is None else threshold
    return {
        "hybrid_rewind_seconds": rewind,
        "hybrid_offset_lag_threshold": DEFAULT_OFFSET_LAG_THRESHOLD if threshold is None else threshold,
    }


def _schedule_updates(
    store: Store,
    kind: type[Schedule],
    cron: str | None,
    settings: Mapping[str, object | None],
    calendar: CalendarUpdate | None,
    enabled: bool | None,
    needs: str,
) -> dict[str, Any]:
    """The schedule column an update sets (a repush's, a push's; none if it leaves it alone); ConfigError for a bad
    value or combination. `settings` are the kind's own fields, checked; `needs` the options that set up a
    schedule the store does not have yet."""
    column = f"{kind.KIND}_schedule"
    calendar = calendar or CalendarUpdate()
    given = {k: v for k, v in settings.items() if v is not None}
    if enabled is False:
        if cron is not None or given or calendar.given():
            raise ConfigError(f"turning the scheduled {kind.KIND} off takes no other {kind.KIND} setting")
        return {column: None}
    if cron is None and not given and not calendar.given():
        return {}
    current = kind.of(getattr(store, column))
    if current is None and (cron is None or len(given) < len(settings)):
        raise ConfigError(f"store '{store.name}' has no scheduled {kind.KIND}: set both {needs}")
    return {column: kind.updated(current, cron, calendar, **given).to_json()}


def update_store(
    meta: MetadataStore,
    config: ClusterConfig,
    name: str,
    *,
    partitions: int | None = None,
    compression: str | None = None,
    rollout_order: Sequence[str] | None = None,
    auto_register_schemas: bool | None = None,
    versions_to_preserve: int | None = None,
    replication_factor: int | None = None,
    hook_configs: Mapping[str, str] | None = None,
    remove_hook_configs: Sequence[str] = (),
    hybrid_rewind_seconds: int | str | None = None,
    hybrid_offset_lag_threshold: int | str | None = None,
    hybrid: bool | None = None,
    repush_schedule: str | None = None,
    repush_ttl_seconds: int | str | None = None,
    repush_calendar: CalendarUpdate | None = None,
    repush: bool | None = None,
    push_schedule: str | None = None,
    push_input: str | None = None,
    push_calendar: CalendarUpdate | None = None,
    push: bool | None = None,
    partitioner_class: str | None = None,
    partitioner_params: Mapping[str, str] | None = None,
    topics: TopicAdmin = admin,
) -> list[str]:
    """Change store settings; they apply to versions created afterwards. Nothing changes if any value is bad.
    Returns the warnings (hook configs set while no hook is configured to read them).

    Hybrid (see `venice_core.model.hybrid`): a rewind makes the store hybrid (its offset lag threshold defaults to
    DEFAULT_OFFSET_LAG_THRESHOLD), either setting alone changes a hybrid store's, and `hybrid=False` makes it
    batch-only again. A store that becomes hybrid gets its real-time topic in every region first, so a broker
    that cannot create them changes nothing. Turning hybrid off keeps the topics (as Venice does): the versions
    created while the store was hybrid still ingest them; `delete_store` deletes them. A hybrid store's partition
    count is fixed, as in Venice: its real-time topics have that many partitions.

    Scheduled repush (see `venice_core.schedules.repush`): `repush_schedule` (cron or `daily`) and
    `repush_ttl_seconds` set it (both the first time), `repush_calendar` its working hours (`days`, `hours`,
    `timezone`, `holidays`), `repush=False` turns it off. Scheduled push (see `venice_core.schedules.push`), alike:
    `push_schedule` and `push_input` (its template), `push_calendar`, `push=False`.

    Partitioner (`partitioner.class`, `partitioner.params`): a class given sets it with the params given (none
    otherwise: the previous params were the previous class's); params alone replace the class's params. Like the
    partition count it applies to the versions created afterwards: a push, or a repush, moves the store to it. A
    hybrid store keeps its partitioner, as in Venice: its real-time topics are partitioned by it, and every version
    that ingests them must agree (`_check_fixed_partitioner`)."""
    updates = _setting_updates(
        config, partitions, compression, rollout_order, auto_register_schemas, versions_to_preserve, replication_factor
    )
    warnings: list[str] = []
    with meta.session() as session:  # validate everything before any topic is created
        store = get_store(session, name)
        if hook_configs or remove_hook_configs:
            updates["hook_configs"], warnings = _hook_configs_update(
                config, meta, store, hook_configs or {}, remove_hook_configs
            )
        updates.update(_hybrid_updates(store, hybrid_rewind_seconds, hybrid_offset_lag_threshold, hybrid))
        ttl = None if repush_ttl_seconds is None else check_ttl(repush_ttl_seconds)
        updates.update(
            _schedule_updates(
                store,
                RepushSchedule,
                repush_schedule,
                {"ttl_seconds": ttl},
                repush_calendar,
                repush,
                "--repush-schedule and --repush-ttl",
            )
        )
        template = None if push_input is None else check_input_template(push_input)
        updates.update(
            _schedule_updates(
                store,
                PushSchedule,
                push_schedule,
                {"input_template": template},
                push_calendar,
                push,
                "--push-schedule and --push-input",
            )
        )
        updates.update(_partitioner_update(config, store, partitioner_class, partitioner_params))
        _check_dictionary_input(name, store, updates)
        _check_fixed_partitions(store, updates)
        _check_fixed_partitioner(session, store, updates)
        partition_count = updates.get("partition_count", store.partition_count)
        becomes_hybrid = store.hybrid is None and updates.get("hybrid_rewind_seconds") is not None
    if becomes_hybrid:
        if config.security.enabled:  # its nearline writers' principal may write the topics, before they exist
            acls.grant_real_time(config, name)
        for region in config.regions:
            topics.create_topic(
                region.kafka_bootstrap,
                region.real_time_topic(name),
                partition_count,
                region.replication_factor,
                region.min_insync_replicas,
            )
    with meta.session() as session:
        store = get_store(session, name)
        _check_fixed_partitions(store, updates)  # again: another update may have made it hybrid meanwhile
        _check_fixed_partitioner(session, store, updates)
        for attribute, value in updates.items():
            setattr(store, attribute, value)
    return warnings


def _setting_updates(
    config: ClusterConfig,
    partitions: int | None,
    compression: str | None,
    rollout_order: Sequence[str] | None,
    auto_register_schemas: bool | None,
    versions_to_preserve: int | None,
    replication_factor: int | None,
) -> dict[str, Any]:
    """The plain settings given, each validated: {column: value}."""
    updates: dict[str, Any] = {}
    if partitions is not None:
        updates["partition_count"] = _validate_partitions(partitions)
    if compression is not None:
        updates["compression"] = _validate_compression(compression)
    if rollout_order is not None:
        updates["rollout_order"] = _validate_rollout_order(config, rollout_order)
    if auto_register_schemas is not None:
        updates["auto_register_schemas"] = auto_register_schemas
    if versions_to_preserve is not None:
        updates["versions_to_preserve"] = _validate_versions_to_preserve(versions_to_preserve)
    if replication_factor is not None:
        updates["replication_factor"] = _validate_replication_factor(config, replication_factor)
    return updates


def _hook_configs_update(
    config: ClusterConfig, meta: MetadataStore, store: Store, set_now: Mapping[str, str], removed: Sequence[str]
) -> tuple[dict[str, str], list[str]]:
    """The store's hook configs with `set_now` set and `removed` removed, and the warnings of their check. Data,
    checked by the hooks, never code; only the keys set now must be ones a hook reads."""
    _check_removable(store.name, store.hook_configs or {}, removed)
    merged = {k: v for k, v in (store.hook_configs or {}).items() if k not in set(removed)}
    merged.update(set_now)
    return merged, validate_store_hook_configs(config, meta, store.name, merged, changed=list(set_now))


def _check_dictionary_input(name: str, store: Store, updates: Mapping[str, Any]) -> None:
    """A ZSTD_WITH_DICT store's scheduled push must read input the platform can sample before the job (its
    dictionary is trained from it before the version exists): a URL only Spark reads would fail every run."""
    compression = updates.get("compression", store.compression)
    schedule = updates.get("push_schedule", store.push_schedule) or {}
    template = str(schedule.get("input_template", ""))
    if compression == CompressionStrategy.ZSTD_WITH_DICT.name and "://" in template:
        raise ConfigError(
            f"store '{name}': a ZSTD_WITH_DICT store's scheduled push must read local files, not {template}: its "
            "dictionary is trained from a sample of the input read before the push job, which only Spark can read "
            "there"
        )


def _check_removable(name: str, current: Mapping[str, str], removed: Sequence[str]) -> None:
    """ConfigError naming the first hook config key to remove that the store does not have (a typo would otherwise
    leave the key it meant in place, and say the store was updated)."""
    for key in removed:
        if key not in current:
            has = f"its hook configs: {', '.join(sorted(current))}" if current else "it has none"
            raise ConfigError(f"store '{name}' has no hook config '{key}' to remove ({has})")


def _check_fixed_partitions(store: Store, updates: Mapping[str, Any]) -> None:
    if store.hybrid is not None and updates.get("partition_count", store.partition_count) != store.partition_count:
        raise ConfigError(
            f"the partition count of hybrid store '{store.name}' cannot change: its real-time topics have "
            f"{store.partition_count} partitions"
        )


def _partitioner_update(
    config: ClusterConfig, store: Store, partitioner_class: str | None, partitioner_params: Mapping[str, str] | None
) -> dict[str, Any]:
    """The partitioner column an update sets (none if it leaves the partitioner as it is), checked."""
    if partitioner_class is None and partitioner_params is None:
        return {}
    current = store.partitioner
    wanted = PartitionerConfig(partitioner_class or current.class_path, dict(partitioner_params or {}))
    if wanted == current:
        return {}
    return {"partitioner_config": _validate_partitioner(config, wanted, store.key_schema)}


def _check_fixed_partitioner(session: Session, store: Store, updates: Mapping[str, Any]) -> None:
    """A hybrid store's real-time topics are partitioned by the store's partitioner (its nearline writer's), and the
    real-time partition p is ingested by partition p of every hybrid version: so a store that is hybrid after the
    update keeps its partitioner, and becomes hybrid only with the partitioner of each version still hosted that
    ingests its real-time topics (one created hybrid before it was made batch-only)."""
    hybrid_after = updates.get("hybrid_rewind_seconds", store.hybrid_rewind_seconds) is not None
    if not hybrid_after:
        return
    partitioner = PartitionerConfig.of(updates.get("partitioner_config", store.partitioner_config))
    if store.hybrid is not None and "partitioner_config" in updates:
        raise ConfigError(
            f"the partitioner of hybrid store '{store.name}' cannot change: its real-time topics are partitioned by "
            f"{store.partitioner.describe()} (make it batch-only first, venice store update {store.name} --no-hybrid)"
        )
    for version in session.scalars(
        select(Version).where(Version.store_name == store.name, Version.status.in_(list(HOSTABLE)))
    ):
        pinned = version.lifecycle
        if pinned.hybrid is not None and pinned.partitioner != partitioner:
            raise ConfigError(
                f"store '{store.name}' cannot become hybrid with partitioner {partitioner.describe()}: its version "
                f"{version.number} ingests its real-time topics partitioned by {pinned.partitioner.describe()} until "
                "it is retired (push the store while it is batch-only, or keep that partitioner)"
            )


def delete_store(meta: MetadataStore, config: ClusterConfig, name: str, topics: TopicAdmin = admin) -> None:
    """Delete a store: its topics in every region (each version's that may still exist, and the real-time one,
    kept by a store made batch-only again), then its metadata. Topics first: a broker that cannot delete them
    leaves the store as it was, to delete again, where the other order would leave topics that a new store of
    the same name would take over (topic creation is idempotent)."""
    with meta.session() as session:
        store = get_store(session, name)
        largest = store.largest_used_version
    for region in config.regions:
        names = [region.version_topic(name, number) for number in range(1, largest + 1)]
        topics.delete_topics(region.kafka_bootstrap, [*names, region.real_time_topic(name)])
    if config.security.enabled:  # its principals go with it: a store made again under this name starts with none
        acls.revoke_store(config, name, largest)
    with meta.session() as session:
        store = get_store(session, name)
        for model in (PartitionStatus, VersionRegionStatus, RegionCurrentVersion, Version, ValueSchema, StoreReader):
            session.execute(delete(model).where(model.store_name == name))
        session.delete(store)


class SchemaRefused(VeniceError):
    """A lifecycle hook answered ABORT at pre_schema_registration: the schema is not registered (an operator's
    decision, so the exit status is the rollout's stop status)."""

    http_status = 409
    exit_code = 3


def _registered_id(session: Session, name: str, new: Schema) -> int | None:
    """The id of `new` if the store has it already, else None once `new` is checked compatible with every value
    schema the store has."""
    existing = value_schemas(session, name)
    for row in existing:
        if parse_schema(row.schema) == new:
            return row.schema_id
    check_value_schema_compatible(new, [(row.schema_id, parse_schema(row.schema)) for row in existing])
    return None


def check_value_schema(meta: MetadataStore, name: str, schema_text: str) -> int | None:
    """The id of this value schema if the store has it, else None when it could be registered (compatible with
    every existing one); an incompatible schema is an IncompatibleSchema. Registers nothing."""
    new = parse_schema(schema_text, "value schema")
    with meta.session() as session:
        get_store(session, name)
        return _registered_id(session, name, new)


def _insert_value_schema(meta: MetadataStore, name: str, new: Schema) -> int:
    try:
        with meta.session() as session:
            get_store(session, name)
            known = _registered_id(session, name, new)  # again, in this transaction: another may have registered
            if known is not None:
                return known
            next_id = (
                session.scalar(select(func.max(ValueSchema.schema_id)).where(ValueSchema.store_name == name)) or 0
            ) + 1
            session.add(ValueSchema(store_name=name, schema_id=next_id, schema=canonical_json(new)))
            return next_id
    except IntegrityError:
        raise VeniceError(f"another value schema was registered for '{name}' at the same time: retry") from None


def add_value_schema(
    meta: MetadataStore, config: ClusterConfig, name: str, schema_text: str, push_job_id: str | None = None
) -> int:
    """Register a value schema compatible with every existing one; returns its id (the existing id if the same
    schema is already registered, without asking the hooks: nothing new is registered).

    A new schema goes through VIP-4's schema-registration hooks: `pre_schema_registration` (ABORT: SchemaRefused
    with the hooks' reason, nothing registered), then `post_schema_registration`. Both get the new schema and the
    existing ones in `details`. `push_job_id` keys the recorded invocations: the push that auto-registers its input
    schema, else (`venice schema add`) an id of this registration of its own, `schema-add-<store>-<random>`, so
    its pre and post invocations are found together and never mixed into a push's. A store's first value schema,
    given at its creation, is not a registration: no store-level hook config exists yet to decide on it."""
    new = parse_schema(schema_text, "value schema")
    with meta.session() as session:
        store = get_store(session, name)
        hook_configs = dict(store.hook_configs or {})
        known = _registered_id(session, name, new)  # incompatible: refused before any hook is asked
        existing = {row.schema_id: row.schema for row in value_schemas(session, name)}
    if known is not None:
        return known
    hooks = load_hooks(config.hooks)
    if not hooks:
        return _insert_value_schema(meta, name, new)
    job_id = push_job_id or f"schema-add-{name}-{uuid.uuid4().hex[:12]}"
    executor = HookExecutor(config.hooks, hooks, recorder(meta, job_id))
    ctx = HookContext(
        cluster=config.cluster_name,
        store=name,
        store_hook_configs=hook_configs,
        details={"new_schema": canonical_json(new), "existing_schemas": existing},
    )
    decision = executor.invoke("pre_schema_registration", ctx)
    if decision.outcome is not Outcome.PROCEED:
        raise SchemaRefused(
            f"value schema for '{name}' refused by a lifecycle hook at pre_schema_registration: "
            f"{decision.reason or 'a hook answered ' + str(decision.outcome)}"
        )
    schema_id = _insert_value_schema(meta, name, new)
    executor.invoke("post_schema_registration", replace(ctx, details={**ctx.details, "schema_id": schema_id}))
    return schema_id


def list_value_schemas(meta: MetadataStore, name: str) -> list[tuple[int, str]]:
    with meta.session() as session:
        get_store(session, name)
        return [(row.schema_id, row.schema) for row in value_schemas(session, name)]


def list_stores(meta: MetadataStore) -> list[str]:
    with meta.session() as session:
        return list(session.scalars(select(Store.name).order_by(Store.name)))


def _settings(store: Store) -> StoreSettings:
    return StoreSettings(
        store.name,
        store.partition_count,
        CompressionStrategy[store.compression],
        list(store.rollout_order),
        store.auto_register_schemas,
        store.versions_to_preserve,
        dict(store.hook_configs or {}),
        store.hybrid,
        store.repush,
        store.push,
        store.replication_factor,
        store.partitioner,
    )


def store_settings(meta: MetadataStore, name: str) -> StoreSettings:
    """The store's settings, or StoreNotFound."""
    with meta.session() as session:
        return _settings(get_store(session, name))


def all_store_settings(meta: MetadataStore) -> list[StoreSettings]:
    """Every store's settings, by name, in one query."""
    with meta.session() as session:
        return [_settings(store) for store in session.scalars(select(Store).order_by(Store.name))]


def describe_store(meta: MetadataStore, name: str) -> StoreDescription:
    """The store, its schemas, what each region serves and each of its versions; or StoreNotFound."""
    with meta.session() as session:
        store = get_store(session, name)
        versions = session.scalars(select(Version).where(Version.store_name == name).order_by(Version.number))
        region_status = list(session.scalars(select(VersionRegionStatus).where(VersionRegionStatus.store_name == name)))
        serving = {
            row.region: RegionVersions(row.current_version, row.backup_version)
            for row in session.scalars(select(RegionCurrentVersion).where(RegionCurrentVersion.store_name == name))
        }
        return StoreDescription(
            settings=_settings(store),
            key_schema=json.loads(store.key_schema),
            value_schemas=tuple(
                RegisteredSchema(row.schema_id, json.loads(row.schema)) for row in value_schemas(session, name)
            ),
            largest_used_version=store.largest_used_version,
            regions={region: serving.get(region, RegionVersions()) for region in store.rollout_order},
            versions=tuple(
                VersionDescription(
                    number=v.number,
                    status=VersionStatus(v.status),
                    reason=v.lifecycle.reason,
                    push_job_id=v.push_job_id,
                    created_at=v.created_at,
                    partition_count=v.partition_count,
                    compression=CompressionStrategy[v.compression],
                    hybrid=v.lifecycle.hybrid,
                    partitioner=v.lifecycle.partitioner,
                    regions={
                        s.region: RegionPushStatus(ExecutionStatus(s.status), s.updated_at, s.details)
                        for s in region_status
                        if s.number == v.number
                    },
                )
                for v in versions
            ),
        )
