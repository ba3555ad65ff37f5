"""`venice store update --hook-config` refuses a key that none of the configured hooks reads (each hook declares
its keys), naming the hooks and the nearest key they know, and changes nothing; a hook that declares nothing
accepts any key; with no hook configured the key is kept with a warning. Over a metadata store, no broker."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.metadata import migrated
from tests.support.platform import SCHEMAS, PlatformEnv, make_platform_env, metadata_env
from venice_core.meta import MetadataStore

BUILTIN = "venice_core.hooks.builtin"
HOOKS = "tests.hooks_fixtures.sample_hooks"


def _hook_configs(env: PlatformEnv) -> dict[str, str]:
    return json.loads(env.cli("store", "show", "users", "--json", check=True).stdout)["hook_configs"]


def _refused(env: PlatformEnv, *pairs: str) -> str:
    before = _hook_configs(env)
    result = env.cli("store", "update", "users", *(f"--hook-config={pair}" for pair in pairs))
    assert result.returncode == 1 and result.stdout == "", result.stdout + result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert _hook_configs(env) == before  # nothing changed
    return result.stderr.strip()


def test_a_key_no_configured_hook_reads_is_refused_with_the_nearest_known_key(tmp_path: Path) -> None:
    env, meta = metadata_env(
        tmp_path, f"{BUILTIN}.MinDelayBetweenRegions,{BUILTIN}.SwapWindow,venice_core.hooks.events.LifecycleEvents"
    )
    env.cli("store", "update", "users", "--hook-config", "min.delay.between.regions.seconds=60", check=True)
    hooks = "MinDelayBetweenRegions, SwapWindow, LifecycleEvents"
    assert _refused(env, "swap.window.days=mon-fri", "min.delay.seconds=60") == (
        "error: store-level hook config of 'users' refused: unknown key 'min.delay.seconds': none of the configured "
        f"hooks ({hooks}) reads it; did you mean 'min.delay.between.regions.seconds'?"
    )
    assert _refused(env, "lifecycle.events.topik=events") == (
        "error: store-level hook config of 'users' refused: unknown key 'lifecycle.events.topik': none of the "
        f"configured hooks ({hooks}) reads it; did you mean 'lifecycle.events.topic'?"
    )
    assert "unknown key 'no.such.key'" in _refused(env, "no.such.key=5")
    assert _refused(env, "swap.window.timezone=Mars/Base") == (  # alone: no day, hour or holiday makes a window yet
        "error: store-level hook config of 'users' refused: SwapWindow: invalid swap window setting "
        "swap.window.timezone: unknown time zone 'Mars/Base' (an IANA zone, e.g. Europe/Paris)"
    )
    # Declared keys, and a key under a declared prefix (the event producer's own properties), are taken.
    env.cli(
        "store",
        "update",
        "users",
        "--hook-config=swap.window.days=mon-fri",
        "--hook-config=lifecycle.events.kafka.acks=all",
        check=True,
    )
    assert _hook_configs(env) == {
        "min.delay.between.regions.seconds": "60",
        "swap.window.days": "mon-fri",
        "lifecycle.events.kafka.acks": "all",
    }
    meta.dispose()


def test_a_hook_declaring_no_keys_accepts_any_with_a_warning(tmp_path: Path) -> None:
    """RecordEveryCall records whatever configs it is given: it declares no keys, so nothing is refused beside it
    (as for any user hook written before hooks declared their keys), but a key no declaring hook reads is said."""
    env, meta = metadata_env(tmp_path, f"{BUILTIN}.ManualApproval")
    assert _refused(env, "no.such.key=5").endswith("(ManualApproval) reads it; they read: manual.approval.regions")
    text = env.properties.read_text()
    env.properties.write_text(
        text.replace(f"{BUILTIN}.ManualApproval", f"{BUILTIN}.ManualApproval,{HOOKS}.RecordEveryCall")
    )
    result = env.cli("store", "update", "users", "--hook-config", "no.such.key=5", check=True)
    assert result.stderr == (
        "warning: hook config 'no.such.key' of 'users' is read by none of the hooks that declare their keys; kept for "
        "RecordEveryCall, which declare none (hook_config_keys)\n"
    )
    assert env.cli("store", "update", "users", "--hook-config", "manual.approval.regions=dc-1", check=True).stderr == ""
    assert _hook_configs(env) == {"no.such.key": "5", "manual.approval.regions": "dc-1"}
    meta.dispose()


def test_without_hooks_a_key_is_kept_with_a_warning_and_later_updates_check_only_new_keys(tmp_path: Path) -> None:
    env = make_platform_env(tmp_path / "home")  # no hook configured
    meta = MetadataStore(env.config.metadata_db_url)
    migrated(meta)
    schemas = ("--key-schema", str(SCHEMAS / "user_key.avsc"), "--value-schema", str(SCHEMAS / "user_value_v1.avsc"))
    env.cli("store", "create", "users", *schemas, check=True)
    result = env.cli("store", "update", "users", "--hook-config", "min.delay.seconds=60", check=True)
    assert result.stdout == "updated store 'users'\n"
    assert result.stderr == (
        "warning: no lifecycle hook is configured (venice.store.lifecycle.hooks): nothing reads hook config "
        "'min.delay.seconds' of 'users'\n"
    )
    assert _hook_configs(env) == {"min.delay.seconds": "60"}
    assert env.cli("store", "update", "users", "--partitions", "2", check=True).stderr == ""  # no key set: no warning

    # Hooks configured later: a key saved before is not checked again, so the store can still be updated.
    with env.properties.open("a") as properties:
        properties.write(f"venice.store.lifecycle.hooks={BUILTIN}.MinDelayBetweenRegions\n")
    assert "unknown key 'min.delay.seconds'" in _refused(env, "min.delay.seconds=30")
    env.cli("store", "update", "users", "--hook-config", "min.delay.between.regions.seconds=5", check=True)
    env.cli("store", "update", "users", "--remove-hook-config", "min.delay.seconds", check=True)
    assert _hook_configs(env) == {"min.delay.between.regions.seconds": "5"}
    meta.dispose()
