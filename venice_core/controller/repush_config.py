"""A repush's configs and its source, as Venice's push job and controller have them.

A repush is a push whose input is one of the store's version topics (`source.kafka=true`). Its configs are push
confs with Venice's names (`kafka.input.topic`, `kafka.input.fabric`, `kafka.input.broker.url`,
`kafka.input.max.records.per.mapper`, `kafka.input.combiner.enabled`, `repush.ttl.enable`, `repush.ttl.seconds`,
`repush.ttl.start.timestamp`, `rewind.time.in.seconds.override`). `parse` checks them without the platform;
`resolve` picks the source as Venice's controller does (the named region's current version; with no region, the
region whose current version is largest; an explicit topic must belong to the store and exist) and checks
everything a repush needs before anything is created. `resolved_confs` pins what was resolved (topic, region,
broker, the TTL's start, and each source partition's end offset, `kafka.input.end.offsets`) into the confs the
version is created with, so every step and a retried job read the same records, even from a live hybrid source
whose version topic grows.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from venice_core.config import ClusterConfig, conf_flag
from venice_core.controller import stores, versions
from venice_core.errors import ConfigError, RepushRefused
from venice_core.meta import MetadataStore
from venice_core.protocol.compression import CompressionStrategy
from venice_core.pubsub import admin
from venice_core.pubsub.offsets import parse_partition_offsets
from venice_core.schedules.repush import RepushDecision, decide

SOURCE_KAFKA = "source.kafka"
KAFKA_INPUT_TOPIC = "kafka.input.topic"
KAFKA_INPUT_FABRIC = "kafka.input.fabric"
KAFKA_INPUT_BROKER_URL = "kafka.input.broker.url"
KAFKA_INPUT_MAX_RECORDS_PER_MAPPER = "kafka.input.max.records.per.mapper"
KAFKA_INPUT_COMBINER_ENABLED = "kafka.input.combiner.enabled"
REPUSH_TTL_ENABLE = "repush.ttl.enable"
REPUSH_TTL_SECONDS = "repush.ttl.seconds"
REPUSH_TTL_START_TIMESTAMP = "repush.ttl.start.timestamp"
REWIND_TIME_IN_SECONDS_OVERRIDE = "rewind.time.in.seconds.override"
# Ours, not Venice's: each source partition's end offset, pinned when the version is created (JSON {"0": n, ...}).
KAFKA_INPUT_END_OFFSETS = "kafka.input.end.offsets"
# Every conf a repush reads (`rollout.push_confs` refuses any other but Spark's), the pinned end offsets included.
REPUSH_CONFS = frozenset(
    {
        SOURCE_KAFKA,
        KAFKA_INPUT_TOPIC,
        KAFKA_INPUT_FABRIC,
        KAFKA_INPUT_BROKER_URL,
        KAFKA_INPUT_MAX_RECORDS_PER_MAPPER,
        KAFKA_INPUT_COMBINER_ENABLED,
        REPUSH_TTL_ENABLE,
        REPUSH_TTL_SECONDS,
        REPUSH_TTL_START_TIMESTAMP,
        REWIND_TIME_IN_SECONDS_OVERRIDE,
        KAFKA_INPUT_END_OFFSETS,
    }
)

DEFAULT_MAX_RECORDS_PER_MAPPER = 5_000_000
# Venice's DEFAULT_RE_PUSH_REWIND_IN_SECONDS_OVERRIDE: a repush itself can take hours, so the new version of a
# hybrid source replays the real-time topics from a day before its END_OF_PUSH.
DEFAULT_REPUSH_REWIND_SECONDS = 24 * 3600
REPUSH_PREFIX = "venice_re_push_"
TTL_REPUSH_PREFIX = "venice_ttl_re_push_"
# The input a repush names (nothing reads it: the job reads the topic in its confs).
REPUSH_INPUT = "venice-repush"


@dataclass(frozen=True)
class RepushConfig:
    topic: str | None = None
    fabric: str | None = None
    broker_url: str | None = None
    max_records_per_mapper: int = DEFAULT_MAX_RECORDS_PER_MAPPER
    combiner: bool = False
    ttl_enable: bool = False
    ttl_seconds: int | None = None
    ttl_start_timestamp: int | None = None
    rewind_override: int | None = None
    end_offsets: Mapping[str, int] | None = None  # pinned at version creation (`kafka.input.end.offsets`)


def _int(confs: Mapping[str, str], key: str, minimum: int) -> int | None:
    if key not in confs or str(confs[key]).strip() == "":
        return None
    try:
        value = int(str(confs[key]).strip())
    except ValueError:
        raise ConfigError(f"{key} must be a whole number, got {confs[key]!r}") from None
    if value < minimum:
        raise ConfigError(f"{key} must be at least {minimum}, got {value}")
    return value


def _set(confs: Mapping[str, str], key: str) -> bool:
    """Is the flag `true`? Lenient (a malformed value is False here; `parse` refuses it)."""
    return str(confs.get(key, "false")).strip().lower() == "true"


def is_repush(confs: Mapping[str, str]) -> bool:
    """Does `source.kafka=true` make this push a repush? (A malformed value is refused by `parse`.)"""
    return _set(confs, SOURCE_KAFKA)


def _job_id_prefix(ttl: bool) -> str:
    return TTL_REPUSH_PREFIX if ttl else REPUSH_PREFIX


def job_id_prefix(confs: Mapping[str, str]) -> str:
    """The push job id's prefix for a push's confs: Venice's for a repush (with or without TTL), else none."""
    return _job_id_prefix(_set(confs, REPUSH_TTL_ENABLE)) if is_repush(confs) else ""


