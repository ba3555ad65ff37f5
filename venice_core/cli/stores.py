"""`venice store ...` and `venice schema ...`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from venice_core.cli.context import metadata, parse_key_values
from venice_core.config import ClusterConfig
from venice_core.controller import placement, stores
from venice_core.controller.versions import rollback_store
from venice_core.errors import ComponentError, ConfigError
from venice_core.meta import MetadataStore
from venice_core.model.hybrid import DEFAULT_OFFSET_LAG_THRESHOLD, HybridSettings
from venice_core.orchestration.airflow import store_dags
from venice_core.schedules.calendar import CalendarUpdate
from venice_core.schedules.push import PushSchedule
from venice_core.schedules.repush import RepushSchedule
from venice_core.schedules.runs import Schedule
from venice_core.schema import read_schema_file

store_app = typer.Typer(help="Create, inspect, change and delete stores.", no_args_is_help=True)
schema_app = typer.Typer(help="Register and list a store's value schemas.", no_args_is_help=True)

StoreArg = typer.Argument(..., help="Store name.")


def _sync_dags(config: ClusterConfig, meta: MetadataStore, store: str) -> None:
    """The store's DAG files as the store now is (`store_dags`), and a running Airflow serving the changed ones."""
    try:
        store_dags.store_changed(config, meta, store)
    except (ComponentError, OSError) as exc:  # the store is changed all the same; Airflow has it at its next start
        typer.echo(f"warning: Airflow's DAGs of '{store}' are not updated yet: {exc}", err=True)


def _rollout(value: str | None) -> list[str] | None:
    return [r.strip() for r in value.split(",") if r.strip()] if value else None


PARTITIONER_CLASS_HELP = (
    "Partitioner class of the versions created from now on (partitioner.class): one of venice.partitioner.classes, "
    "e.g. venice_core.protocol.partitioner.KeyFieldVenicePartitioner (default: DefaultVenicePartitioner, MD5)."
)
PARTITIONER_PARAM_HELP = (
    "A partitioner param key=value (partitioner.params; repeat for more), e.g. key.field=member_id."
)


@store_app.command("create")
def create(
    store: str = StoreArg,
    key_schema: Path = typer.Option(..., "--key-schema", help="Avro schema file of the key."),
    value_schema: Path = typer.Option(..., "--value-schema", help="Avro schema file of the value."),
    partitions: int = typer.Option(stores.DEFAULT_PARTITIONS, "--partitions", help="Partition count."),
    compression: str = typer.Option(
        "NO_OP", "--compression", help="NO_OP, GZIP, ZSTD or ZSTD_WITH_DICT (a dictionary trained by each push)."
    ),
    rollout_order: str = typer.Option(None, "--rollout-order", help="Regions in rollout order, comma-separated."),
    auto_register: bool = typer.Option(
        False,
        "--auto-register-schemas/--no-auto-register-schemas",
        help="Register compatible schemas on push.",
    ),
    versions_to_preserve: int = typer.Option(stores.DEFAULT_VERSIONS_TO_PRESERVE, "--versions-to-preserve"),
    replication_factor: int = typer.Option(
        None,
        "--replication-factor",
        help="Replicas of every partition in each region (default: min(2, the region's instances)).",
    ),
    partitioner_class: str = typer.Option(None, "--partitioner-class", metavar="CLASS", help=PARTITIONER_CLASS_HELP),
    partitioner_param: list[str] = typer.Option(
        [], "--partitioner-param", metavar="KEY=VALUE", help=PARTITIONER_PARAM_HELP
    ),
) -> None:
    """Create a store with its key schema and first value schema."""
    stores.validate_store_name(store)
    key_text, _ = read_schema_file(key_schema, "key schema file")
    value_text, _ = read_schema_file(value_schema, "value schema file")
    with metadata() as (config, meta):
        stores.create_store(
            meta,
            config,
            store,
            key_text,
            value_text,
            partitions=partitions,
            compression=compression,
            rollout_order=_rollout(rollout_order),
            auto_register_schemas=auto_register,
            versions_to_preserve=versions_to_preserve,
            replication_factor=replication_factor,
            partitioner_class=partitioner_class,
            partitioner_params=parse_key_values(partitioner_param, "--partitioner-param"),
        )
        _sync_dags(config, meta, store)
    typer.echo(f"created store '{store}' ({partitions} partitions, value schema 1)")


