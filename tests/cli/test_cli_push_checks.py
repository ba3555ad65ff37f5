"""`venice push` checks its input before anything starts: one `error:` line in well under 5 s, no version, no DAG
run. The platform is configured with Airflow enabled, but none runs: a push that got past its checks would try to
reach it (and fail differently), so each exact message shows where the push stopped."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.metadata import migrated
from tests.support.platform import SCHEMAS, PlatformEnv, make_platform_env
from venice_core.controller import stores
from venice_core.meta import MetadataStore
from venice_core.spark.inputs.input_schema import check_push_input


@pytest.fixture
def env(tmp_path: Path) -> PlatformEnv:
    env = make_platform_env(tmp_path / "home", {"airflow.enabled": "true"})
    meta = MetadataStore(env.config.metadata_db_url)
    migrated(meta)
    meta.dispose()
    for store, flag in (("users", "--no-auto-register-schemas"), ("evolving", "--auto-register-schemas")):
        env.cli(
            "store",
            "create",
            store,
            "--key-schema",
            str(SCHEMAS / "user_key.avsc"),
            "--value-schema",
            str(SCHEMAS / "user_value_v1.avsc"),
            flag,
            check=True,
        )
    return env


def _parquet(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


PROFILE = {"name": "Ada", "age": 36, "score": 1.5}


def _refused(env: PlatformEnv, store: str, input_path: Path | str, *options: str) -> str:
    started = time.monotonic()
    result = env.cli("push", store, "--input", str(input_path), *options)
    elapsed = time.monotonic() - started
    assert result.returncode != 0
    assert result.stdout == ""
    assert elapsed < 5, f"took {elapsed:.1f}s"
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for name in ("users", "evolving"):
        info = json.loads(env.cli("store", "show", name, "--json", check=True).stdout)
        assert info["versions"] == [] and info["largest_used_version"] == 0  # no version was created
        assert [s["id"] for s in info["value_schemas"]] == [1]  # and nothing registered
    return lines[0]


def test_missing_input_path(env: PlatformEnv, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "path"
    assert _refused(env, "users", missing) == f"error: input path {missing} does not exist"


def test_unreadable_input_file(env: PlatformEnv, tmp_path: Path) -> None:
    corrupt = tmp_path / "in" / "part-0.parquet"
    corrupt.parent.mkdir()
    corrupt.write_bytes(b"PAR1 but not really")
    assert _refused(env, "users", corrupt.parent).startswith(f"error: cannot read parquet input {corrupt}: ")


def test_unknown_store(env: PlatformEnv, tmp_path: Path) -> None:
    data = _parquet(tmp_path / "in.parquet", [{"key": "u1", **PROFILE}])
    assert _refused(env, "ghost", data) == "error: unknown store 'ghost'"


def test_missing_key_field(env: PlatformEnv, tmp_path: Path) -> None:
    data = _parquet(tmp_path / "in.parquet", [{"id": "u1", **PROFILE}])
    assert _refused(env, "users", data) == "error: input has no key field 'key' (fields: id, name, age, score)"
    assert _refused(env, "users", data, "--key-field", "user") == (
        "error: input has no key field 'user' (fields: id, name, age, score)"
    )


def test_missing_value_field(env: PlatformEnv, tmp_path: Path) -> None:
    data = _parquet(tmp_path / "in.parquet", [{"key": "u1", "profile": PROFILE}])
    assert _refused(env, "users", data, "--value-field", "value") == (
        "error: input has no value field 'value', and the record of its other fields does not match any value "
        "schema of 'users' (value schema 1: input field 'profile' is not in the schema); register a compatible "
        "schema or enable auto-registration"
    )


def test_input_that_fits_no_value_schema(env: PlatformEnv, tmp_path: Path) -> None:
    data = _parquet(tmp_path / "in.parquet", [{"key": "u1", "value": {**PROFILE, "age": "thirty-six"}}])
    assert _refused(env, "users", data) == (
        "error: input does not match any value schema of 'users' (value schema 1: field 'value.age' is "
        "StringType in the input but int in the schema); register a compatible schema or enable auto-registration"
    )


def test_auto_registering_store_refuses_an_incompatible_derived_schema(env: PlatformEnv, tmp_path: Path) -> None:
    data = _parquet(tmp_path / "in.parquet", [{"key": "u1", **PROFILE, "age": "thirty-six"}])
    assert _refused(env, "evolving", data).startswith(
        "error: the input needs a new value schema for 'evolving', which cannot be registered (the input changes "
        "the type of 'age'): new value schema is not backward compatible with value schema 1"
    )


def test_good_and_remote_input_pass_without_registering(env: PlatformEnv, tmp_path: Path) -> None:
    """What the checks let through: input that fits a schema, input a store may register (registered later, by
    the rollout's schema_registration step), and input only the job can read."""
    meta = MetadataStore(env.config.metadata_db_url)
    try:
        fits = _parquet(tmp_path / "fits" / "p.parquet", [{"key": "u1", **PROFILE}])
        check_push_input(meta, "users", str(fits.parent), "key", "value")
        grows = _parquet(tmp_path / "grows.parquet", [{"key": "u1", **PROFILE, "city": "Oslo"}])
        check_push_input(meta, "evolving", str(grows), "key", "value")
        check_push_input(meta, "users", "s3a://bucket/users/", "key", "value")
        assert [i for i, _ in stores.list_value_schemas(meta, "evolving")] == [1]
    finally:
        meta.dispose()
