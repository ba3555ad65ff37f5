from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from venice_core.cli.context import use_profile
from venice_core.config import (
    ENV_CONFIG,
    ENV_PROFILE,
    HOOKS_CONFIGS_PREFIX,
    load_config,
    process_env,
    profile_path,
)
from venice_core.errors import ConfigError


def _load(tmp_path: Path, text: str):
    path = tmp_path / "venice.properties"
    path.write_text(text)
    return load_config({"VENICE_CONFIG": str(path)}), path


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = load_config({"VENICE__DATA_DIR": str(tmp_path)})
    assert config.region_names == ("dc-0", "dc-1", "dc-2")
    assert config.source_region == "dc-0"
    assert config.kafka.bootstrap == "127.0.0.1:9092"
    assert config.data_dir == tmp_path
    assert config.metadata_db_url == f"sqlite:///{tmp_path / 'metadata.db'}"
    assert all(r.kafka_bootstrap == "127.0.0.1:9092" for r in config.regions)
    # Regions sharing the embedded broker keep their topics apart by prefix.
    assert config.region("dc-1").version_topic("users", 3) == "dc-1.users_v3"
    assert config.hooks.wait_interval_seconds == 60
    assert config.hooks.failure_policy == "PROCEED"
    assert (config.rollout.step_retries, config.rollout.step_retry_delay_seconds) == (2, 10)


def test_home_properties_file_is_found(tmp_path: Path) -> None:
    (tmp_path / "venice.properties").write_text("cluster.name=prod-west\n")
    assert load_config({"VENICE__DATA_DIR": str(tmp_path)}).cluster_name == "prod-west"


def test_file_overrides_and_region_settings(tmp_path: Path) -> None:
    config, _ = _load(
        tmp_path,
        "# production-like\n"
        "regions = east, west\n"
        "source.region: west\n"
        "region.east.kafka.bootstrap.servers=10.0.0.1:9092\n"
        "region.east.topic.prefix=\n"
        "metadata.db.url=postgresql://u@db/venice\n",
    )
    assert config.region_names == ("east", "west")
    assert config.source_region == "west"
    assert config.region("east").kafka_bootstrap == "10.0.0.1:9092"
    assert config.region("east").version_topic("s", 1) == "s_v1"
    assert config.region("west").topic_prefix == "west."
    assert config.metadata_db_url == "postgresql://u@db/venice"


def test_hook_keys_verbatim_and_configs_prefix_clipped(tmp_path: Path) -> None:
    config, _ = _load(
        tmp_path,
        "venice.store.lifecycle.hooks=a.B, c.D\n"
        "venice.store.lifecycle.hooks.threads=2\n"
        "venice.store.lifecycle.hooks.timeout.seconds=5\n"
        "venice.store.lifecycle.hooks.wait.interval.seconds=0.5\n"
        "venice.store.lifecycle.hooks.failure.policy=abort\n"
        f"{HOOKS_CONFIGS_PREFIX}min.delay.seconds=30\n",
    )
    assert config.hooks.class_paths == ("a.B", "c.D")
    assert config.hooks.threads == 2
    assert config.hooks.timeout_seconds == 5
    assert config.hooks.wait_interval_seconds == 0.5
    assert config.hooks.failure_policy == "ABORT"
    assert dict(config.hooks.configs) == {"min.delay.seconds": "30"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cluster.name=a\nno.such.key=1\n", r"venice.properties:2: unknown key 'no.such.key'"),
        ("this line is wrong\n", r"venice.properties:1: malformed line"),
        ("kafka.embedded.port=abc\n", r"venice.properties:1: kafka.embedded.port must be an integer"),
        ("regions=a,b\nregion.c.topic.prefix=x\n", r"venice.properties:2: .*names region 'c'"),
        ("source.region=dc-9\n", r"venice.properties:1: source region 'dc-9'"),
        (
            "kafka.embedded.enabled=maybe\n",
            r"venice.properties:1: kafka.embedded.enabled must be true or false",
        ),
        ("cluster.name=a\ncluster.name=b\n", r"venice.properties:2: duplicate key 'cluster.name'"),
        ("venice.store.lifecycle.hooks.failure.policy=retry\n", r"venice.properties:1: .*must be one of"),
        ("regions=DC_0\n", r"venice.properties:1: invalid region name 'DC_0'"),
        ("rollout.step.retries=-1\n", r"venice.properties:1: rollout.step.retries must be at least 0"),
        (
            "hosts.enabled=true\nhosts.subnet=10.213.5.0/16\n",
            r"venice.properties:2: hosts.subnet '10.213.5.0/16' is not a network",
        ),
        ("hosts.enabled=true\nhosts.subnet=10.0.0.0/8\n", r"venice.properties:2: hosts.subnet 10.0.0.0/8 is not a /16"),
        (
            "hosts.enabled=true\nhosts.subnet=8.8.0.0/16\n",
            r"venice.properties:2: hosts.subnet 8.8.0.0/16 is not a private",
        ),
        ("hosts.enabled=true\nhosts.bridge=docker-0\n", r"venice.properties:2: hosts.bridge 'docker-0' must be 1-8"),
    ],
)
def test_bad_keys_name_the_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