def end_offsets(confs: Mapping[str, str]) -> dict[str, int] | None:
    """The pinned end offset of each source partition (None: not pinned)."""
    text = confs.get(KAFKA_INPUT_END_OFFSETS)
    if not text:
        return None
    try:
        return parse_partition_offsets(text)
    except ValueError:
        raise ConfigError(f"{KAFKA_INPUT_END_OFFSETS} must be JSON offsets per partition, got {text!r}") from None


def parse(confs: Mapping[str, str]) -> RepushConfig:
    """The repush's configs, checked (ConfigError names the conf); the source itself is `resolve`'s."""
    if not conf_flag(confs, SOURCE_KAFKA):
        raise ConfigError(f"a repush needs {SOURCE_KAFKA}=true")
    ttl_enable = conf_flag(confs, REPUSH_TTL_ENABLE)
    ttl_seconds = _int(confs, REPUSH_TTL_SECONDS, 0)
    ttl_start = _int(confs, REPUSH_TTL_START_TIMESTAMP, 0)
    if ttl_seconds is not None and ttl_start is not None:
        raise ConfigError(f"both {REPUSH_TTL_SECONDS} and {REPUSH_TTL_START_TIMESTAMP} are set: set only one")
    if (ttl_seconds is not None or ttl_start is not None) and not ttl_enable:
        raise ConfigError(
            f"{REPUSH_TTL_SECONDS if ttl_seconds is not None else REPUSH_TTL_START_TIMESTAMP} needs "
            f"{REPUSH_TTL_ENABLE}=true"
        )
    topic = (confs.get(KAFKA_INPUT_TOPIC) or "").strip() or None
    if topic is not None and re.fullmatch(r".+_v[1-9][0-9]*", topic) is None:
        raise ConfigError(f"{KAFKA_INPUT_TOPIC} must be a version topic (<store>_v<N>), got {topic!r}")
    return RepushConfig(
        topic=topic,
        fabric=(confs.get(KAFKA_INPUT_FABRIC) or "").strip() or None,
        broker_url=(confs.get(KAFKA_INPUT_BROKER_URL) or "").strip() or None,
        max_records_per_mapper=_int(confs, KAFKA_INPUT_MAX_RECORDS_PER_MAPPER, 1) or DEFAULT_MAX_RECORDS_PER_MAPPER,
        combiner=conf_flag(confs, KAFKA_INPUT_COMBINER_ENABLED),
        ttl_enable=ttl_enable,
        ttl_seconds=ttl_seconds,
        ttl_start_timestamp=ttl_start,
        rewind_override=_int(confs, REWIND_TIME_IN_SECONDS_OVERRIDE, 0),
        end_offsets=end_offsets(confs),
    )


