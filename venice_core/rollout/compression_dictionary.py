"""The rollout's `compression_dictionary` step: a ZSTD_WITH_DICT store's push trains its new version's ZSTD dictionary
from a bounded sample of the push's values before the version is created, as Venice's push job does before it asks
for a version, and version creation sends it in START_OF_PUSH. A push samples its input (`spark.inputs.input_sample`:
the values serialised as the job stores them), a repush its source version topic (`spark.inputs.topic_sample`: the
values decompressed with the source's own compression and dictionary). The trainer is zstd's
(`compression.train_dictionary`), the bounds the push's confs (`rollout.dictionary_confs`). A store of any other
compression passes through at once.

The dictionary is the step's result: in the DAG its XCom (base64, with the figures said of it), kept small by
`compression.dictionary.size.limit`."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from venice_core.controller import repush_config, stores
from venice_core.controller.hook_decisions import HookDecisions
from venice_core.protocol.compression import decompressor, train_dictionary
from venice_core.pubsub.control import version_dictionary
from venice_core.rollout import dictionary_confs
from venice_core.spark.inputs import input_sample, topic_sample


@dataclass(frozen=True)
class TrainedDictionary:
    """A trained dictionary, and what it was trained from (the values, their bytes) in how long."""

    dictionary: bytes
    samples: int
    sample_bytes: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "dictionary": base64.b64encode(self.dictionary).decode(),
            "samples": self.samples,
            "sample_bytes": self.sample_bytes,
            "seconds": round(self.seconds, 3),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrainedDictionary:
        return cls(
            base64.b64decode(data["dictionary"]),
            int(data["samples"]),
            int(data["sample_bytes"]),
            float(data["seconds"]),
        )


def train(
    rollout: HookDecisions, input_path: str, key_field: str, value_field: str, confs: Mapping[str, str]
) -> TrainedDictionary | None:
    """The new version's dictionary, for a ZSTD_WITH_DICT store (None for any other). A push's input or a repush's
    source that cannot be sampled is a PushJobError (nothing is created)."""
    r = rollout
    info = stores.describe_store(r.meta, r.store)
    if not info.settings.compression.needs_dictionary:
        return None
    bounds = dictionary_confs.parse(confs)
    started = time.monotonic()
    if repush_config.is_repush(confs):
        samples, where = _source_values(r, confs, bounds.sample_bytes)
    else:
        samples = input_sample.sample_values(info, input_path, key_field, value_field, bounds.sample_bytes)
        where = f"input {input_path}"
    size = sum(map(len, samples))
    # Nothing to train on (an empty push): any bytes make a valid raw-content dictionary; the value schema's text is
    # the store's own. Later nearline writes of a hybrid version are compressed with it.
    filler = [json.dumps(info.value_schemas[-1].schema).encode()]
    dictionary = train_dictionary(samples if size else filler, bounds.dictionary_bytes)
    trained = TrainedDictionary(dictionary, len(samples), size, time.monotonic() - started)
    r.progress(
        f"trained a {len(dictionary)}-byte ZSTD dictionary from {len(samples)} values ({size} bytes) of {where} in "
        f"{trained.seconds:.2f}s"
    )
    return trained


def _source_values(rollout: HookDecisions, confs: Mapping[str, str], budget: int) -> tuple[list[bytes], str]:
    """A repush's sample of its source version's values, decompressed with its compression and dictionary, and
    which topic it is. The source as version creation will resolve it (the version current now, unless pinned)."""
    repush = repush_config.parse(confs)
    source = repush_config.resolve(rollout.meta, rollout.config, rollout.store, repush)
    dictionary = version_dictionary(source.compression, source.bootstrap, source.topic)
    ends = [(repush.end_offsets or {}).get(str(partition), end) for partition, end in enumerate(source.end_offsets)]
    decompress = decompressor(source.compression, dictionary)
    return topic_sample.sample_values(source.bootstrap, source.topic, ends, decompress, budget), source.topic
