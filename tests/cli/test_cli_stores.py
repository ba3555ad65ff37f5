"""`venice store` and `venice schema` through the command's entry point (in this process, over a metadata store of
their own: no broker is needed for metadata); each bad input is one line, non-zero, no change."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.support.platform import PlatformEnv, make_platform_env
from venice_core.meta import MetadataStore

KEY = '"string"'
V1 = {
    "type": "record",
    "name": "Profile",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "city", "type": "string", "default": ""}]}
INCOMPATIBLE = {**V1, "fields": [V1["fields"][0], {"name": "age", "type": "string"}]}


@pytest.fixture
def schemas(tmp_path: Path) -> dict[str, Path]:
    files = {
        "key": KEY,
        "v1": json.dumps(V1),
        "v2": json.dumps(V2),
        "incompatible": json.dumps(INCOMPATIBLE),
        "not_json": '{"type": "record",',
        "not_avro": '{"type": "record", "name": "P", "fields": [{"name": "a", "type": "integer"}]}',
    }
    paths = {}
    for name, text in files.items():
        paths[name] = tmp_path / f"{name}.avsc"
        paths[name].write_text(text)
    return paths


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory: pytest.TempPathFactory) -> PlatformEnv:
    env = make_platform_env(tmp_path_factory.mktemp("cli") / "home")
    meta = MetadataStore(env.config.metadata_db_url)
    meta.migrate()
    meta.dispose()
    return env


@pytest.fixture
def store(cli_env: PlatformEnv, schemas: dict[str, Path]) -> str:
    name = f"users_{uuid.uuid4().hex[:8]}"
    cli_env.cli(
        "store",
        "create",
        name,
        "--key-schema",
        str(schemas["key"]),
        "--value-schema",
        str(schemas["v1"]),
        "--partitions",
        "3",
        check=True,
    )
    return name


def _show(cli_env: PlatformEnv, store: str) -> dict:
    return json.loads(cli_env.cli("store", "show", store, "--json", check=True).stdout)


def _assert_one_line_error(result, pattern: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert pattern in lines[0], lines[0]


def test_create_show_update_schema_add(cli_env: PlatformEnv, store: str, schemas: dict[str, Path]) -> None:
    info = _show(cli_env, store)
    assert info["partition_count"] == 3
    assert info["value_schemas"][0]["schema"]["name"] == "Profile"
    assert set(info["regions"]) == {"dc-0", "dc-1", "dc-2"}

    result = cli_env.cli("schema", "add", store, "--value-schema", str(schemas["v2"]), check=True)
    assert "value schema 2 registered" in result.stdout
    listed = json.loads(cli_env.cli("schema", "list", store, "--json", check=True).stdout)
    assert [s["id"] for s in listed] == [1, 2]

    cli_env.cli(
        "store",
        "update",
        store,
        "--rollout-order",
        "dc-2,dc-1,dc-0",
        "--versions-to-preserve",
        "3",
        "--hook-config",
        "swap.window=weekdays",
        check=True,
    )
    info = _show(cli_env, store)
    assert info["rollout_order"] == ["dc-2", "dc-1", "dc-0"]
    assert info["versions_to_preserve"] == 3
    assert info["hook_configs"] == {"swap.window": "weekdays"}
    assert store in cli_env.cli("store", "list", check=True).stdout.split()

    text = cli_env.cli("store", "show", store, check=True).stdout
    assert "rollout order:        dc-2, dc-1, dc-0" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["schema", "add", "{store}", "--value-schema", "{incompatible}"], "not backward compatible"),
        (["schema", "add", "{store}", "--value-schema", "{not_json}"], "is not valid JSON"),
        (["schema", "add", "{store}", "--value-schema", "{not_avro}"], "is not a valid Avro schema"),
        (
            ["schema", "add", "{store}", "--value-schema", "/no/such/file.avsc"],
            "cannot read value schema file",
        ),
        (["store", "create", "{store}", "--key-schema", "{key}", "--value-schema", "{v1}"], "already exists"),
        (["store", "update", "{store}", "--rollout-order", "dc-0,dc-9"], "unknown regions ['dc-9']"),
        (["store", "update", "{store}", "--hook-config", "novalue"], "--hook-config expects key=value"),
        (["store", "update", "{store}", "--compression", "LZ4"], "unknown compression 'LZ4'"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(
    cli_env: PlatformEnv, store: str, schemas: dict[str, Path], args: list[str], message: str
) -> None:
    before = _show(cli_env, store)
    values = {"store": store, **{k: str(v) for k, v in schemas.items()}}
    result = cli_env.cli(*[a.format(**values) for a in args])
    _assert_one_line_error(result, message)
    assert _show(cli_env, store) == before


@pytest.mark.parametrize(
    "args",
    [
        ["store", "show", "ghost_store"],
        ["store", "update", "ghost_store", "--partitions", "2"],
        ["store", "delete", "ghost_store"],
        ["schema", "list", "ghost_store"],
    ],
)
def test_unknown_store(cli_env: PlatformEnv, args: list[str]) -> None:
    _assert_one_line_error(cli_env.cli(*args), "unknown store 'ghost_store'")


def test_invalid_store_name_and_schema_change_nothing(cli_env: PlatformEnv, schemas: dict[str, Path]) -> None:
    before = cli_env.cli("store", "list", check=True).stdout
    result = cli_env.cli(
        "store",
        "create",
        "bad;name",
        "--key-schema",
        str(schemas["key"]),
        "--value-schema",
        str(schemas["v1"]),
    )
    _assert_one_line_error(result, "invalid store name 'bad;name'")
    result = cli_env.cli(
        "store",
        "create",
        "fresh",
        "--key-schema",
        str(schemas["key"]),
        "--value-schema",
        str(schemas["not_avro"]),
    )
    _assert_one_line_error(result, "is not a valid Avro schema")
    assert cli_env.cli("store", "list", check=True).stdout == before


def test_delete(cli_env: PlatformEnv, store: str) -> None:
    cli_env.cli("store", "delete", store, check=True)
    assert store not in cli_env.cli("store", "list", check=True).stdout.split()


def test_every_command_has_help(cli_env: PlatformEnv) -> None:
    for args in (
        ["--help"],
        ["store", "--help"],
        ["schema", "--help"],
        ["up", "--help"],
        ["status", "--help"],
        ["store", "create", "--help"],
        ["store", "update", "--help"],
        ["store", "show", "--help"],
        ["store", "list", "--help"],
        ["store", "delete", "--help"],
        ["schema", "add", "--help"],
        ["schema", "list", "--help"],
        ["down", "--help"],
        ["metrics", "--help"],
        ["push", "--help"],
        ["get", "--help"],
        ["server", "--help"],
        ["rollout", "--help"],
        ["rollout", "status", "--help"],
        ["rollout", "approve", "--help"],
    ):
        result = cli_env.cli(*args)
        assert result.returncode == 0 and "Usage" in result.stdout, args
    installed = cli_env.venice("--help")  # the installed console script, as a user runs it
    assert installed.returncode == 0 and "Usage: venice" in installed.stdout