def topic_version(topic: str) -> tuple[str, int]:
    """(store, version) of a version topic name."""
    store, _, number = topic.rpartition("_v")
    return store, int(number)


def pick_region(current: Mapping[str, int], order: list[str], fabric: str | None) -> tuple[str, int]:
    """The region to read and its current version: the named one's, else the region whose current version is
    largest (the earlier one in `order` on a tie). RepushRefused when there is none."""
    if fabric is not None:
        number = current.get(fabric, 0)
        if not number:
            raise RepushRefused(f"region {fabric} serves no version of the store: nothing to repush from it")
        return fabric, number
    serving = [(region, current.get(region, 0)) for region in order if current.get(region, 0)]
    if not serving:
        raise RepushRefused("the store has no version yet: push one before a repush")
    return max(serving, key=lambda item: (item[1], -order.index(item[0])))


def _unprefixed(config: ClusterConfig, topic: str, fabric: str | None) -> str:
    """A version topic's name without its region's prefix (regions sharing a broker prefix their topics), so
    `store_v7` and `dc-1.store_v7` both name version 7."""
    regions = [config.region(fabric)] if fabric is not None else list(config.regions)
    for region in sorted(regions, key=lambda r: -len(r.topic_prefix)):
        if region.topic_prefix and topic.startswith(region.topic_prefix):
            return topic[len(region.topic_prefix) :]
    return topic


@dataclass(frozen=True)
class RepushSource:
    """The version topic a repush reads, and what the job and the new version need to know of it."""

    store: str
    region: str
    version: int
    topic: str
    bootstrap: str
    partitions: int
    compression: CompressionStrategy
    hybrid: bool  # the source version is hybrid: its new version rewinds a day unless overridden
    ttl_start_ms: int | None  # records written before it are dropped (None: no TTL)
    end_offsets: tuple[int, ...] = ()  # each partition's end offset when resolved


def resolve(
    meta: MetadataStore,
    config: ClusterConfig,
    store: str,
    repush: RepushConfig,
    now_ms: int | None = None,
    reachable_timeout: float = 10.0,
    topics: Any = admin,
) -> RepushSource:
    """The repush's source, checked before anything is created (RepushRefused, ConfigError, StoreNotFound or an
    unreachable broker's ComponentError). `topics`: `pubsub.admin` (`check_reachable`, `partition_count`,
    `end_offsets`), or a test's in-memory one."""
    info = stores.describe_store(meta, store)
    settings = info.settings
    if repush.ttl_enable and settings.hybrid is None:
        raise RepushRefused(f"repush with TTL is only supported for hybrid stores; '{store}' is batch-only")
    if repush.fabric is not None:
        config.region(repush.fabric)  # ConfigError: unknown region
    current = info.serving()
    order = list(dict.fromkeys([config.source_region, *settings.rollout_order, *config.region_names]))
    if repush.topic is not None:
        owner, number = topic_version(_unprefixed(config, repush.topic, repush.fabric))
        if owner != store:
            raise RepushRefused(f"{KAFKA_INPUT_TOPIC} {repush.topic} is a topic of store '{owner}', not of '{store}'")
        if info.version(number) is None:
            raise RepushRefused(f"{repush.topic} no longer exists: '{store}' has no version {number}")
        if repush.fabric is not None:
            region = repush.fabric
        else:  # the region serving it, else the source region's copy
            region = next((r for r in order if current.get(r) == number), config.source_region)
    else:
        region, number = pick_region(current, order, repush.fabric)
    region_config = config.region(region)
    topic = region_config.version_topic(store, number)
    bootstrap = repush.broker_url or region_config.kafka_bootstrap
    topics.check_reachable(bootstrap, timeout=reachable_timeout)
    partitions = topics.partition_count(bootstrap, topic)
    if partitions is None:
        raise RepushRefused(f"region {region} has no version {number} of '{store}' (no topic {topic} at {bootstrap})")
    version = versions.get_version(meta, store, number)
    ttl_start: int | None = None
    if repush.ttl_enable:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if repush.ttl_start_timestamp is not None:
            ttl_start = repush.ttl_start_timestamp
        else:
            assert settings.hybrid is not None  # TTL was refused above for a batch-only store
            seconds = repush.ttl_seconds if repush.ttl_seconds is not None else settings.hybrid.rewind_seconds
            ttl_start = now - seconds * 1000
    return RepushSource(
        store,
        region,
        number,
        topic,
        bootstrap,
        partitions,
        CompressionStrategy[version.compression],
        version.lifecycle.hybrid is not None,
        ttl_start,
        tuple(topics.end_offsets(bootstrap, topic, partitions)),
    )


