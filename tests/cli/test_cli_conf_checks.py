"""`venice push --conf` and `venice repush --conf` refuse a key nothing reads before anything starts (one `error:`
line, no version, no DAG run, no Spark), through Airflow and locally; and a DAG run whose form carries one fails
at its first step, before any hook is asked. Airflow is enabled but none runs, and there is no broker: a command
that got past the check would fail differently (or, for a repush, refuse the store that has no version yet)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.metadata import migrated
from tests.support.platform import SCHEMAS, PlatformEnv, make_platform_env
from venice_core.controller.hook_decisions import HookDecisions
from venice_core.errors import ConfigError
from venice_core.hooks.records import invocations
from venice_core.meta import MetadataStore
from venice_core.rollout.steps import PushRequest, StepInputs, step

HOOKS = "tests.hooks_fixtures.sample_hooks"
TYPO = "error: unknown repush conf 'repush.ttl.enabel' (did you mean 'repush.ttl.enable'?)"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> PlatformEnv:
    home = tmp_path_factory.mktemp("conf_checks") / "home"
    env = make_platform_env(
        home, {"airflow.enabled": "true", "venice.store.lifecycle.hooks": f"{HOOKS}.AnswerFromConfig"}
    )
    meta = MetadataStore(env.config.metadata_db_url)
    migrated(meta)
    meta.dispose()
    schemas = ("--key-schema", str(SCHEMAS / "user_key.avsc"), "--value-schema", str(SCHEMAS / "user_value_v1.avsc"))
    env.cli("store", "create", "users", *schemas, check=True)
    return env


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("conf_input") / "in.parquet"
    pq.write_table(pa.Table.from_pylist([{"key": "u1", "value": {"name": "Ada", "age": 36, "score": 1.5}}]), path)
    return path


def _refused(env: PlatformEnv, *args: str) -> str:
    result = env.cli(*args)
    assert result.returncode == 2 and result.stdout == "", result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    info = json.loads(env.cli("store", "show", "users", "--json", check=True).stdout)
    assert info["versions"] == [] and info["largest_used_version"] == 0  # no version was created
    return lines[0]


@pytest.mark.parametrize("mode", ["--airflow", "--local"])
def test_push_refuses_an_unknown_conf(env: PlatformEnv, data: Path, mode: str) -> None:
    push = ("push", "users", "--input", str(data), mode)
    assert _refused(env, *push, "--conf", "spark.master=local[1]", "--conf", "allow.duplicat.key=true") == (
        "error: unknown push conf 'allow.duplicat.key' (did you mean 'allow.duplicate.key'?)"
    )
    assert _refused(env, *push, "--conf", "repush.ttl.enable=true") == (
        "error: unknown push conf 'repush.ttl.enable' (a repush conf: repush with `venice repush`)"
    )


@pytest.mark.parametrize("mode", ["--airflow", "--local"])
@pytest.mark.parametrize("value", ["perhaps", "1", "yes"])
def test_push_refuses_a_flag_that_is_not_true_or_false(env: PlatformEnv, data: Path, mode: str, value: str) -> None:
    push = ("push", "users", "--input", str(data), mode)
    for key in ("allow.duplicate.key", "allow.empty.input"):
        assert _refused(env, *push, "--conf", f"{key}={value}") == f"error: {key} must be true or false, got '{value}'"


@pytest.mark.parametrize("mode", ["--airflow", "--local"])
def test_push_and_repush_refuse_a_conf_the_platform_sets(env: PlatformEnv, data: Path, mode: str) -> None:
    push = ("push", "users", "--input", str(data), mode)
    assert _refused(env, *push, "--conf", "venice.push.test.fail.partition=1") == (
        "error: conf 'venice.push.test.fail.partition' is set by the platform, not by a user (the tests' fault "
        "injection)"
    )
    assert _refused(env, "repush", "users", mode, "--conf", 'kafka.input.end.offsets={"0": 1}').startswith(
        "error: conf 'kafka.input.end.offsets' is set by the platform, not by a user"
    )


@pytest.mark.parametrize("mode", ["--airflow", "--local"])
def test_repush_refuses_an_unknown_conf(env: PlatformEnv, mode: str) -> None:
    assert _refused(env, "repush", "users", mode, "--conf", "repush.ttl.enabel=true") == TYPO
    assert _refused(env, "repush", "users", mode, "--conf", "no.such.repush.key=1").startswith(
        "error: unknown repush conf 'no.such.repush.key' (known: compression.dictionary.sample.size, "
        "compression.dictionary.size.limit, kafka.input.broker.url, kafka.input.combiner.enabled,"
    )


@pytest.mark.parametrize("mode", ["--airflow", "--local"])
def test_push_with_source_kafka_is_a_repush_with_the_repushs_checks(env: PlatformEnv, data: Path, mode: str) -> None:
    """Seed 003's switch: `venice push STORE --conf source.kafka=true` is `venice repush STORE`: the same refusals,
    word for word (a typo, a conf the platform sets, a store with nothing to repush), and no --input."""
    as_push = ("push", "users", mode, "--conf", "source.kafka=true")
    for confs in (("repush.ttl.enabel=true",), ('kafka.input.end.offsets={"0": 1}',), ()):
        flags = [arg for c in confs for arg in ("--conf", c)]
        pushed, repushed = env.cli(*as_push, *flags), env.cli("repush", "users", mode, *flags)
        assert (pushed.returncode, pushed.stdout, pushed.stderr) == (repushed.returncode, "", repushed.stderr)
        assert pushed.returncode != 0 and pushed.stderr.count("\n") == 1, pushed.stderr
    assert _refused(env, *as_push, "--conf", "repush.ttl.enabel=true") == TYPO
    assert env.cli(*as_push).stderr == "error: the store has no version yet: push one before a repush\n"
    assert _refused(env, *as_push, "--input", str(data)) == (
        "error: --input is for a push: with source.kafka=true the repush reads the store's own version topic "
        "(kafka.input.topic and kafka.input.fabric choose which)"
    )
    assert _refused(env, "push", "users", mode, "--conf", "source.kafka=yes") == (
        "error: source.kafka must be true or false, got 'yes'"
    )
    assert _refused(env, "push", "users", mode) == (
        "error: a push needs --input (or --conf source.kafka=true: a repush of the store's own data)"
    )


def test_a_run_from_the_dag_form_fails_at_its_first_step_before_any_hook(env: PlatformEnv, data: Path) -> None:
    """The Airflow UI's trigger form reaches no CLI check: its run's first step refuses the conf, as both
    orchestrators run it (the DAG fails the task for good on a ConfigError)."""
    meta = MetadataStore(env.config.metadata_db_url)
    rollout = HookDecisions(env.config, meta, "users", "form-run-1", {}, progress=lambda _line: None)
    try:
        request = PushRequest("users", "venice-repush", confs={"source.kafka": "true", "repush.ttl.enabel": "true"})
        with pytest.raises(ConfigError) as refused:
            step("start_of_push_job").run(StepInputs(rollout, request))
        assert f"error: {refused.value}" == TYPO
        assert list(invocations(meta, "form-run-1")) == []  # not even validate_hook_config was asked
    finally:
        meta.dispose()
