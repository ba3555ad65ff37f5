"""A store as its readers see it, typed: its settings (what a push and its rollout read), and its description (the
settings, schemas, each region's current and backup version, each version's status per region), which `venice
store show --json` prints through `to_json`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from venice_core.model.hybrid import HybridSettings
from venice_core.model.status import ExecutionStatus, VersionStatus
from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.partitioner_config import PartitionerConfig
from venice_core.protocol.serde import AvroSchemaJson
from venice_core.schedules.push import PushSchedule
from venice_core.schedules.repush import RepushSchedule


@dataclass(frozen=True)
class StoreSettings:
    """What a push and its rollout read of a store."""

    name: str
    partition_count: int
    compression: CompressionStrategy
    rollout_order: list[str]
    auto_register_schemas: bool
    versions_to_preserve: int
    hook_configs: dict[str, str]
    hybrid: HybridSettings | None = None
    repush: RepushSchedule | None = None
    push: PushSchedule | None = None
    replication_factor: int | None = None  # None: min(2, a region's instances)
    partitioner: PartitionerConfig = field(default_factory=PartitionerConfig)  # of the versions created from now on


@dataclass(frozen=True)
class RegisteredSchema:
    """A value schema of the store, with the id its records carry."""

    id: int
    schema: AvroSchemaJson


@dataclass(frozen=True)
class RegionVersions:
    """What a region serves (`current`) and keeps to roll back to (`backup`); 0 is no version."""

    current: int = 0
    backup: int = 0


@dataclass(frozen=True)
class RegionPushStatus:
    """A version's push status in one region, with the time it last changed."""

    status: ExecutionStatus
    updated_at: float
    details: str


@dataclass(frozen=True)
class VersionDescription:
    number: int
    status: VersionStatus
    reason: str
    push_job_id: str | None
    created_at: float
    partition_count: int
    compression: CompressionStrategy
    hybrid: HybridSettings | None  # the settings it was created with (None: batch-only)
    regions: Mapping[str, RegionPushStatus]
    partitioner: PartitionerConfig = field(default_factory=PartitionerConfig)  # the one it was created with

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "status": self.status.value,
            "reason": self.reason,
            "push_job_id": self.push_job_id,
            "created_at": self.created_at,
            "partition_count": self.partition_count,
            "compression": self.compression.name,
            "hybrid": None if self.hybrid is None else self.hybrid.to_json(),
            "partitioner_class": self.partitioner.class_path,
            "partitioner_params": dict(self.partitioner.params),
            "regions": {
                region: {"status": s.status.value, "updated_at": s.updated_at, "details": s.details}
                for region, s in self.regions.items()
            },
        }


@dataclass(frozen=True)
class StoreDescription:
    settings: StoreSettings
    key_schema: AvroSchemaJson
    value_schemas: tuple[RegisteredSchema, ...]  # oldest first
    largest_used_version: int
    regions: Mapping[str, RegionVersions]  # in rollout order
    versions: tuple[VersionDescription, ...]  # oldest first

    @property
    def name(self) -> str:
        return self.settings.name

    def version(self, number: int) -> VersionDescription | None:
        return next((v for v in self.versions if v.number == number), None)

    def version_of_push(self, push_job_id: str) -> VersionDescription | None:
        return next((v for v in self.versions if v.push_job_id == push_job_id), None)

    def serving(self) -> dict[str, int]:
        """Each region's current version (0: none)."""
        return {region: versions.current for region, versions in self.regions.items()}

    def schemas_by_id(self) -> dict[int, AvroSchemaJson]:
        return {entry.id: entry.schema for entry in self.value_schemas}

    def to_json(self) -> dict[str, Any]:
        s = self.settings
        return {
            "name": s.name,
            "key_schema": self.key_schema,
            "value_schemas": [{"id": entry.id, "schema": entry.schema} for entry in self.value_schemas],
            "partition_count": s.partition_count,
            "compression": s.compression.name,
            "rollout_order": list(s.rollout_order),
            "auto_register_schemas": s.auto_register_schemas,
            "versions_to_preserve": s.versions_to_preserve,
            "replication_factor": s.replication_factor,
            "partitioner_class": s.partitioner.class_path,
            "partitioner_params": dict(s.partitioner.params),
            "hook_configs": dict(s.hook_configs),
            "hybrid": None if s.hybrid is None else s.hybrid.to_json(),
            "repush_schedule": None if s.repush is None else s.repush.to_json(),
            "push_schedule": None if s.push is None else s.push.to_json(),
            "largest_used_version": self.largest_used_version,
            "regions": {region: {"current": v.current, "backup": v.backup} for region, v in self.regions.items()},
            "versions": [v.to_json() for v in self.versions],
        }
