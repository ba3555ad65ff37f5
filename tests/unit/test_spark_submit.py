"""Where the Spark jobs go and what they ship: every spec on the config's `spark.master` unless the request's
`spark.master` conf names another; on a cluster's master the `venice_core` package as `--py-files` (one zip per
content, its modules importable with their bytecode) and the executors' settings, none of it on a local master."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from venice_core.config import ClusterConfig
from venice_core.embedded import airflow, spark_cluster
from venice_core.host import cache
from venice_core.host.maven import fetch_jars
from venice_core.spark.submit import (
    PushJobRequest,
    StreamJobRequest,
    extra_jars,
    job_package,
    master_unreachable,
    push_job_spec,
    stream_job_spec,
)

CLUSTER = "spark://127.0.0.1:7377"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache of the module's own: the package's zip is built once for all its tests. The Spark jars are linked in
    from the real cache (filled once, by the Makefile): fetched by Maven and compiled by javac again, they cost ~6 s."""
    path = tmp_path_factory.mktemp("cache")
    real = cache.cache_dir()
    for made in (fetch_jars(extra_jars.POM, transitive=False), extra_jars.functions_jar()):
        link = path / made.relative_to(real)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(made)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(cache.ENV_CACHE_DIR, str(path))
        yield path


def _on_cluster(config: ClusterConfig) -> ClusterConfig:
    return dataclasses.replace(config, spark=dataclasses.replace(config.spark, master=CLUSTER, workers=2, ui_port=8290))


def _push(config: ClusterConfig, **confs: str) -> list[str]:
    request = PushJobRequest("users", 1, "/data/in", "key", "value", "users-1", dict(confs))
    return push_job_spec(config, request, config.data_dir / "result.json").argv()


def _stream(config: ClusterConfig, **confs: str) -> list[str]:
    request = StreamJobRequest("p", "users", "dc-0", "events", "b:1", "k", ("v",), confs=dict(confs))
    return stream_job_spec(config, request, "run-1", config.data_dir / "checkpoint").argv()


