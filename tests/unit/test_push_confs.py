"""A push's and a repush's confs: a key nothing reads is refused with the nearest known one, every key the
platform itself puts into confs passes. Pure: no broker, no metadata store."""

from __future__ import annotations

import pytest

from venice_core.controller import repush_config as rc
from venice_core.errors import ConfigError
from venice_core.rollout.names import SOURCE_KAFKA_PARAM, run_confs
from venice_core.rollout.push_confs import check_push_confs, check_user_confs

SOURCE = rc.RepushSource("users", "dc-1", 3, "dc-1.users_v3", "127.0.0.1:9092", 2, "NO_OP", True, 5_000, (10, 12))


@pytest.mark.parametrize(
    ("confs", "message"),
    [
        (
            {"source.kafka": "true", "repush.ttl.enabel": "true"},
            "unknown repush conf 'repush.ttl.enabel' (did you mean 'repush.ttl.enable'?)",
        ),
        (
            {"allow.duplicat.key": "true"},
            "unknown push conf 'allow.duplicat.key' (did you mean 'allow.duplicate.key'?)",
        ),
        (
            {"spark.master": "local[1]", "no.such.key": "1"},
            "unknown push conf 'no.such.key' (known: allow.duplicate.key, allow.empty.input, "
            "compression.dictionary.sample.size, compression.dictionary.size.limit, source.kafka, spark.*)",
        ),
        (
            {"repush.ttl.enable": "true"},
            "unknown push conf 'repush.ttl.enable' (a repush conf: repush with `venice repush`)",
        ),
        (
            {"source.kafka": "true", "allow.empty.input": "true"},
            "unknown repush conf 'allow.empty.input' (a push conf, which a repush does not read)",
        ),
    ],
)
def test_an_unknown_conf_is_refused_naming_it_and_the_nearest_known_one(confs: dict, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        check_push_confs(confs)
    assert str(refused.value) == message


@pytest.mark.parametrize("value", ["perhaps", "1", "yes", "", "on"])
@pytest.mark.parametrize("key", ["allow.duplicate.key", "allow.empty.input"])
def test_a_push_flag_is_true_or_false_and_anything_else_is_refused_naming_it(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        check_push_confs({key: value})
    assert str(refused.value) == f"{key} must be true or false, got {value!r}"
    check_push_confs({key: "TRUE", "spark.master": "local[1]"})
    check_push_confs({key: " false "})


@pytest.mark.parametrize("repush", [False, True])
@pytest.mark.parametrize(
    ("conf", "value", "message"),
    [
        ("sample.size", "0", "must be between 1 and 1073741824 bytes, got 0"),
        ("sample.size", "4MB", "must be a whole number of bytes, got '4MB'"),
        ("sample.size", "", "must be a whole number of bytes, got ''"),
        ("size.limit", "100", "must be between 256 and 524288 bytes, got 100"),
        ("size.limit", "1.5", "must be a whole number of bytes, got '1.5'"),
    ],
)
def test_a_dictionary_bound_that_is_not_a_number_of_bytes_in_range_is_refused_naming_it(
    repush: bool, conf: str, value: str, message: str
) -> None:
    """A ZSTD_WITH_DICT store's push and repush both read the bounds (Venice's names): checked with every conf."""
    key = f"compression.dictionary.{conf}"
    with pytest.raises(ConfigError) as refused:
        check_push_confs({key: value, **({"source.kafka": "true"} if repush else {})})
    assert str(refused.value) == f"{key} {message}"
    check_push_confs({key: "300", **({"source.kafka": "true"} if repush else {})})


def test_a_repush_flag_is_refused_with_the_same_words() -> None:
    with pytest.raises(ConfigError) as refused:
        check_push_confs({"source.kafka": "true", "repush.ttl.enable": "maybe"})
    assert str(refused.value) == "repush.ttl.enable must be true or false, got 'maybe'"


@pytest.mark.parametrize(
    ("confs", "repush", "message"),
    [
        (
            {"kafka.input.end.offsets": '{"0": 5}'},
            True,
            "conf 'kafka.input.end.offsets' is set by the platform, not by a user (a repush pins each source "
            "partition's end offset when it creates the version)",
        ),
        (
            {"allow.empty.input": "true", "venice.push.test.x": "1"},
            False,
            "conf 'venice.push.test.x' is set by the platform, not by a user (the tests' fault injection)",
        ),
    ],
)
def test_a_user_may_not_set_a_conf_the_platform_sets(confs: dict, repush: bool, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        check_user_confs(confs, repush=repush)
    assert str(refused.value) == message


def test_the_keys_the_platform_sets_are_not_offered_to_a_user() -> None:
    with pytest.raises(ConfigError) as refused:
        check_user_confs({"no.such.repush.key": "1"}, repush=True)
    assert "kafka.input.end.offsets" not in str(refused.value)
    assert "kafka.input.topic" in str(refused.value)
    with pytest.raises(ConfigError, match=r"did you mean 'kafka.input.topic'\?"):
        check_user_confs({"kafka.input.end.offset": "{}"}, repush=True)  # not the pinned offsets' key


def test_the_confs_users_and_the_platform_set_pass() -> None:
    check_user_confs(
        {
            "allow.duplicate.key": "true",
            "allow.empty.input": "true",
            "spark.master": "local[1]",
            "spark.executor.memory": "1g",
        }
    )
    check_push_confs({"venice.push.test.fail.partition": "1"})  # the tests' fault injection, passed to Spark
    asked = {"repush.ttl.enable": "true", "repush.ttl.seconds": "60", "kafka.input.combiner.enabled": "true"}
    check_user_confs(asked, repush=True)
    check_push_confs(run_confs({"source": SOURCE_KAFKA_PARAM, "conf": asked}))  # a DAG run's, from its form
    pinned = rc.resolved_confs({**asked, "source.kafka": "true"}, SOURCE)  # what version creation pins
    assert {rc.KAFKA_INPUT_END_OFFSETS, rc.REPUSH_TTL_START_TIMESTAMP, rc.KAFKA_INPUT_BROKER_URL} <= set(pinned)
    check_push_confs(pinned)
    every = {
        rc.SOURCE_KAFKA: "true",
        rc.KAFKA_INPUT_TOPIC: "users_v3",
        rc.KAFKA_INPUT_FABRIC: "dc-1",
        rc.KAFKA_INPUT_BROKER_URL: "127.0.0.1:9092",
        rc.KAFKA_INPUT_MAX_RECORDS_PER_MAPPER: "1000",
        rc.KAFKA_INPUT_COMBINER_ENABLED: "true",
        rc.REPUSH_TTL_ENABLE: "true",
        rc.REPUSH_TTL_START_TIMESTAMP: "5000",  # (repush.ttl.seconds is the other way to say it: one of the two)
        rc.REWIND_TIME_IN_SECONDS_OVERRIDE: "60",
        rc.KAFKA_INPUT_END_OFFSETS: '{"0": 10}',
    }
    assert set(every) == rc.REPUSH_CONFS - {rc.REPUSH_TTL_SECONDS}
    check_push_confs({**every, "spark.master": "local[1]"})


def test_source_kafka_is_the_users_repush_switch() -> None:
    """Seed 003: `source.kafka=true` turns a push into a repush, whose confs it then takes (and only those)."""
    check_user_confs({"source.kafka": "true", "kafka.input.fabric": "dc-1", "repush.ttl.enable": "false"})
    check_user_confs({"source.kafka": "false", "allow.empty.input": "true"})  # a push
    with pytest.raises(ConfigError, match=r"unknown repush conf 'allow.empty.input' \(a push conf"):
        check_user_confs({"source.kafka": "true", "allow.empty.input": "true"})
    with pytest.raises(ConfigError, match="source.kafka must be true or false, got 'yes'"):
        check_user_confs({"source.kafka": "yes"})
    with pytest.raises(ConfigError, match=r"^source.kafka=false contradicts a repush"):
        check_user_confs({"source.kafka": "false"}, repush=True)
