"""`venice store` and `venice schema` through the command's entry point (in this process, over a metadata store of
their own: no broker is needed for metadata); each bad input is one line, non-zero, no change."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.support.platform import PlatformEnv
from tests.support.topics import InMemoryTopics
from venice_core.controller import versions
from venice_core.meta import MetadataStore
from venice_core.model.status import ExecutionStatus
from venice_core.pubsub import admin

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
        (["store", "update", "{store}", "--remove-hook-config", "nothere"], "has no hook config 'nothere' to remove"),
        (["store", "update", "{store}"], "nothing to update in store"),
        (["store", "update", "{store}", "--compression", "LZ4"], "unknown compression 'LZ4'"),
        (
            ["store", "update", "{store}", "--repush-schedule", "61 * * * *", "--repush-ttl", "60"],
            "invalid repush schedule '61 * * * *'",
        ),
        (
            ["store", "update", "{store}", "--repush-schedule", "weekly", "--repush-ttl", "60"],
            "invalid repush schedule 'weekly'",
        ),
        (["store", "update", "{store}", "--repush-schedule", "daily"], "set both --repush-schedule and --repush-ttl"),
        (
            ["store", "update", "{store}", "--repush-schedule", "daily", "--repush-ttl", "0"],
            "repush TTL must be a whole number of seconds from 1",
        ),
        (
            [
                "store",
                "update",
                "{store}",
                "--repush-schedule",
                "daily",
                "--repush-ttl",
                "60",
                "--repush-hours",
                "18-9",
            ],
            "invalid repush calendar",
        ),
        (["store", "update", "{store}", "--no-repush-schedule", "--repush-ttl", "60"], "takes no other repush setting"),
        (
            ["store", "update", "{store}", "--push-input", "/data/{{{{ ds }}}}/"],  # (str.format: {{ is {)
            "has no scheduled push: set both --push-schedule and --push-input",
        ),
        (["store", "update", "{store}", "--push-schedule", "daily"], "set both --push-schedule and --push-input"),
        (
            ["store", "update", "{store}", "--push-schedule", "daily", "--push-input", "/data/{{{{ ds }}/"],
            "the push input template '/data/{{ ds }/' is not valid Jinja: unexpected '}'",
        ),
        (["store", "update", "{store}", "--push-schedule", "daily", "--push-input", " "], "template is empty"),
        (
            ["store", "update", "{store}", "--push-schedule", "0 25 * * *", "--push-input", "/d"],
            "invalid push schedule '0 25 * * *'",
        ),
        (
            ["store", "update", "{store}", "--push-schedule", "daily", "--push-input", "/d", "--push-days", "mon-xyz"],
            "invalid push calendar",
        ),
        (["store", "update", "{store}", "--no-push-schedule", "--push-input", "/d"], "takes no other push setting"),
        (
            ["store", "update", "{store}", "--push-schedule", "daily", "--push-input", "/tmp/x/{{{{ nosuchvar }}}}/"],
            "uses what an Airflow run does not provide: 'nosuchvar' is undefined",
        ),
        (
            ["store", "update", "{store}", "--push-schedule", "daily", "--push-input", "/data/{{{{ dss }}}}/"],
            "'dss' is undefined (did you mean 'ds'?)",
        ),
        (
            ["store", "update", "{store}", "--push-schedule", "daily", "--push-input", "relative/{{{{ ds }}}}"],
            "is a relative path (a run renders it like 'relative/2026-01-05'): give an absolute path or a URL",
        ),
        (
            [
                "store",
                "update",
                "{store}",
                "--push-schedule",
                "daily",
                "--push-input",
                "/d",
                "--push-holidays",
                "2026-12-24,2026-13-01",
            ],
            "invalid push calendar: holiday '2026-13-01' is not a date YYYY-MM-DD (month must be in 1..12)",
        ),
        (
            ["store", "update", "{store}", "--push-schedule", "daily", "--push-input", "/d", "--push-hours", "18-6"],
            "hours '18-6' cross midnight: overnight windows are not supported",
        ),
        (
            ["store", "update", "{store}", "--push-schedule", "@hourly", "--push-input", "/d"],
            "of Airflow's presets only @daily is taken",
        ),
        (
            [
                "store",
                "update",
                "{store}",
                "--compression",
                "ZSTD_WITH_DICT",
                "--push-schedule",
                "daily",
                "--push-input",
                "s3a://bucket/{{{{ ds }}}}/",
            ],
            "a ZSTD_WITH_DICT store's scheduled push must read local files, not s3a://bucket/{{ ds }}/",
        ),
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


def test_a_scheduled_repush_is_set_changed_shown_and_turned_off(cli_env: PlatformEnv, store: str) -> None:
    cli_env.cli(
        "store",
        "update",
        store,
        "--repush-schedule",
        "0  10 * * mon-fri",
        "--repush-ttl",
        "86400",
        "--repush-timezone",
        "Europe/Paris",
        "--repush-holidays",
        "2026-12-25",
        check=True,
    )
    assert _show(cli_env, store)["repush_schedule"] == {
        "cron": "0 10 * * mon-fri",
        "ttl_seconds": 86400,
        "days": "mon-fri",
        "hours": "9-17",
        "timezone": "Europe/Paris",
        "holidays": ["2026-12-25"],
    }
    cli_env.cli("store", "update", store, "--repush-ttl", "3600", "--repush-schedule", "daily", check=True)
    info = _show(cli_env, store)["repush_schedule"]
    assert (info["cron"], info["ttl_seconds"], info["timezone"]) == ("daily", 3600, "Europe/Paris")
    text = cli_env.cli("store", "show", store, check=True).stdout
    assert "scheduled repush:     daily when the current version is older than 3600 s" in text
    cli_env.cli("store", "update", store, "--no-repush-schedule", check=True)
    assert _show(cli_env, store)["repush_schedule"] is None
    help_text = cli_env.cli("store", "update", "--help", check=True).stdout
    assert "--repush-schedule" in help_text and "--no-repush-schedule" in help_text


def test_a_scheduled_push_is_set_changed_shown_and_turned_off(cli_env: PlatformEnv, store: str) -> None:
    template = "/data/users/{{ ds }}/"
    cli_env.cli(
        "store",
        "update",
        store,
        "--push-schedule",
        "0 6  * * *",
        "--push-input",
        template,
        "--push-days",
        "mon-sun",
        "--push-hours",
        "0-24",
        "--push-holidays",
        "2026-12-25,2026-12-26",
        check=True,
    )
    assert _show(cli_env, store)["push_schedule"] == {
        "cron": "0 6 * * *",
        "input_template": template,
        "days": "mon-sun",
        "hours": "0-24",
        "timezone": "UTC",
        "holidays": ["2026-12-25", "2026-12-26"],
    }
    assert _show(cli_env, store)["repush_schedule"] is None  # a schedule of its own
    cli_env.cli("store", "update", store, "--push-schedule", "daily", "--push-timezone", "Europe/Paris", check=True)
    text = cli_env.cli("store", "show", store, check=True).stdout
    assert f"scheduled push:       daily from {template} (mon-sun 0-24 h Europe/Paris, 2 holidays)" in text
    cli_env.cli("store", "update", store, "--push-input", "/data/{{ ds_nodash }}/", check=True)
    assert _show(cli_env, store)["push_schedule"]["input_template"] == "/data/{{ ds_nodash }}/"
    # What Airflow users write: its @daily preset, pendulum's dates and filters, macros, a URL.
    template = "s3a://bucket/{{ macros.ds_add(ds, -1) }}/{{ data_interval_end.subtract(hours=1) | ts_nodash }}/"
    cli_env.cli("store", "update", store, "--push-schedule", "@daily", "--push-input", template, check=True)
    schedule = _show(cli_env, store)["push_schedule"]
    assert (schedule["cron"], schedule["input_template"]) == ("daily", template)
    cli_env.cli("store", "update", store, "--no-push-schedule", check=True)
    assert _show(cli_env, store)["push_schedule"] is None
    assert "scheduled push:       no" in cli_env.cli("store", "show", store, check=True).stdout
    help_text = cli_env.cli("store", "update", "--help", check=True).stdout
    assert "--push-schedule" in help_text and "--push-input" in help_text and "--no-push-schedule" in help_text


@pytest.mark.parametrize(
    "args",
    [
        ["store", "show", "ghost_store"],
        ["store", "update", "ghost_store", "--partitions", "2"],
        ["store", "delete", "ghost_store"],
        ["schema", "list", "ghost_store"],
        ["store", "rollback", "ghost_store"],
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


def _swap_everywhere(env: PlatformEnv, store: str, number: int, regions: tuple[str, ...]) -> None:
    """A version ingested and swapped in `regions`, as a rollout leaves it (its topics are not needed here)."""
    meta = MetadataStore(env.config.metadata_db_url)
    try:
        versions.create_version(meta, env.config, store, f"job-{number}", topics=InMemoryTopics())
        for region in env.config.region_names:
            for partition in range(3):
                versions.report_partition(meta, store, number, region, partition, ExecutionStatus.COMPLETED, 1, 1)
        for region in regions:
            versions.swap_region(meta, store, region, number)
        versions.finish_push(meta, store, number)
    finally:
        meta.dispose()


def _currents(env: PlatformEnv, store: str) -> dict[str, dict[str, int]]:
    return _show(env, store)["regions"]


def test_rollback_returns_regions_to_their_backup(cli_env: PlatformEnv, store: str) -> None:
    _swap_everywhere(cli_env, store, 1, ("dc-0", "dc-1", "dc-2"))
    _swap_everywhere(cli_env, store, 2, ("dc-0", "dc-1"))  # dc-2 still serves version 1, with no backup
    result = cli_env.cli("store", "rollback", store, "--region", "dc-1", check=True)
    assert result.stdout == f"rolled '{store}' back in dc-1: version 2 -> version 1\n"
    assert _currents(cli_env, store)["dc-1"] == {"current": 1, "backup": 0}

    # Every region by default: dc-1 and dc-2 have no backup, so nothing changes, dc-0 included.
    before = _show(cli_env, store)
    _assert_one_line_error(
        cli_env.cli("store", "rollback", store),
        f"cannot roll back '{store}': no backup version in dc-1, dc-2; nothing was changed",
    )
    _assert_one_line_error(
        cli_env.cli("store", "rollback", store, "--region", "dc-0", "--region", "dc-7"),
        f"store '{store}' has no region 'dc-7' (regions: dc-0, dc-1, dc-2)",
    )
    assert _show(cli_env, store) == before

    result = cli_env.cli("store", "rollback", store, "--region", "dc-0", check=True)
    assert result.stdout == f"rolled '{store}' back in dc-0: version 2 -> version 1\n"
    info = _show(cli_env, store)
    assert {r: v["current"] for r, v in info["regions"].items()} == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    assert next(v["status"] for v in info["versions"] if v["number"] == 2) == "ROLLED_BACK"


def test_delete(cli_env: PlatformEnv, store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    topics = InMemoryTopics()  # the store's topics are deleted with it: no broker here
    topics.create_topic("any", "unrelated_rt", 1)
    monkeypatch.setattr(admin, "delete_topics", topics.delete_topics)
    cli_env.cli("store", "delete", store, check=True)
    assert store not in cli_env.cli("store", "list", check=True).stdout.split()
    assert topics.names() == {"unrelated_rt"}


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
        ["store", "rollback", "--help"],
        ["schema", "add", "--help"],
        ["schema", "list", "--help"],
        ["down", "--help"],
        ["metrics", "--help"],
        ["push", "--help"],
        ["get", "--help"],
        ["write", "--help"],
        ["delete", "--help"],
        ["server", "--help"],
        ["rollout", "--help"],
        ["rollout", "status", "--help"],
        ["rollout", "approve", "--help"],
    ):
        result = cli_env.cli(*args)
        assert result.returncode == 0 and "Usage" in result.stdout, args
    installed = cli_env.venice("--help")  # the installed console script, as a user runs it
    assert installed.returncode == 0 and "Usage: venice" in installed.stdout