def test_missing_config_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="VENICE_CONFIG names .*nope.properties, which is not a file"):
        load_config({"VENICE_CONFIG": str(tmp_path / "nope.properties")})


def test_unknown_region_lookup(tmp_path: Path) -> None:
    config = load_config({"VENICE__DATA_DIR": str(tmp_path)})
    with pytest.raises(ConfigError, match="unknown region 'dc-7'"):
        config.region("dc-7")


def test_sandbox_ports_come_from_the_workers_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import sandbox

    monkeypatch.setenv(sandbox.ENV_PORT_RANGE, "24000-24100")
    ports = sandbox.free_ports(5, block=8)
    assert all(p >= 24000 and p + 8 <= 24100 for p in ports) and len(set(ports)) == 5
    monkeypatch.delenv(sandbox.ENV_PORT_RANGE)
    assert sandbox.port_range() == sandbox.PORT_RANGE


def test_instances_of_a_region_have_ports_and_data_dirs_of_their_own(tmp_path: Path) -> None:
    config, path = _load(tmp_path, f"data.dir={tmp_path}\nserver.port.base=7000\nregion.dc-1.instances=3\n")
    assert [r.instances for r in config.regions] == [1, 3, 1]
    assert config.server_port("dc-1") == 7001  # instance 0 keeps the single-instance port and data dir
    assert [config.server_port("dc-1", n) for n in range(3)] == [7001, 7004, 7007]
    assert config.instance_dir("dc-1") == tmp_path / "regions" / "dc-1"
    assert config.instance_dir("dc-1", 2) == tmp_path / "regions" / "dc-1.2"
    assert config.server_addresses("dc-1") == [("127.0.0.1", 7001), ("127.0.0.1", 7004), ("127.0.0.1", 7007)]
    with pytest.raises(ConfigError, match=r"region dc-0 has 1 instance \(region.dc-0.instances\): instance 1 is out"):
        config.server_port("dc-0", 1)
    assert (config.server.instance_lease_seconds, config.server.instance_offline_grace_seconds) == (5, 30)
    assert (config.server.min_ready_replicas, config.client.long_tail_retry_ms) == (0, 20)
    for text, error in (
        ("region.dc-1.instances=0", "region.dc-1.instances must be at least 1"),
        ("region.dc-9.instances=2", "names region 'dc-9', not in regions"),
        ("client.long.tail.retry.ms=-1", "must be 0 or more"),
        ("instance.lease.seconds=0", "must be positive"),
    ):
        path.write_text(text + "\n")
        with pytest.raises(ConfigError, match=error):
            load_config({"VENICE_CONFIG": str(path)})


@pytest.fixture(scope="module")
def shipped_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as a Spark job ships it (`spark.submit.job_package`)."""
    from venice_core.spark.submit.job_package import write_zip

    target = tmp_path_factory.mktemp("job") / "venice_core.zip"
    write_zip(target)
    return target


@pytest.mark.parametrize("chosen_by", ["flag", "environment"])
def test_a_profile_reaches_every_process_the_platform_starts_as_one_choice(
    shipped_package: Path, monkeypatch: pytest.MonkeyPatch, chosen_by: str
) -> None:
    """`venice --profile cluster` or `VENICE_PROFILE=cluster`: a process the platform starts gets the profile's file
    alone, so it loads the same config even where it imports the project from elsewhere: a Spark job's driver on a
    Celery worker imports `venice_core` from the job's zip (`--py-files`), where the profile's own path differs (it
    refused to start, naming both the file and the profile, before)."""
    for name in (ENV_CONFIG, ENV_PROFILE):  # (set, then removed: monkeypatch restores them as they were)
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    if chosen_by == "flag":
        use_profile("cluster")  # what `venice --profile cluster` does in the CLI's process
    else:
        monkeypatch.setenv(ENV_PROFILE, "cluster")
    config = load_config()
    env = process_env(config)
    assert ENV_PROFILE not in env and env[ENV_CONFIG] == str(profile_path("cluster").resolve())  # type: ignore[union-attr]
    probe = (
        f"import sys; sys.path.insert(0, {str(shipped_package)!r}); from venice_core.config import load_config; "
        "import venice_core; assert venice_core.__file__.startswith(sys.path[0]), venice_core.__file__; "
        "print(load_config().cluster_name)"
    )
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (0, f"{config.cluster_name}\n"), result.stderr


def test_a_number_setting_must_be_finite(tmp_path: Path) -> None:
    path = tmp_path / "venice.properties"
    path.write_text("venice.store.lifecycle.hooks.wait.max.seconds=nan\n")
    with pytest.raises(ConfigError, match=r"wait.max.seconds must be a finite number, got 'nan'"):
        load_config({"VENICE_CONFIG": str(path)})