def resolved_confs(confs: Mapping[str, str], source: RepushSource) -> dict[str, str]:
    """The confs with the resolved source pinned: every step, and a retried job, reads the same records (topic,
    each partition's end offset) with the same TTL cut-off."""
    pinned = {k: v for k, v in confs.items() if k != REPUSH_TTL_SECONDS}
    pinned.update(
        {
            SOURCE_KAFKA: "true",
            KAFKA_INPUT_TOPIC: source.topic,
            KAFKA_INPUT_FABRIC: source.region,
            KAFKA_INPUT_BROKER_URL: source.bootstrap,
            KAFKA_INPUT_END_OFFSETS: json.dumps({str(p): end for p, end in enumerate(source.end_offsets)}),
        }
    )
    if source.ttl_start_ms is not None:
        pinned[REPUSH_TTL_START_TIMESTAMP] = str(source.ttl_start_ms)
    return pinned


def source_version(config: ClusterConfig, confs: Mapping[str, str]) -> int:
    """The version a repush's (resolved) confs read."""
    return topic_version(_unprefixed(config, confs[KAFKA_INPUT_TOPIC], confs.get(KAFKA_INPUT_FABRIC)))[1]


def replay_after_ms(repush: RepushConfig) -> int | None:
    """A TTL repush's new version replays no nearline write at or before the TTL cut-off (the rewind, a day by
    default, would otherwise bring back what the TTL evicted): its replay starts after the cut-off."""
    return repush.ttl_start_timestamp if repush.ttl_enable else None


def new_version_rewind(repush: RepushConfig, source_hybrid: bool) -> int | None:
    """The rewind of the version a repush creates, if it differs from the store's: the override, else a day for a
    hybrid source (Venice's default), else the store's own (None)."""
    if repush.rewind_override is not None:
        return repush.rewind_override
    return DEFAULT_REPUSH_REWIND_SECONDS if source_hybrid else None


def repush_job_id(store: str, repush: RepushConfig, suffix: str | None = None) -> str:
    """Venice's repush ids: `venice_re_push_...`, or `venice_ttl_re_push_...` with TTL."""
    return f"{_job_id_prefix(repush.ttl_enable)}{store}-{suffix or uuid.uuid4().hex[:12]}"[:128]


def scheduled_repush(
    meta: MetadataStore, store: str, now: float | None = None
) -> tuple[RepushDecision, dict[str, str]]:
    """A scheduled maintenance run's decision (`repush_schedule.decide`: repush only when the store's current
    version, the newest one a region serves, is older than the threshold), and the repush's confs: a TTL repush
    with the threshold's seconds for a hybrid store, a plain one for a batch-only store (which refuses TTL)."""
    settings = stores.store_settings(meta, store)
    if settings.repush is None:
        return RepushDecision(False, f"store '{store}' has no scheduled repush"), {}
    info = stores.describe_store(meta, store)
    current = max(info.serving().values(), default=0)
    version = info.version(current)
    created = None if version is None else version.created_at
    in_flight = versions.version_in_flight(meta, store)
    decision = decide(current, created, settings.repush.ttl_seconds, in_flight, now)
    ttl = {REPUSH_TTL_ENABLE: "true", REPUSH_TTL_SECONDS: str(settings.repush.ttl_seconds)}
    return decision, ttl if settings.hybrid is not None else {}
