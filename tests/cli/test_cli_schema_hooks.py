"""VIP-4's schema-registration hooks wherever a value schema is registered: `venice schema add`, and the rollout's
schema_registration step for a push that auto-registers its input schema (`rollout.steps`). An ABORT
refuses the schema with the hook's reason and registers nothing. Over a metadata store, no broker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from tests.hooks_fixtures.sample_hooks import SchemaRegistrations
from tests.support.platform import SCHEMAS, PlatformEnv, metadata_env
from venice_core.controller import stores
from venice_core.controller.hook_decisions import HookDecisions
from venice_core.errors import IncompatibleSchema, RolloutStopped
from venice_core.hooks.records import invocations
from venice_core.meta.models import HookInvocationRecord
from venice_core.rollout.steps import PushRequest, StepInputs, step

HOOKS = "tests.hooks_fixtures.sample_hooks"
ABORT_CONFIG = {"answer.pre_schema_registration": "ABORT", "reason.pre_schema_registration": "schemas frozen"}
PROFILE = {"name": "Ada", "age": 36, "score": 1.5}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[PlatformEnv]:
    """A store `users` that auto-registers, and two hooks: one answering from store configs, one remembering (in
    `<data dir>/hook-state`)."""
    state_dir = tmp_path / "home" / "hook-state"
    state_dir.mkdir(parents=True)
    env, meta = metadata_env(
        tmp_path,
        f"{HOOKS}.AnswerFromConfig,{HOOKS}.SchemaRegistrations",
        **{"venice.store.lifecycle.hooks.configs.state.dir": str(state_dir)},
    )
    meta.dispose()
    env.cli("store", "update", "users", "--auto-register-schemas", check=True)
    yield env
    env.meta.dispose()


def _calls(env: PlatformEnv) -> list[tuple[str, str, dict]]:
    """What SchemaRegistrations was asked, in order."""
    return SchemaRegistrations.calls(env.home / "hook-state")


def _schema_ids(env: PlatformEnv) -> list[int]:
    return [s["id"] for s in json.loads(env.cli("schema", "list", "users", "--json", check=True).stdout)]


def _configure(env: PlatformEnv, configs: dict[str, str]) -> None:
    env.cli("store", "update", "users", *(f"--hook-config={k}={v}" for k, v in configs.items()), check=True)


def _records(env: PlatformEnv) -> list[HookInvocationRecord]:
    with env.meta.session() as session:
        return list(session.scalars(select(HookInvocationRecord).order_by(HookInvocationRecord.id)))


def test_schema_add_asks_the_hooks_and_an_abort_registers_nothing(env: PlatformEnv) -> None:
    _configure(env, ABORT_CONFIG)
    result = env.cli("schema", "add", "users", "--value-schema", str(SCHEMAS / "user_value_v2.avsc"))
    assert result.returncode == 3
    assert result.stderr == (
        "error: value schema for 'users' refused by a lifecycle hook at pre_schema_registration: "
        "AnswerFromConfig: schemas frozen\n"
    )
    assert _schema_ids(env) == [1]
    assert [c[0] for c in _calls(env)] == ["pre_schema_registration"]  # no post: nothing registered
    asked = [(r.hook_class.rsplit(".", 1)[-1], r.function, r.outcome, r.push_job_id) for r in _records(env)]
    assert asked[:2] == [  # the store update that set the configs: no push's
        ("AnswerFromConfig", "validate_hook_config", "PROCEED", None),
        ("SchemaRegistrations", "validate_hook_config", "PROCEED", None),
    ]
    assert [a[:3] for a in asked[2:]] == [
        ("AnswerFromConfig", "pre_schema_registration", "ABORT"),
        ("SchemaRegistrations", "pre_schema_registration", "PROCEED"),
    ]
    # Outside a push, the invocations are keyed by an id of this registration of their own.
    (job_id,) = {a[3] for a in asked[2:]}
    assert job_id.startswith("schema-add-users-")


def test_schema_add_registers_between_pre_and_post(env: PlatformEnv) -> None:
    v1 = stores.list_value_schemas(env.meta, "users")[0][1]
    result = env.cli("schema", "add", "users", "--value-schema", str(SCHEMAS / "user_value_v2.avsc"), check=True)
    assert result.stdout == "value schema 2 registered for 'users'\n"
    v2 = stores.list_value_schemas(env.meta, "users")[1][1]
    assert _calls(env) == [
        ("pre_schema_registration", "users", {"new_schema": v2, "existing_schemas": {1: v1}}),
        ("post_schema_registration", "users", {"new_schema": v2, "existing_schemas": {1: v1}, "schema_id": 2}),
    ]
    # The same schema again registers nothing new, and an incompatible one is refused by the rules: no hook asked.
    env.cli("schema", "add", "users", "--value-schema", str(SCHEMAS / "user_value_v2.avsc"), check=True)
    incompatible = {
        "type": "record",
        "name": "UserProfile",
        "namespace": "demo",
        "fields": [{"name": "age", "type": "string"}],
    }
    with pytest.raises(IncompatibleSchema):
        stores.add_value_schema(env.meta, env.config, "users", json.dumps(incompatible))
    assert len(_calls(env)) == 2 and _schema_ids(env) == [1, 2]


def _rollout(env: PlatformEnv, push_job_id: str, configs: dict[str, str]) -> HookDecisions:
    return HookDecisions(env.config, env.meta, "users", push_job_id, configs, progress=lambda _line: None)


def _register(rollout: HookDecisions, input_path: str) -> int | None:
    """The push's schema_registration step, as both orchestrators run it."""
    return step("schema_registration").run(StepInputs(rollout, PushRequest("users", input_path)))


