"""A secured platform's secrets are known to Airflow's secrets masker in every task process (the plugin's listener,
called before a task runs): a log line that would show one shows `***`, with Airflow's own masker."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.sdk._shared.secrets_masker.secrets_masker import redact, reset_secrets_masker
from venice_plugin import secret_masking

from tests.support.platform import make_platform_env
from venice_core.security.secrets import secret


@pytest.fixture(autouse=True)
def fresh_masker() -> None:
    reset_secrets_masker()


def test_every_secret_of_a_secured_platform_is_masked_in_a_task_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_platform_env(tmp_path / "home", {"security.enabled": "true"})
    for name, value in env.env.items():
        monkeypatch.setenv(name, value)
    made = [secret(env.config, name) for name in ("kafka-admin", "redis", "postgres")]
    line = f"connecting with sasl.password={made[0]} (redis {made[1]}, postgres {made[2]})"
    assert redact(line) == line  # unknown to the masker before the task starts
    secret_masking.on_task_instance_running(previous_state=None, task_instance=None)
    masked = redact(line)
    assert all(value not in masked for value in made)
    assert masked == "connecting with sasl.password=*** (redis ***, postgres ***)"


def test_an_unsecured_platform_has_no_secret_to_mask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_platform_env(tmp_path / "home", {})
    for name, value in env.env.items():
        monkeypatch.setenv(name, value)
    assert secret_masking.mask_platform_secrets() == 0
