"""Offsets per partition as their text form: JSON such as `{"0": 12, "1": 0}`, where a stream's `endingOffsets` and a
repush's pinned end offsets (`kafka.input.end.offsets`) give them."""

from __future__ import annotations

import json


def parse_partition_offsets(text: str) -> dict[str, int]:
    """The offsets, keyed by partition number as text; ValueError when `text` is not such JSON (a non-numeric
    partition, a negative or non-integer offset)."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not all(
        str(k).isdigit() and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in data.items()
    ):
        raise ValueError(f"not JSON offsets per partition: {text!r}")
    return {str(int(k)): int(v) for k, v in data.items()}