def _input(tmp_path: Path, rows: list[dict]) -> str:
    path = tmp_path / "in" / "part-0.parquet"
    path.parent.mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path.parent)


def test_rollout_registers_a_new_input_schema_through_the_hooks(env: PlatformEnv, tmp_path: Path) -> None:
    grown = _input(tmp_path, [{"key": "u1", **PROFILE, "city": "Oslo"}])
    _configure(env, ABORT_CONFIG)
    rollout = _rollout(env, "users-push-1", ABORT_CONFIG)
    with pytest.raises(RolloutStopped, match="pre_schema_registration: AnswerFromConfig: schemas frozen"):
        _register(rollout, grown)
    assert _schema_ids(env) == [1]
    assert [(r.function, r.outcome) for r in invocations(env.meta, "users-push-1")][:1] == [
        ("pre_schema_registration", "ABORT")
    ]

    env.cli("store", "update", "users", "--remove-hook-config", "answer.pre_schema_registration", check=True)
    lines: list[str] = []
    rollout = HookDecisions(env.config, env.meta, "users", "users-push-2", {}, progress=lines.append)
    assert _register(rollout, grown) == 2
    assert lines == ["registered value schema 2 of 'users' from the input"]
    calls = len(_calls(env))
    assert _register(rollout, grown) == 2  # now a match: no hook asked again
    assert len(_calls(env)) == calls
    assert [(r.function, r.outcome) for r in invocations(env.meta, "users-push-2")] == [
        ("pre_schema_registration", "PROCEED"),
        ("pre_schema_registration", "PROCEED"),
        ("post_schema_registration", None),
        ("post_schema_registration", None),
    ]
    schema = json.loads(stores.list_value_schemas(env.meta, "users")[1][1])
    assert [f["name"] for f in schema["fields"]] == ["name", "age", "score", "city"]


def test_rollout_step_is_a_no_op_for_matching_or_remote_input(env: PlatformEnv, tmp_path: Path) -> None:
    rollout = _rollout(env, "users-push-3", ABORT_CONFIG)  # an ABORT the step never gets to ask
    assert _register(rollout, _input(tmp_path, [{"key": "u1", **PROFILE}])) == 1
    assert _register(rollout, "hdfs://namenode/users") is None
    assert invocations(env.meta, "users-push-3") == [] and _schema_ids(env) == [1]
