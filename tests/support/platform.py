"""An embedded platform in a temporary home, on free ports, configured through a real properties file.

`venice(...)` runs the command as a user would (for the CLI's own tests); the other helpers act and read
in-process, through the controller and the metadata store."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from tests.support.metadata import migrated
from tests.support.sandbox import write_sandbox_config
from venice_core.cli.main import main as cli_main
from venice_core.config import ClusterConfig, load_config
from venice_core.controller import stores
from venice_core.meta import MetadataStore
from venice_core.rollout import local

VENICE = str(Path(sys.executable).with_name("venice"))
SCHEMAS = Path(__file__).parents[2] / "examples" / "schemas"


_BACKGROUND: list[subprocess.Popen[str]] = []  # the commands `venice_background` started, until stopped


def stop_background_commands() -> None:
    """SIGTERM (then SIGKILL after 15 s) each background command still running: a push left following its run once
    its test failed outlived the whole session, its platform stopped under it."""
    while _BACKGROUND:
        process = _BACKGROUND.pop()
        if process.poll() is not None:
            continue
        process.terminate()
        try:
            process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


RECORDS_INPUT = "records://given-by-the-test"  # a remote input: its schema is the job's to check


@dataclass
class PlatformEnv:
    home: Path
    properties: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def config(self) -> ClusterConfig:
        return load_config(self.env)

    def venice(self, *args: str, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run the installed `venice` command in a process of its own (where the process matters: spark-submit
        pushes, the Airflow follower, `venice up`); `cli` runs the same entry point in this process."""
        result = subprocess.run([VENICE, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"venice {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def cli(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        """The `venice` command's own entry point run in this process (the CLI tests' way: a subprocess costs
        about 2 s of imports), with this platform's environment, its output and exit status captured."""
        stdout, stderr = io.StringIO(), io.StringIO()
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)
        code = 0
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                cli_main([*args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        result = subprocess.CompletedProcess(["venice", *args], code, stdout.getvalue(), stderr.getvalue())
        if check and code != 0:
            raise AssertionError(f"venice {' '.join(args)} failed ({code}):\n{result.stderr}")
        return result

    def venice_background(self, *args: str) -> subprocess.Popen[str]:
        """Start a `venice` command and return at once (to act on the platform while it runs). One the test leaves
        running (it failed or was stopped first) is stopped after it (`stop_background_commands`)."""
        process = subprocess.Popen(
            [VENICE, *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        _BACKGROUND.append(process)
        return process

    def with_settings(self, properties: Path, **settings: str) -> PlatformEnv:
        """The same platform (data dir, ports) seen through a properties file of its own with `settings` over this
        one's, as an operator would configure hooks or timeouts; nothing is restarted."""
        properties.write_text(self.properties.read_text() + "".join(f"{k}={v}\n" for k, v in settings.items()))
        return PlatformEnv(self.home, properties, {**self.env, "VENICE_CONFIG": str(properties)})

    @cached_property
    def meta(self) -> MetadataStore:
        """The platform's metadata store (one engine per env, kept for the session)."""
        return MetadataStore(self.config.metadata_db_url)

    def create_user_store(self, prefix: str, partitions: int = 1, name: str | None = None, **options: Any) -> str:
        """A new store, uniquely named (or `name`), with the example user key and value schemas (`options` as
        `controller.stores.create_store` takes them)."""
        store = name or f"{prefix}_{uuid.uuid4().hex[:8]}"
        key, value = (SCHEMAS / "user_key.avsc").read_text(), (SCHEMAS / "user_value_v1.avsc").read_text()
        stores.create_store(self.meta, self.config, store, key, value, partitions=partitions, **options)
        return store

    def push(
        self,
        store: str,
        job: local.PushJobRunner,
        input_path: str | Path = "",
        progress: Callable[[str], None] = lambda _line: None,
        **options: Any,
    ) -> int:
        """A whole push (`venice push --local`'s steps) in this process, the job run by `job`; returns the version
        once every region serves it. Without an input path (a job that writes given records), the push names a
        remote one, whose schema is left to the job, as for any input the push cannot read locally."""
        return local.push(
            self.config, self.meta, store, str(input_path or RECORDS_INPUT), progress=progress, run_job=job, **options
        )

    def serving(self, store: str) -> dict[str, int]:
        """Each region's current version of the store."""
        return stores.describe_store(self.meta, store).serving()


# A test broker does little work beside a suite that saturates two cores: the client compiler alone and the serial
# collector take about a third less CPU than G1 with the optimising compiler (start, light load and idle alike).
TEST_BROKER_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def make_platform_env(home: Path, extra: dict[str, str] | None = None) -> PlatformEnv:
    properties = write_sandbox_config(home, {"kafka.embedded.jvm.options": TEST_BROKER_JVM_OPTIONS, **(extra or {})})
    env = {**os.environ, "VENICE_CONFIG": str(properties)}
    env.pop("VENICE__DATA_DIR", None)
    return PlatformEnv(home=home, properties=properties, env=env)


def metadata_env(tmp_path: Path, hooks: str, **extra: str) -> tuple[PlatformEnv, MetadataStore]:
    """A platform config with `hooks` (and `extra` settings) whose metadata store is migrated and holds the store
    `users`: enough for the CLI's metadata commands, nothing started."""
    env = make_platform_env(tmp_path / "home", {"venice.store.lifecycle.hooks": hooks, **extra})
    meta = MetadataStore(env.config.metadata_db_url)
    migrated(meta)
    env.cli(
        "store", "create", "users", "--key-schema", str(SCHEMAS / "user_key.avsc"),
        "--value-schema", str(SCHEMAS / "user_value_v1.avsc"), check=True,
    )  # fmt: skip
    return env, meta
