"""A store's partitioner (`venice store create/update --partitioner-class --partitioner-param`) through the command's
entry point, over a metadata store of its own: shown by `store show`, pinned by each version, loaded only from
`venice.partitioner.classes`, kept by a hybrid store; every bad setting one line, non-zero, no change."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.support.metadata import migrated
from tests.support.partitioners import LAST_BYTE_PARTITIONER
from tests.support.platform import PlatformEnv, make_platform_env
from tests.support.topics import InMemoryTopics
from venice_core.controller import versions
from venice_core.errors import ConfigError
from venice_core.meta import MetadataStore
from venice_core.protocol.partitioner import DEFAULT_PARTITIONER_CLASS, KEY_FIELD_PARTITIONER_CLASS
from venice_core.protocol.partitioner_config import PartitionerConfig, PartitionerNotAllowed, VersionPartitioner
from venice_core.pubsub import admin

RECORD_KEY = {
    "type": "record",
    "name": "MemberItem",
    "fields": [{"name": "member_id", "type": "string"}, {"name": "item", "type": "int"}],
}
VALUE = {"type": "record", "name": "Like", "fields": [{"name": "weight", "type": "double"}]}
BY_MEMBER = ["--partitioner-class", KEY_FIELD_PARTITIONER_CLASS, "--partitioner-param", "key.field=member_id"]


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("schemas")
    paths = {}
    for name, schema in {"record_key": RECORD_KEY, "string_key": "string", "value": VALUE}.items():
        paths[name] = folder / f"{name}.avsc"
        paths[name].write_text(json.dumps(schema))
    return paths


def _create(env: PlatformEnv, schemas: dict[str, Path], *options: str, key: str = "record_key") -> str:
    store = f"likes_{uuid.uuid4().hex[:8]}"
    env.cli(
        "store", "create", store, "--key-schema", str(schemas[key]), "--value-schema", str(schemas["value"]),
        "--partitions", "4", *options, check=True,
    )  # fmt: skip
    return store


def _show(env: PlatformEnv, store: str) -> dict:
    return json.loads(env.cli("store", "show", store, "--json", check=True).stdout)


def _one_line_error(result, pattern: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and pattern in lines[0], result.stderr


def test_a_partitioner_is_shown_pinned_by_each_version_and_kept_while_hybrid(
    cli_env: PlatformEnv, schemas: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    env, topics = cli_env, InMemoryTopics()  # no broker: the store's topics are the controller's business here
    monkeypatch.setattr(admin, "create_topic", topics.create_topic)
    meta = MetadataStore(env.config.metadata_db_url)
    store = _create(env, schemas, *BY_MEMBER)
    info = _show(env, store)
    assert (info["partitioner_class"], info["partitioner_params"]) == (
        KEY_FIELD_PARTITIONER_CLASS,
        {"key.field": "member_id"},
    )
    text = env.cli("store", "show", store, check=True).stdout
    assert f"partitioner:          {KEY_FIELD_PARTITIONER_CLASS}" in text
    assert 'partitioner params:   {"key.field": "member_id"}' in text
    by_member = PartitionerConfig(KEY_FIELD_PARTITIONER_CLASS, {"key.field": "member_id"})
    assert versions.create_version(meta, env.config, store, "push-1", topics=topics).lifecycle.partitioner == by_member
    versions.kill_push(meta, store, 1, "the test's")

    # The store's partitioner changes the versions created afterwards; version 1 keeps its own.
    env.cli("store", "update", store, "--partitioner-param", "key.field=item", check=True)
    assert _show(env, store)["partitioner_params"] == {"key.field": "item"}
    env.cli("store", "update", store, "--partitioner-class", DEFAULT_PARTITIONER_CLASS, check=True)
    info = _show(env, store)
    assert (info["partitioner_class"], info["partitioner_params"]) == (DEFAULT_PARTITIONER_CLASS, {})
    assert (info["versions"][0]["partitioner_class"], info["versions"][0]["partitioner_params"]) == (
        KEY_FIELD_PARTITIONER_CLASS,
        {"key.field": "member_id"},
    )
    assert "version 1: KILLED" in env.cli("store", "show", store, check=True).stdout
    assert "(partitioner: KeyFieldVenicePartitioner (key.field=member_id))" in env.cli("store", "show", store).stdout

    # A hybrid store's real-time topics are partitioned by its partitioner: it stays, as in Venice.
    env.cli("store", "update", store, "--hybrid-rewind-seconds", "60", check=True)
    before = _show(env, store)
    _one_line_error(
        env.cli("store", "update", store, *BY_MEMBER),
        f"the partitioner of hybrid store '{store}' cannot change: its real-time topics are partitioned by "
        "DefaultVenicePartitioner",
    )
    assert _show(env, store) == before
    # Made batch-only, it may change; hybrid again, only with the partitioner of the hybrid version still hosted.
    versions.create_version(meta, env.config, store, "push-2", topics=topics)  # a hybrid version, in flight
    env.cli("store", "update", store, "--no-hybrid", check=True)
    env.cli("store", "update", store, *BY_MEMBER, check=True)
    _one_line_error(
        env.cli("store", "update", store, "--hybrid-rewind-seconds", "60"),
        f"store '{store}' cannot become hybrid with partitioner KeyFieldVenicePartitioner (key.field=member_id): its "
        "version 2 ingests its real-time topics partitioned by DefaultVenicePartitioner until it is retired",
    )
    assert _show(env, store)["hybrid"] is None
    meta.dispose()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["store", "update", "{store}", "--partitioner-class", LAST_BYTE_PARTITIONER],
            f"partitioner class '{LAST_BYTE_PARTITIONER}' is not in venice.partitioner.classes (allowed: "
            f"{KEY_FIELD_PARTITIONER_CLASS})",
        ),
        (
            ["store", "update", "{store}", "--partitioner-class", KEY_FIELD_PARTITIONER_CLASS],
            "partitioner KeyFieldVenicePartitioner needs the param key.field",
        ),
        (
            ["store", "update", "{store}", *BY_MEMBER[:2], "--partitioner-param", "key.field=nope"],
            "KeyFieldVenicePartitioner: key.field=nope is not a field of the key schema (its fields: member_id, item)",
        ),
        (
            ["store", "update", "{store}", *BY_MEMBER, "--partitioner-param", "partitions=2"],
            "partitioner KeyFieldVenicePartitioner takes no param 'partitions' (its params: key.field)",
        ),
        (
            ["store", "update", "{store}", "--partitioner-param", "seed=1"],
            "partitioner DefaultVenicePartitioner takes no param 'seed' (it takes none)",
        ),
        (["store", "update", "{store}", "--partitioner-param", "seed"], "--partitioner-param expects key=value"),
    ],
)
def test_bad_partitioner_settings_are_refused_and_change_nothing(
    cli_env: PlatformEnv, schemas: dict[str, Path], args: list[str], message: str
) -> None:
    store = _create(cli_env, schemas)
    before = _show(cli_env, store)
    _one_line_error(cli_env.cli(*[a.format(store=store) for a in args]), message)
    assert _show(cli_env, store) == before


def test_a_store_is_created_only_with_an_allowed_partitioner_that_takes_its_params(
    cli_env: PlatformEnv, schemas: dict[str, Path]
) -> None:
    for options, key, message in (
        (["--partitioner-class", LAST_BYTE_PARTITIONER], "record_key", "is not in venice.partitioner.classes"),
        (BY_MEMBER, "string_key", 'KeyFieldVenicePartitioner partitions by a field of a record key; the key schema '
         'is "string"'),
    ):  # fmt: skip
        listed = cli_env.cli("store", "list", check=True).stdout
        result = cli_env.cli(
            "store", "create", "refused", "--key-schema", str(schemas[key]), "--value-schema", str(schemas["value"]),
            *options,
        )  # fmt: skip
        _one_line_error(result, message)
        assert cli_env.cli("store", "list", check=True).stdout == listed


def test_the_allowed_classes_are_the_configs_and_a_reader_refuses_one_no_longer_allowed(
    tmp_path: Path, schemas: dict[str, Path]
) -> None:
    """A user's own class, named by `venice.partitioner.classes`, is taken (the list replaces the built-in one's
    default; the default partitioner stays allowed); a reader whose list does not name it refuses the version."""
    env = make_platform_env(tmp_path / "home", {"venice.partitioner.classes": LAST_BYTE_PARTITIONER})
    meta = MetadataStore(env.config.metadata_db_url)
    migrated(meta)
    store = _create(env, schemas, "--partitioner-class", LAST_BYTE_PARTITIONER)
    assert _show(env, store)["partitioner_class"] == LAST_BYTE_PARTITIONER
    _one_line_error(env.cli("store", "update", store, *BY_MEMBER), "is not in venice.partitioner.classes")
    env.cli("store", "update", store, "--partitioner-class", DEFAULT_PARTITIONER_CLASS, check=True)
    meta.dispose()

    pinned = PartitionerConfig(LAST_BYTE_PARTITIONER)
    reader = VersionPartitioner(pinned, json.dumps(RECORD_KEY), [KEY_FIELD_PARTITIONER_CLASS], "store 's' version 3")
    with pytest.raises(PartitionerNotAllowed) as refused:
        reader.partition(b"\x02m\x06", 4)
    assert str(refused.value) == (
        f"store 's' version 3: partitioner class '{LAST_BYTE_PARTITIONER}' is not in venice.partitioner.classes "
        f"(allowed: {KEY_FIELD_PARTITIONER_CLASS})"
    )
    with pytest.raises(ConfigError, match="venice.partitioner.classes names 'nodots', not a module.Class path"):
        _ = make_platform_env(tmp_path / "bad", {"venice.partitioner.classes": "nodots"}).config
