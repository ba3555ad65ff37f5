"""Session-wide servers, each started once per test session and stopped at its end, and the markers that say
what a test needs (`kafka`, `spark`, `airflow`, `postgres`): set from the fixtures a test uses, so a test cannot
need a component without being marked for it. `make test-fast` runs the tests that need none of them."""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import sandbox
from tests.support.interruption import pytest_sessionstart  # noqa: F401  (the hook, registered here)
from tests.support.leftovers import leaves_nothing, platform_parts
from tests.support.metadata import migrated
from tests.support.platform import PlatformEnv, make_platform_env, stop_background_commands
from tests.support.postgres import postgres_server
from venice_core.config import DEFAULTS, ClusterConfig
from venice_core.config.keys import SPARK_MASTER
from venice_core.controller import stores, versions
from venice_core.embedded import platform
from venice_core.embedded.process import ManagedProcess
from venice_core.meta import MetadataStore
from venice_core.spark.submit import default_spark_confs

NEEDED_BY_FIXTURE = {"platform_env": "kafka", "spark": "spark", "airflow_env": "airflow", "postgres_url": "postgres"}

# `make test` hands whole files to three workers in collection order (`--dist loadfile --no-loadscope-reorder`):
# the longest files first, so the short ones fill the gaps at the end instead of one long file running alone
# after the others finished. Seconds each took in a full suite (the Airflow files, longest, are first anyway).
LONGEST_FIRST = {
    "tests/readme/test_readme_commands.py": 660,  # make demo, then the first ten minutes
    "tests/integration/test_drain.py": 400,
    "tests/integration/test_push_e2e.py": 113,
    "tests/integration/test_repush.py": 103,
    "tests/integration/test_rollout_hooks.py": 79,
    "tests/integration/test_stream_job.py": 63,
    "tests/integration/test_davinci_kill.py": 63,
    "tests/integration/test_davinci.py": 57,
    "tests/integration/test_custom_partitioner.py": 55,
    "tests/integration/test_push_formats.py": 54,
    "tests/integration/test_zstd_dictionary.py": 45,
    "tests/cli/test_cli_platform.py": 44,
    "tests/integration/test_hybrid_ingestion.py": 38,
}


def pytest_configure(config: pytest.Config) -> None:
    """Each parallel worker picks its sandboxes' ports from a slice of its own (`sandbox.ENV_PORT_RANGE`)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if worker.startswith("gw") and count > 1:
        low, high = sandbox.PORT_RANGE
        width = (high - low) // count
        start = low + int(worker[2:]) * width
        os.environ[sandbox.ENV_PORT_RANGE] = f"{start}-{start + width}"


# Folders whose tests share a package-scoped platform (one cluster on its profile's fixed ports): all on one worker.
ONE_WORKER_FOLDERS = ("tests/cluster/",)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: a run without xdist (`-p no:xdist`) has none
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, except that a folder of ONE_WORKER_FOLDERS is one unit: its files on different workers
    would each start the folder's platform, on the same ports."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileOrFolderScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return next((folder for folder in ONE_WORKER_FOLDERS if path.startswith(folder)), path)

    return FileOrFolderScheduling(config, log)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in set(getattr(item, "fixturenames", ())) & NEEDED_BY_FIXTURE.keys():
            item.add_marker(NEEDED_BY_FIXTURE[fixture])
    # A stable sort of whole files: each file's tests stay together and in their order.
    items.sort(
        key=lambda item: (
            not item.nodeid.startswith(("tests/cluster/", "tests/airflow/")),
            -LONGEST_FIRST.get(item.location[0], 0),
        )
    )


@pytest.fixture(scope="session")
def platform_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformEnv]:
    """The embedded platform (real Kafka broker, migrated metadata store, three region servers), up for the whole
    session."""
    env = make_platform_env(tmp_path_factory.mktemp("venice-home"))
    config = env.config
    try:
        platform.up(config, report=lambda _line: None)
        yield env
    finally:
        with leaves_nothing(*platform_parts(config)):  # no process, no listening port of the platform
            platform.down(config, report=lambda _line: None)


@pytest.fixture(scope="module", autouse=True)
def _stores_of_the_module_deleted(request: pytest.FixtureRequest) -> Iterator[None]:
    """The stores a test file made on the session's platform are deleted once the file is done: a hybrid store's
    real-time consumers otherwise keep fetching for the rest of the session in every region (nine stores left by six
    files took a platform's idle CPU from 7% to 23% of a core, measured), slowing every later test on the worker.
    Best effort: a store that cannot be deleted stays, as it did before."""
    module = request.node
    if not any(item.path == module.path and "platform_env" in item.fixturenames for item in request.session.items):
        yield
        return
    env: PlatformEnv = request.getfixturevalue("platform_env")
    before = versions.store_names(env.meta)
    yield
    for name in sorted(versions.store_names(env.meta) - before):
        try:
            stores.delete_store(env.meta, env.config, name)
        except Exception as exc:  # noqa: BLE001 - a cleanup for speed: what stays is what stayed before
            logging.getLogger(__name__).warning("store %s made by %s not deleted: %s", name, module.name, exc)


@pytest.fixture(autouse=True)
def _background_commands_stopped() -> Iterator[None]:
    """A `venice` command a test started in the background and left running is stopped after the test, before the
    platform it talks to (a wider fixture) is."""
    yield
    stop_background_commands()


@pytest.fixture(autouse=True)
def _platform_whole(request: pytest.FixtureRequest) -> None:
    """Each test on the session's platform finds every part of it running: a test cut short by its timeout while it
    restarted a server it had killed must not leave the tests after it without that server."""
    if "platform_env" not in request.fixturenames:
        return
    config = request.getfixturevalue("platform_env").config
    if any(ManagedProcess(p.name, config.run_dir).pid() is None for p in platform.plan(config)):
        platform.up(config, report=lambda _line: None)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for the session's tests of the push job's logic (its JVM starts once; the job's own
    functions run on it in-process). `local[2,4]`: two cores, and a failed task is retried as on a cluster."""
    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors need the venv's packages
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(DEFAULTS[SPARK_MASTER])
        .appName("venice-tests")
        .config(map=default_spark_confs())  # the push job's own Spark settings
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()
        # py4j closes its connections at interpreter exit and logs that at INFO to pytest's closed capture stream.
        logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server (the embedded one, `venice_core.embedded.postgres`), for the whole session."""
    base = Path(tempfile.mkdtemp(prefix="venice-pg-"))
    try:
        with postgres_server(base) as url:
            yield url
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def meta(tmp_path: Path) -> Iterator[MetadataStore]:
    """A metadata store of the test's own: the session's region servers (which watch the platform's store and
    report on every version they host) must not race the statuses a test sets."""
    store = MetadataStore(f"sqlite:///{tmp_path / 'meta.db'}")
    migrated(store)
    yield store
    store.dispose()


@pytest.fixture
def config(tmp_path: Path) -> ClusterConfig:
    """Three regions sharing one (never started) broker, as the embedded platform configures them."""
    return make_platform_env(tmp_path / "home").config


@pytest.fixture
def spark_job(spark: Any) -> Any:
    """The push job on the session's SparkSession, as a `rollout.local` job runner."""
    from tests.support.jobs import InProcessSparkJob

    return InProcessSparkJob(spark)
