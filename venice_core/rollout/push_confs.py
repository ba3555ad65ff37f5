"""The check of a push's confs (`venice push --conf`, `venice repush --conf`, a DAG run's `conf`): a key that
nothing reads is refused before anything starts, since a typo (`repush.ttl.enabel=true`) would otherwise run the
job without the setting and say nothing; so is a value the key's reader would refuse later (a boolean conf is
`true` or `false`, `config.parse_bool`). The known keys are defined where they are read: the push job's in
`spark.submit`, a repush's in `spark.repush_config`."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from venice_core.errors import ConfigError
from venice_core.spark import repush_config
from venice_core.spark.submit import JOB_FLAGS, SPARK_PREFIX, TEST_FAULT_PREFIX, job_flags

PUSH_CONFS = frozenset({*JOB_FLAGS, repush_config.SOURCE_KAFKA})  # `source.kafka=true` makes a push a repush
PASSED_TO_SPARK = (SPARK_PREFIX, TEST_FAULT_PREFIX)


def check_push_confs(confs: Mapping[str, str]) -> None:
    """ConfigError naming the first key that neither a push nor, with `source.kafka=true`, a repush reads, with the
    nearest known key (or the known keys, when none is near); then a value the push job or the repush refuses
    (`allow.empty.input=yes`, `repush.ttl.enable=maybe`), naming the key."""
    repush = repush_config.is_repush(confs)
    kind, known = ("repush", repush_config.REPUSH_CONFS) if repush else ("push", PUSH_CONFS)
    for key in confs:
        if key in known or key.startswith(PASSED_TO_SPARK):
            continue
        if not repush and key in repush_config.REPUSH_CONFS:
            hint = "a repush conf: repush with `venice repush`"
        elif repush and key in PUSH_CONFS:
            hint = "a push conf, which a repush does not read"
        elif near := difflib.get_close_matches(key, sorted(known), n=1):
            hint = f"did you mean '{near[0]}'?"
        else:
            hint = f"known: {', '.join(sorted(known))}, {SPARK_PREFIX}*"
        raise ConfigError(f"unknown {kind} conf '{key}' ({hint})")
    if repush:
        repush_config.parse(confs)
    else:
        job_flags(dict(confs))