def _confs(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--conf"]
    return {key: value for key, value in pairs}


def _value(argv: list[str], option: str) -> str | None:
    return argv[argv.index(option) + 1] if option in argv else None


def test_on_the_default_local_master_the_jobs_ship_nothing(config: ClusterConfig) -> None:
    for argv in (_push(config), _stream(config)):
        assert _value(argv, "--master") == config.spark.master == "local[2,4]"
        assert "--py-files" not in argv
        assert not {"spark.executorEnv.PYTHONPATH", "spark.executor.memory", "spark.cores.max"} & _confs(argv).keys()


def test_every_job_keeps_its_scratch_files_in_the_data_dir(config: ClusterConfig) -> None:
    """Block managers and the session's artifacts under the data dir: a driver killed mid-job leaves them with the
    platform's data (a test's sandbox, removed with it), not in /tmp."""
    scratch = config.data_dir / "spark" / "scratch"
    for argv in (_push(config), _stream(config)):
        confs = _confs(argv)
        assert confs["spark.local.dir"] == str(scratch)
        assert confs["spark.driver.extraJavaOptions"].endswith(f" -Djava.io.tmpdir={scratch}")
    assert scratch.is_dir()


def test_on_a_cluster_every_job_ships_the_package_and_a_stream_takes_one_core(
    config: ClusterConfig, cache_dir: Path
) -> None:
    cluster = _on_cluster(config)
    push, stream = _push(cluster), _stream(cluster)
    zips = list((cache_dir / "py-files").glob("venice_core-*.zip"))
    assert len(zips) == 1 and zips[0].name == f"venice_core-{job_package.content_hash()}.zip"
    for argv in (push, stream):
        confs = _confs(argv)
        assert _value(argv, "--master") == CLUSTER and _value(argv, "--py-files") == str(zips[0])
        # Spark's Python daemon imports its module before a task puts the py-files on the path.
        assert confs["spark.executorEnv.PYTHONPATH"] == zips[0].name
        assert confs["spark.python.daemon.module"] == "venice_core.spark.worker_daemon"
        assert (confs["spark.executor.memory"], confs["spark.executor.cores"]) == ("1g", "1")
        assert "SharedArchiveFile" not in confs["spark.executor.extraJavaOptions"]  # the driver's class archive
        assert argv.index("--py-files") < argv.index(next(a for a in argv if a.endswith(".py")))
    assert "spark.cores.max" not in _confs(push)  # a push takes every free core
    assert _confs(stream)["spark.cores.max"] == "1"  # a streaming job, running for good, only one


def test_a_secured_clusters_jobs_name_its_private_settings_file_and_keep_the_drivers_classpath(
    config: ClusterConfig, cache_dir: Path
) -> None:
    """The secret reaches spark-submit as a file it names (`--properties-file`, mode 0600), never on its command line;
    not as `$SPARK_CONF_DIR`, which Spark's launcher puts on the driver's classpath, where it made the JVM refuse the
    class archive (made with the default classpath). A job on a local master, or an unsecured platform's, has none."""
    secured = dataclasses.replace(_on_cluster(config), security=dataclasses.replace(config.security, enabled=True))
    request = PushJobRequest("users", 1, "/data/in", "key", "value", "users-1", {})
    spec = push_job_spec(secured, request, config.data_dir / "result.json")
    named = Path(_value(spec.argv(), "--properties-file") or "")
    assert named.parent.parent == config.data_dir / "security" and named.stat().st_mode & 0o777 == 0o600
    settings = dict(line.split(" ", 1) for line in named.read_text().splitlines())
    assert settings["spark.authenticate"] == settings["spark.network.crypto.enabled"] == "true"
    assert settings["spark.authenticate.secret"] not in " ".join(spec.argv())
    assert "SPARK_CONF_DIR" not in spec.env
    assert _value(_stream(secured), "--properties-file") == str(named)
    assert "--properties-file" not in _push(secured, **{"spark.master": "local[1]"})
    assert "--properties-file" not in _push(_on_cluster(config))


def test_a_requests_own_master_and_settings_win(config: ClusterConfig, cache_dir: Path) -> None:
    cluster = _on_cluster(config)
    local = _push(cluster, **{"spark.master": "local[1]"})
    assert _value(local, "--master") == "local[1]" and "--py-files" not in local
    elsewhere = _stream(config, **{"spark.master": CLUSTER, "spark.executor.memory": "3g", "spark.cores.max": "2"})
    assert _value(elsewhere, "--master") == CLUSTER and "--py-files" in elsewhere
    assert _confs(elsewhere)["spark.executor.memory"] == "3g" and _confs(elsewhere)["spark.cores.max"] == "2"


def test_the_zip_is_built_once_per_content_and_imports_with_its_bytecode(tmp_path: Path, cache_dir: Path) -> None:
    folder = cache_dir / "py-files"  # the module's (built by the test above when it ran first: a build costs ~4 s)
    built = job_package.package_zip(folder)
    assert job_package.package_zip(folder) == built and list(folder.glob("*.zip")) == [built]
    names = zipfile.ZipFile(built).namelist()
    assert {"venice_core/spark/worker_daemon.py", "venice_core/spark/worker_daemon.pyc"} <= set(names)
    assert not [n for n in names if "__pycache__" in n]
    found = subprocess.run(
        [sys.executable, "-c", "import venice_core.spark.specs.task_specs as m; print(m.__file__)"],
        env={"PYTHONPATH": str(built)},  # ahead of the installed package
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == f"{built}/venice_core/spark/specs/task_specs.pyc"
    copy = tmp_path / "venice_core"
    copy.mkdir()
    (copy / "__init__.py").write_text("")
    first = job_package.content_hash(copy)
    (copy / "__init__.py").write_text("X = 1\n")
    assert job_package.content_hash(copy) != first


def test_airflows_spark_connection_names_the_configs_master_in_client_mode(config: ClusterConfig) -> None:
    for master in ("local[2,4]", CLUSTER):
        on_master = dataclasses.replace(config, spark=dataclasses.replace(config.spark, master=master))
        connection = json.loads(airflow.environment(on_master)["AIRFLOW_CONN_SPARK_DEFAULT"])
        assert connection == {"conn_type": "spark", "host": master, "extra": {"deploy-mode": "client"}}


def test_a_worker_is_alive_when_it_runs_and_the_master_lists_it_alive(
    config: ClusterConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = _on_cluster(config)
    assert spark_cluster.processes(config) == [] and spark_cluster.ports(config) == []
    assert [p.name for p in spark_cluster.processes(cluster)] == ["spark-master", "spark-worker-0", "spark-worker-1"]
    assert spark_cluster.ports(cluster) == [7377, 8290, 8291, 8292]
    workers = [
        {"webuiaddress": "http://127.0.0.1:8291", "state": "ALIVE"},  # worker 0
        {"webuiaddress": "http://127.0.0.1:8292", "state": "DEAD"},  # worker 1's lost run
        {"webuiaddress": "http://127.0.0.1:8292", "state": "ALIVE"},  # worker 1 started again
    ]
    monkeypatch.setattr(spark_cluster, "master_state", lambda _config: {"workers": workers})
    assert spark_cluster.alive_workers(cluster) == 0  # listed, but neither runs
    cluster.run_dir.mkdir(parents=True)
    for n in (0, 1):
        spark_cluster.worker_process(cluster, n).pid_file.write_text(str(os.getpid()))  # a process that runs
    assert spark_cluster.alive_workers(cluster) == 2
    workers[0]["state"] = "DEAD"
    assert spark_cluster.alive_workers(cluster) == 1
    monkeypatch.setattr(spark_cluster, "master_state", lambda _config: None)
    assert spark_cluster.alive_workers(cluster) == 0


def test_a_standalone_master_that_does_not_answer_is_said_at_once() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert master_unreachable(f"spark://127.0.0.1:{port}") is None
        assert master_unreachable(f"spark://127.0.0.1:1,127.0.0.1:{port}") is None  # one of several masters
    reason = master_unreachable(f"spark://127.0.0.1:{port}")
    assert reason is not None and reason.startswith(f"the Spark master spark://127.0.0.1:{port} does not answer")
    assert master_unreachable("local[2,4]") is None


def test_a_request_s_jars_join_the_platform_s() -> None:
    """`--conf spark.jars=...` adds to the jars the push job needs (spark-avro, the platform's functions), not over
    them."""
    from venice_core.spark.submit import job_spec
    from venice_core.spark.submit.extra_jars import jar_confs

    spec = job_spec("j", "local[2]", [], "job.py", {"spark.jars": "/opt/extra.jar"}, Path("/data/spark/scratch"))
    assert spec.conf["spark.jars"] == f"{jar_confs()['spark.jars']},/opt/extra.jar"
