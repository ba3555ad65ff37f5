"""The check of a push's confs (`venice push --conf`, `venice repush --conf`, a DAG run's `conf`): a key that
nothing reads is refused before anything starts, since a typo (`repush.ttl.enabel=true`) would otherwise run the
job without the setting and say nothing; so is a value the key's reader would refuse later (a boolean conf is
`true` or `false`, `config.parse_bool`). The known keys are defined where they are read: the push job's in
`spark.submit`, a repush's in `controller.repush_config`, the ZSTD dictionary's bounds (both's) in
`rollout.dictionary_confs`. `source.kafka=true` is a user's too: seed 003's switch that makes a push a repush
(`venice push STORE --conf source.kafka=true` is `venice repush STORE`). A user's confs (`check_user_confs`) may not
hold the keys the platform sets itself (`PLATFORM_CONFS`, `PLATFORM_PREFIXES`)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from venice_core.config import parse_bool
from venice_core.controller import repush_config
from venice_core.errors import ConfigError
from venice_core.rollout import dictionary_confs
from venice_core.spark.submit import JOB_FLAGS, SPARK_PREFIX, TEST_FAULT_PREFIX, job_flags

# `source.kafka=true` makes a push a repush; a ZSTD_WITH_DICT store's push and repush both train a dictionary.
PUSH_CONFS = frozenset({*JOB_FLAGS, repush_config.SOURCE_KAFKA, *dictionary_confs.DICTIONARY_CONFS})
REPUSH_CONFS = repush_config.REPUSH_CONFS | dictionary_confs.DICTIONARY_CONFS
PASSED_TO_SPARK = (SPARK_PREFIX, TEST_FAULT_PREFIX)
# What the platform sets itself, never a user's conf (`venice push/repush --conf`, the DAG form's `conf`): each with
# who sets it. The platform's own paths pass them on: a repush's version creation pins the end offsets, and the
# tests inject faults in-process (`rollout.local.push(confs=...)`).
PLATFORM_CONFS = {
    repush_config.KAFKA_INPUT_END_OFFSETS: "a repush pins each source partition's end offset when it creates the "
    "version",
}
PLATFORM_PREFIXES = {TEST_FAULT_PREFIX: "the tests' fault injection"}


def _platform_set(key: str) -> str | None:
    """Who sets `key`, if the platform does."""
    if key in PLATFORM_CONFS:
        return PLATFORM_CONFS[key]
    return next((who for prefix, who in PLATFORM_PREFIXES.items() if key.startswith(prefix)), None)


def check_user_confs(confs: Mapping[str, str], repush: bool = False) -> None:
    """A user's confs for a push (or, `repush` or `source.kafka=true`, a repush): ConfigError for a key the platform
    sets itself, which a user must not, then `check_push_confs`."""
    for key in confs:
        if (who := _platform_set(key)) is not None:
            raise ConfigError(f"conf '{key}' is set by the platform, not by a user ({who})")
    switch = confs.get(repush_config.SOURCE_KAFKA)
    if repush and switch is not None and not parse_bool(switch, repush_config.SOURCE_KAFKA):
        raise ConfigError(
            f"{repush_config.SOURCE_KAFKA}={switch} contradicts a repush, which reads the store's own data"
        )
    check_push_confs({**confs, repush_config.SOURCE_KAFKA: "true"} if repush else confs)


def check_push_confs(confs: Mapping[str, str]) -> None:
    """ConfigError naming the first key that neither a push nor, with `source.kafka=true`, a repush reads, with the
    nearest known key (or the known keys, when none is near); then a value the push job or the repush refuses
    (`allow.empty.input=yes`, `repush.ttl.enable=maybe`), naming the key."""
    if repush_config.SOURCE_KAFKA in confs:  # the switch itself first: `yes` is refused, not taken as a push
        parse_bool(confs[repush_config.SOURCE_KAFKA], repush_config.SOURCE_KAFKA)
    repush = repush_config.is_repush(confs)
    kind, known = ("repush", REPUSH_CONFS) if repush else ("push", PUSH_CONFS)
    settable = sorted(key for key in known if _platform_set(key) is None)  # what a user is pointed to
    for key in confs:
        if key in known or key.startswith(PASSED_TO_SPARK):
            continue
        if not repush and key in REPUSH_CONFS:
            hint = "a repush conf: repush with `venice repush`"
        elif repush and key in PUSH_CONFS:
            hint = "a push conf, which a repush does not read"
        elif near := difflib.get_close_matches(key, settable, n=1):
            hint = f"did you mean '{near[0]}'?"
        else:
            hint = f"known: {', '.join(settable)}, {SPARK_PREFIX}*"
        raise ConfigError(f"unknown {kind} conf '{key}' ({hint})")
    if repush:
        repush_config.parse(confs)
    else:
        job_flags(dict(confs))
    dictionary_confs.parse(confs)
