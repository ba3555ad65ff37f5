"""Venice's default partitioner: the MD5 digest of the serialised key, as a big-endian unsigned integer, modulo
the partition count (`partition_for`, which `DefaultVenicePartitioner` is). The Spark job, the writers and every
reader partition through a `VenicePartitioner`: this one unless the version pinned another
(`protocol.partitioner_config`).

A partitioner is a class built from its params (a store's `partitioner.params`, text) and the store's key schema,
which refuses params it cannot work with (a `ConfigError` naming the problem: `venice store create/update` builds it
once to check them), and answers `partition(serialized_key, partition_count)`. It must be deterministic (every
writer and reader of a version computes the same partition) and picklable (the push job ships it to its executors).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Collection, Mapping
from typing import Any, Protocol

import fastavro

from venice_core.errors import ConfigError, InvalidRecord
from venice_core.protocol.serde import AvroSchemaJson

DEFAULT_PARTITIONER_CLASS = "venice_core.protocol.partitioner.DefaultVenicePartitioner"
KEY_FIELD_PARTITIONER_CLASS = "venice_core.protocol.partitioner.KeyFieldVenicePartitioner"


def partition_for(serialized_key: bytes, partition_count: int) -> int:
    return int.from_bytes(hashlib.md5(serialized_key).digest(), "big") % partition_count


class VenicePartitioner(Protocol):
    def partition(self, serialized_key: bytes, partition_count: int) -> int:
        """The partition of a key, from 0 to `partition_count` - 1."""
        ...


class PartitionerClass(Protocol):
    """A partitioner's class: built from its params and the store's key schema (ConfigError for params it refuses)."""

    def __call__(self, params: Mapping[str, str], key_schema: AvroSchemaJson) -> VenicePartitioner: ...


def check_params(partitioner: str, params: Mapping[str, str], known: Collection[str]) -> None:
    """ConfigError naming the first param the partitioner does not take."""
    for name in params:
        if name not in known:
            takes = f"its params: {', '.join(sorted(known))}" if known else "it takes none"
            raise ConfigError(f"partitioner {partitioner} takes no param '{name}' ({takes})")


class DefaultVenicePartitioner:
    """MD5 of the serialised key mod the partition count (Venice's `DefaultVenicePartitioner`). No params."""

    def __init__(self, params: Mapping[str, str] | None = None, key_schema: AvroSchemaJson = None) -> None:
        check_params(type(self).__name__, params or {}, ())

    partition = staticmethod(partition_for)  # the function itself: no extra call on the read path


DEFAULT_PARTITIONER = DefaultVenicePartitioner()
KEY_FIELD = "key.field"


class KeyFieldVenicePartitioner:
    """Partitions a record key by one of its fields (param `key.field`): the MD5 of that field's serialised value mod
    the partition count. Every key with the same value of the field lands in one partition, which is the partition
    the default partitioner gives that value in a store keyed by the field alone, with as many partitions: keys
    `{member_id, item_id}` partitioned by `member_id` sit with the member's records of a store keyed by `member_id`
    (a partition-by-partition join), and one member's keys are one partition, so a batch get of them is one
    request to one replica.

    A field's bytes are cut out of the serialised key, not serialised again: a record's encoding is its fields' in
    order, so the field starts where the fields before it end. Where they and it are primitives (the usual composite
    key), their encodings are skipped here (about 1 us a key); otherwise fastavro reads the fields up to it, and
    before it, and the stream's positions say (about 8 us)."""

    def __init__(self, params: Mapping[str, str], key_schema: AvroSchemaJson) -> None:
        name = type(self).__name__
        check_params(name, params, (KEY_FIELD,))
        field_name = params.get(KEY_FIELD, "").strip()
        if not field_name:
            raise ConfigError(
                f"partitioner {name} needs the param {KEY_FIELD}: the field of the record key to partition by"
            )
        if not isinstance(key_schema, dict) or key_schema.get("type") != "record":
            raise ConfigError(
                f"partitioner {name} partitions by a field of a record key; the key schema is {json.dumps(key_schema)}"
            )
        fields = list(key_schema.get("fields") or [])
        names = [str(f.get("name")) for f in fields]
        if field_name not in names:
            raise ConfigError(
                f"partitioner {name}: {KEY_FIELD}={field_name} is not a field of the key schema "
                f"(its fields: {', '.join(names)})"
            )
        index = names.index(field_name)
        self.field = field_name
        kinds = [_primitive(f.get("type")) for f in fields[: index + 1]]
        self._kinds = None if None in kinds else tuple(kind for kind in kinds if kind is not None)
        self._before = self._prefix(key_schema, fields[:index]) if index else None
        self._through = self._prefix(key_schema, fields[: index + 1])

    @staticmethod
    def _prefix(key_schema: dict[str, Any], fields: list[Any]) -> Any:
        """The key's record cut after `fields`: read with it, a key's stream stops where they end."""
        plain = {k: v for k, v in key_schema.items() if not k.startswith("__")}  # fastavro's parsed form's marks
        return fastavro.parse_schema({**plain, "fields": fields})

    def partition(self, serialized_key: bytes, partition_count: int) -> int:
        try:
            start, end = self._span(serialized_key)
        except (IndexError, ValueError, EOFError) as exc:
            raise InvalidRecord(f"key bytes {serialized_key[:32].hex()} do not fit the key schema: {exc}") from None
        if not start <= end <= len(serialized_key):
            raise InvalidRecord(f"key bytes {serialized_key[:32].hex()} do not fit the key schema")
        return partition_for(serialized_key[start:end], partition_count)

    def _span(self, serialized_key: bytes) -> tuple[int, int]:
        """Where the field's encoding starts and ends in the key's."""
        if self._kinds is not None:
            start = end = 0
            for kind in self._kinds:
                start, end = end, _skip(serialized_key, end, kind)
            return start, end
        stream = io.BytesIO(serialized_key)
        start = 0
        if self._before is not None:
            fastavro.schemaless_reader(stream, self._before, None)
            start = stream.tell()
            stream.seek(0)
        fastavro.schemaless_reader(stream, self._through, None)
        return start, stream.tell()


_FIXED_SIZES = {"null": 0, "boolean": 1, "float": 4, "double": 8}
_VARINTS = ("int", "long")
_SIZED = ("string", "bytes")


def _primitive(schema: Any) -> str | None:
    """The Avro primitive a field's schema encodes as (a logical type's underlying one), else None."""
    if isinstance(schema, dict):
        schema = schema.get("type")
    if isinstance(schema, str) and (schema in _FIXED_SIZES or schema in _VARINTS or schema in _SIZED):
        return schema
    return None


def _varint_end(data: bytes, at: int) -> int:
    while data[at] & 0x80:
        at += 1
    return at + 1


def _skip(data: bytes, at: int, kind: str) -> int:
    """Where the encoding of a `kind` primitive that starts at `at` ends (IndexError past the key's end)."""
    if kind in _VARINTS:
        return _varint_end(data, at)
    if kind in _SIZED:  # a zig-zag varint length (seven bits a byte, little-endian), then that many bytes
        zigzag, shift = 0, 0
        while True:
            byte = data[at]
            at += 1
            zigzag |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
        return at + ((zigzag >> 1) ^ -(zigzag & 1))
    return at + _FIXED_SIZES[kind]