@store_app.command("list")
def list_(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the stores."""
    with metadata() as (_, meta):
        names = stores.list_stores(meta)
    typer.echo(json.dumps(names) if as_json else "\n".join(names))


@store_app.command("show")
def show(store: str = StoreArg, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show a store: settings, schemas, each region's current version, each version's status."""
    with metadata() as (config, meta):
        info = stores.describe_store(meta, store)
    if as_json:
        typer.echo(json.dumps(info.to_json(), indent=2))
        return
    settings = info.settings
    typer.echo(f"store:                {settings.name}")
    typer.echo(f"partitions:           {settings.partition_count}")
    typer.echo(f"partitioner:          {settings.partitioner.class_path}")
    typer.echo(f"partitioner params:   {json.dumps(dict(settings.partitioner.params))}")
    typer.echo(f"compression:          {settings.compression.name}")
    typer.echo(f"rollout order:        {', '.join(settings.rollout_order)}")
    typer.echo(f"auto-register:        {settings.auto_register_schemas}")
    typer.echo(f"versions to preserve: {settings.versions_to_preserve}")
    typer.echo(f"replication factor:   {_replication_text(config, settings.replication_factor)}")
    typer.echo(f"hook configs:         {json.dumps(settings.hook_configs)}")
    typer.echo(f"hybrid:               {_hybrid_text(settings.hybrid)}")
    typer.echo(f"scheduled repush:     {_repush_text(settings.repush)}")
    typer.echo(f"scheduled push:       {_push_text(settings.push)}")
    typer.echo(f"key schema:           {json.dumps(info.key_schema)}")
    for schema in info.value_schemas:
        typer.echo(f"value schema {schema.id}:       {json.dumps(schema.schema)}")
    for region, versions in info.regions.items():
        typer.echo(f"region {region}: current v{versions.current}, backup v{versions.backup}")
    for version in info.versions:
        regions = ", ".join(f"{r}={s.status}" for r, s in sorted(version.regions.items()))
        hybrid = f"  (hybrid: {_hybrid_text(version.hybrid)})" if version.hybrid else ""
        partitioner = "" if version.partitioner.is_default else f"  (partitioner: {version.partitioner.describe()})"
        typer.echo(f"version {version.number}: {version.status}  {regions}{hybrid}{partitioner}")


def _calendar_text(schedule: Schedule) -> str:
    holidays = f", {len(schedule.holidays)} holidays" if schedule.holidays else ""
    return f"({schedule.days} {schedule.hours} h {schedule.timezone}{holidays})"


def _repush_text(schedule: RepushSchedule | None) -> str:
    if schedule is None:
        return "no"
    return f"{schedule.cron} when the current version is older than {schedule.ttl_seconds} s {_calendar_text(schedule)}"


def _push_text(schedule: PushSchedule | None) -> str:
    if schedule is None:
        return "no"
    return f"{schedule.cron} from {schedule.input_template} {_calendar_text(schedule)}"


def _hybrid_text(hybrid: HybridSettings | None) -> str:
    if hybrid is None:
        return "no (batch-only)"
    return f"rewind {hybrid.rewind_seconds} s, offset lag threshold {hybrid.offset_lag_threshold}"


def _replication_text(config: ClusterConfig, factor: int | None) -> str:
    """The store's replication factor, or the default's value in each region (min(2, its instances))."""
    if factor:
        return str(factor)
    defaults = {region.name: placement.replication_factor(None, region.instances) for region in config.regions}
    if len(set(defaults.values())) == 1:
        return f"{next(iter(defaults.values()))} (the default: min(2, instances))"
    return ", ".join(f"{r} {n}" for r, n in defaults.items()) + " (the default: min(2, instances))"


@store_app.command("update")
def update(
    store: str = StoreArg,
    partitions: int = typer.Option(None, "--partitions", help="Partition count of future versions."),
    compression: str = typer.Option(
        None, "--compression", help="NO_OP, GZIP, ZSTD or ZSTD_WITH_DICT (a dictionary trained by each push)."
    ),
    rollout_order: str = typer.Option(None, "--rollout-order", help="Regions in rollout order, comma-separated."),
    auto_register: bool = typer.Option(None, "--auto-register-schemas/--no-auto-register-schemas"),
    versions_to_preserve: int = typer.Option(None, "--versions-to-preserve"),
    replication_factor: int = typer.Option(
        None,
        "--replication-factor",
        help="Replicas of every partition in each region (store.replication.factor); unlike the other settings it "
        "applies at once: the versions each region holds are re-placed.",
    ),
    hook_config: list[str] = typer.Option([], "--hook-config", help="Store-level hook config key=value."),
    remove_hook_config: list[str] = typer.Option([], "--remove-hook-config", help="Remove a hook config key."),
    rewind: str = typer.Option(
        None,
        "--hybrid-rewind-seconds",
        metavar="SECONDS",
        help="Make the store hybrid (nearline writes through real-time topics), or change its rewind: a new version "
        "replays the nearline writes of this many seconds before its END_OF_PUSH.",
    ),
    lag: str = typer.Option(
        None,
        "--hybrid-offset-lag-threshold",
        metavar="RECORDS",
        help="A hybrid store's region is ready to swap in a version once its real-time lag is at most this "
        f"(default {DEFAULT_OFFSET_LAG_THRESHOLD}).",
    ),
    no_hybrid: bool = typer.Option(
        False,
        "--no-hybrid",
        help="Make the store batch-only again from its next version (its real-time topics are kept until the store "
        "is deleted).",
    ),
    repush_schedule: str = typer.Option(
        None,
        "--repush-schedule",
        metavar="CRON|daily",
        help="Scheduled repush (log compaction) by the venice_repush__<store> DAG: a five-field cron expression in "
        "the calendar's zone, or 'daily' (each working day at opening); only inside working hours. Needs "
        "--repush-ttl.",
    ),
    repush_ttl: str = typer.Option(
        None,
        "--repush-ttl",
        metavar="SECONDS",
        help="A scheduled run repushes only when the store's current version is older than this; a hybrid store's "
        "repush also evicts records written more than this long ago (TTL repush).",
    ),
    repush_days: str = typer.Option(None, "--repush-days", help="Working days of the repush (default mon-fri)."),
    repush_hours: str = typer.Option(None, "--repush-hours", help="Working hours of the repush (default 9-17)."),
    repush_timezone: str = typer.Option(None, "--repush-timezone", help="IANA zone of the repush (default UTC)."),
    repush_holidays: str = typer.Option(None, "--repush-holidays", help="ISO dates without repush, comma-separated."),
    no_repush_schedule: bool = typer.Option(
        False, "--no-repush-schedule", help="Turn the scheduled repush off (its DAG disappears)."
    ),
    push_schedule: str = typer.Option(
        None,
        "--push-schedule",
        metavar="CRON|daily",
        help="Scheduled push: the venice_push__<store> DAG runs on its own, at a five-field cron expression in the "
        "calendar's zone, or 'daily' (or '@daily': each working day at opening); only inside working hours. Needs "
        "--push-input.",
    ),
    push_input: str = typer.Option(
        None,
        "--push-input",
        metavar="TEMPLATE",
        help="A scheduled run's input: a Jinja template Airflow renders for the run, an absolute path or a URL, e.g. "
        "'/data/users/{{ ds }}/' ({{ ds }}: the run's logical date; a variable no run provides is refused). A "
        "missing input fails the run, creating no version.",
    ),
    push_days: str = typer.Option(None, "--push-days", help="Working days of the push (default mon-fri)."),
    push_hours: str = typer.Option(None, "--push-hours", help="Working hours of the push (default 9-17, 0-24)."),
    push_timezone: str = typer.Option(None, "--push-timezone", help="IANA zone of the push (default UTC)."),
    push_holidays: str = typer.Option(None, "--push-holidays", help="ISO dates without push, comma-separated."),
    no_push_schedule: bool = typer.Option(
        False, "--no-push-schedule", help="Turn the scheduled push off (the DAG runs only when triggered again)."
    ),
    partitioner_class: str = typer.Option(
        None,
        "--partitioner-class",
        metavar="CLASS",
        help=PARTITIONER_CLASS_HELP + " Its params are the --partitioner-param given (none without). A hybrid store "
        "keeps its partitioner. A repush moves the store's data to it.",
    ),
    partitioner_param: list[str] = typer.Option(
        [],
        "--partitioner-param",
        metavar="KEY=VALUE",
        help=PARTITIONER_PARAM_HELP + " Without --partitioner-class: the class's params, all of them.",
    ),
) -> None:
    """Change a store's settings (they apply to the versions pushed afterwards)."""
    settings: tuple[object, ...] = (partitions, compression, rollout_order, auto_register, versions_to_preserve)
    settings = (*settings, replication_factor, rewind, lag, partitioner_class)
    repush = (repush_schedule, repush_ttl, repush_days, repush_hours, repush_timezone, repush_holidays)
    push = (push_schedule, push_input, push_days, push_hours, push_timezone, push_holidays)
    switches = (hook_config, remove_hook_config, no_hybrid, no_repush_schedule, no_push_schedule, partitioner_param)
    if all(value is None for value in (*settings, *repush, *push)) and not any(switches):
        raise ConfigError(
            f"nothing to update in store '{store}': give a setting to change (venice store update --help)"
        )
    if no_hybrid and (rewind is not None or lag is not None):
        raise ConfigError("--no-hybrid cannot be given with --hybrid-rewind-seconds or --hybrid-offset-lag-threshold")
    calendar = CalendarUpdate.of_options(repush_days, repush_hours, repush_timezone, repush_holidays)
    push_calendar = CalendarUpdate.of_options(push_days, push_hours, push_timezone, push_holidays)
    with metadata() as (config, meta):
        warnings = stores.update_store(
            meta,
            config,
            store,
            partitions=partitions,
            compression=compression,
            rollout_order=_rollout(rollout_order),
            auto_register_schemas=auto_register,
            versions_to_preserve=versions_to_preserve,
            replication_factor=replication_factor,
            hook_configs=parse_key_values(hook_config, "--hook-config"),
            remove_hook_configs=remove_hook_config,
            hybrid_rewind_seconds=rewind,
            hybrid_offset_lag_threshold=lag,
            hybrid=False if no_hybrid else None,
            repush_schedule=repush_schedule,
            repush_ttl_seconds=repush_ttl,
            repush_calendar=calendar,
            repush=False if no_repush_schedule else None,
            push_schedule=push_schedule,
            push_input=push_input,
            push_calendar=push_calendar,
            push=False if no_push_schedule else None,
            partitioner_class=partitioner_class,
            partitioner_params=parse_key_values(partitioner_param, "--partitioner-param")
            if partitioner_param
            else None,
        )
        _sync_dags(config, meta, store)  # its rollout order or schedules shape its DAGs
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(f"updated store '{store}'")


@store_app.command("delete")
def delete(store: str = StoreArg) -> None:
    """Delete a store, all its versions and its topics in every region."""
    with metadata() as (config, meta):
        stores.delete_store(meta, config, store)
        _sync_dags(config, meta, store)
    typer.echo(f"deleted store '{store}'")


@store_app.command("rollback")
def rollback(
    store: str = StoreArg,
    region: list[str] = typer.Option(
        [], "--region", help="A region to roll back (repeat for more; default: every region of the store)."
    ),
) -> None:
    """Return regions to their backup version (the version each served before its current one), outside any
    rollout. Refused, changing nothing, if any named region has no backup version."""
    with metadata() as (_, meta):
        rolled = rollback_store(meta, store, region or None)
    for name, (previous, now) in rolled.items():
        typer.echo(f"rolled '{store}' back in {name}: version {previous} -> version {now}")


@schema_app.command("add")
def schema_add(
    store: str = StoreArg,
    value_schema: Path = typer.Option(..., "--value-schema", help="Avro schema file of the new value schema."),
) -> None:
    """Register a new value schema; it must be compatible with every existing one.

    The lifecycle hooks are asked first (pre_schema_registration): exits 3 when one refuses it."""
    text, _ = read_schema_file(value_schema, "value schema file")
    with metadata() as (config, meta):
        schema_id = stores.add_value_schema(meta, config, store, text)
    typer.echo(f"value schema {schema_id} registered for '{store}'")


@schema_app.command("list")
def schema_list(store: str = StoreArg, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List a store's value schemas with their ids."""
    with metadata() as (_, meta):
        schemas = stores.list_value_schemas(meta, store)
    if as_json:
        typer.echo(json.dumps([{"id": i, "schema": json.loads(s)} for i, s in schemas], indent=2))
    else:
        for schema_id, schema in schemas:
            typer.echo(f"{schema_id}\t{schema}")
