"""A partitioner class of the tests' own, as a user writes one: loaded only where `venice.partitioner.classes` names
it (the session's platform does not)."""

from __future__ import annotations

from collections.abc import Mapping

from venice_core.protocol.partitioner import check_params
from venice_core.protocol.serde import AvroSchemaJson

LAST_BYTE_PARTITIONER = "tests.support.partitioners.LastBytePartitioner"


class LastBytePartitioner:
    """The serialised key's last byte modulo the partition count: nothing like MD5's partitions. No params."""

    def __init__(self, params: Mapping[str, str], key_schema: AvroSchemaJson) -> None:
        check_params(type(self).__name__, params, ())

    def partition(self, serialized_key: bytes, partition_count: int) -> int:
        return serialized_key[-1] % partition_count if serialized_key else 0
