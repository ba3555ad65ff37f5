"""`venice write`, `venice delete` and the hybrid options of `venice store update`, in this process with no broker:
real-time topics go to an in-memory admin, and a writer is never started for input that is refused (each bad
input is one `error:` line, a non-zero exit, nothing produced, nothing changed)."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support.platform import SCHEMAS, PlatformEnv
from tests.support.topics import InMemoryTopics
from venice_core.nearline import writer
from venice_core.pubsub import admin


@pytest.fixture
def topics(monkeypatch: pytest.MonkeyPatch) -> InMemoryTopics:
    """Kafka's topic admin replaced by an in-memory one; starting a writer fails the test."""
    fake = InMemoryTopics()
    monkeypatch.setattr(admin, "create_topic", fake.create_topic)
    monkeypatch.setattr(admin, "delete_topics", fake.delete_topics)

    def no_writer(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a writer was started for input that should have been refused")

    monkeypatch.setattr(writer.OnlineWriter, "for_target", no_writer)
    return fake


def _store(env: PlatformEnv, hybrid: bool) -> str:
    name = f"users_{uuid.uuid4().hex[:8]}"
    env.cli(
        "store",
        "create",
        name,
        "--key-schema",
        str(SCHEMAS / "user_key.avsc"),
        "--value-schema",
        str(SCHEMAS / "user_value_v1.avsc"),
        check=True,
    )
    if hybrid:
        env.cli("store", "update", name, "--hybrid-rewind-seconds", "600", check=True)
    return name


def _show(env: PlatformEnv, store: str) -> dict:
    return json.loads(env.cli("store", "show", store, "--json", check=True).stdout)


def _assert_one_line_error(result, message: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0], lines[0]


def test_hybrid_options_of_store_update(cli_env: PlatformEnv, topics: InMemoryTopics) -> None:
    store = _store(cli_env, hybrid=False)
    assert "hybrid:               no (batch-only)" in cli_env.cli("store", "show", store, check=True).stdout
    cli_env.cli("store", "update", store, "--hybrid-rewind-seconds", "600", check=True)
    assert topics.names() == {r.real_time_topic(store) for r in cli_env.config.regions}
    cli_env.cli("store", "update", store, "--hybrid-offset-lag-threshold", "20", check=True)
    assert _show(cli_env, store)["hybrid"] == {"rewind_seconds": 600, "offset_lag_threshold": 20}
    assert "hybrid:               rewind 600 s, offset lag threshold 20" in cli_env.cli("store", "show", store).stdout
    cli_env.cli("store", "update", store, "--no-hybrid", check=True)
    assert _show(cli_env, store)["hybrid"] is None
    cli_env.cli("store", "delete", store, check=True)
    assert topics.names() == set()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hybrid-rewind-seconds", "-1"], "hybrid rewind seconds must be a whole number from 0 to 2147483647"),
        (["--hybrid-rewind-seconds", "ten"], "hybrid rewind seconds must be a whole number from 0 to 2147483647"),
        (["--hybrid-rewind-seconds", "1", "--hybrid-offset-lag-threshold", "1e3"], "hybrid offset lag threshold"),
        (["--hybrid-offset-lag-threshold", "5"], "is batch-only: an offset lag threshold alone does not make it"),
        (["--no-hybrid", "--hybrid-rewind-seconds", "5"], "--no-hybrid cannot be given with --hybrid-rewind-seconds"),
    ],
)
def test_bad_hybrid_options_change_nothing(
    cli_env: PlatformEnv, topics: InMemoryTopics, args: list[str], message: str
) -> None:
    store = _store(cli_env, hybrid=False)
    before = _show(cli_env, store)
    _assert_one_line_error(cli_env.cli("store", "update", store, *args), message)
    assert _show(cli_env, store) == before
    assert topics.names() == set()


VALUE = '{"name": "a", "age": 1, "score": 1.5}'


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["write", "ghost", "k", VALUE], "unknown store 'ghost'"),
        (["delete", "ghost", "k"], "unknown store 'ghost'"),
        (["write", "{batch}", "k", VALUE], "is batch-only: make it hybrid with venice store update"),
        (["delete", "{batch}", "k"], "is batch-only: make it hybrid with venice store update"),
        (["write", "{store}", "k", VALUE, "--region", "dc-9"], "unknown region 'dc-9' (configured: dc-0, dc-1, dc-2)"),
        (["delete", "{store}", "k", "--region", "dc-9"], "unknown region 'dc-9'"),
        (["write", "{store}", "5", VALUE], "key 5 does not match the key schema of '{store}': it is not string"),
        (["delete", "{store}", "[1]", "--timestamp", "9"], "key [1] does not match the key schema of '{store}'"),
        (["write", "{store}", "k", "{'name': 'a'}"], "the value is not valid JSON: Expecting property name"),
        (
            ["write", "{store}", "k", '{"name": "a", "age": "x", "score": 1.5}'],
            "fits no value schema of '{store}': field demo.UserProfile.age is 'x', not int (value schema 1)",
        ),
        (["write", "{store}", "k", '{"name": "a", "age": 1}'], "field demo.UserProfile.score is missing"),
        (
            ["write", "{store}", "k", '{"name": "a", "age": 1, "score": 1.5, "city": "x"}'],
            "demo.UserProfile.city is not a field of the schema",
        ),
        (["write", "{store}", "k", VALUE, "--timestamp", "soon"], "--timestamp takes a whole number of milliseconds"),
        (["write", "{store}", "k", VALUE, "--timestamp", "0"], "a write timestamp must be a whole number"),
        (["delete", "{store}", "k", "--timestamp", "-3"], "a write timestamp must be a whole number"),
    ],
)
def test_bad_writes_are_refused_before_anything_is_produced(
    cli_env: PlatformEnv, topics: InMemoryTopics, args: list[str], message: str
) -> None:
    names = {"store": _store(cli_env, hybrid=True), "batch": _store(cli_env, hybrid=False)}
    result = cli_env.cli(*[a.format(**names) if a.startswith("{") and a[1:-1] in names else a for a in args])
    _assert_one_line_error(result, message.format(**names))


def test_write_and_delete_have_help(cli_env: PlatformEnv) -> None:
    for command in ("write", "delete"):
        result = cli_env.cli(command, "--help", check=True)
        assert "--region" in result.stdout and "--timestamp" in result.stdout
