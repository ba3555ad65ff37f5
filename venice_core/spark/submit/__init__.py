"""The push job's `spark-submit` spec, rendered in one place for both paths: `venice push --local` runs
`spark-submit` with `SparkJobSpec.argv()`, the DAG's `PushJobOperator` (a SparkSubmitOperator) takes the same
fields. A push's configs (`venice push --conf`) become Spark properties and job flags here."""

from __future__ import annotations

import json
import shutil
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from venice_core.config import ENV_KAFKA_CLIENT, LOOPBACK, ClusterConfig, conf_flag, process_env
from venice_core.security import principals
from venice_core.security import spark as spark_security
from venice_core.spark.python_path import DAEMON_CONFS
from venice_core.spark.specs.application import application_name
from venice_core.spark.submit import class_archive, job_package

# The programs spark-submit runs are files of `spark.jobs` (a script, its folder first on the driver's path).
JOBS_DIR = Path(__file__).resolve().parent.parent / "jobs"
JOB_FILE = JOBS_DIR / "push.py"
DRIVER_MEMORY = "2g"

# The push job's Spark properties unless a push's `--conf` says otherwise.
DEFAULT_SPARK_CONFS: dict[str, str] = {
    "spark.pyspark.python": sys.executable,
    "spark.ui.enabled": "false",
    # The driver's RPC and block manager on loopback unless a job's spec names its host's address (`job_spec`).
    "spark.driver.bindAddress": LOOPBACK,
    "spark.driver.host": LOOPBACK,
    "spark.sql.shuffle.partitions": "8",
    **DAEMON_CONFS,  # Python workers import pyspark compiled, not from Spark's zip
}
# C1-only JIT: a push runs for seconds to minutes in local mode, where C2's compiler threads take cores from the job
# itself; measured on 2 cores (bench/push_throughput), the job's CPU fell from 37 to 24 core-seconds.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def default_spark_confs() -> dict[str, str]:
    """`DEFAULT_SPARK_CONFS`, the driver's JVM options (with the Spark class archive once it is built) and the jars
    the jobs add to pyspark's (`extra_jars`: fetched on first use)."""
    # Imported here, not with the package: `python -m venice_core.spark.submit.extra_jars` (make install) runs that
    # module after importing this package, and runpy warns when the package has imported it already.
    from venice_core.spark.submit.extra_jars import jar_confs

    java_options = class_archive.java_options(DRIVER_JAVA_OPTIONS)
    return {**DEFAULT_SPARK_CONFS, "spark.driver.extraJavaOptions": java_options, **jar_confs()}


# A job submitted to a cluster (`spark://...`: the standalone cluster `venice up` runs) runs its driver here (client
# mode: its result file and the driver's own reads are local; its executors reach it at its host's address)
# and its tasks in executors the workers start, one core each: a push takes every free core, a streaming job one
# (`spark.cores.max`), so that one running for good never starves the pushes. The class archive stays the driver's
# (dumped for the driver's class path, not an executor's); the executors share its C1-only JIT, for the same reason.
EXECUTOR_CONFS: dict[str, str] = {
    "spark.executor.memory": "1g",
    "spark.executor.cores": "1",
    "spark.executor.extraJavaOptions": DRIVER_JAVA_OPTIONS,
}
STREAM_CORES_MAX = 1


def runs_in_driver(master: str) -> bool:
    """Whether a master runs the tasks in the driver's JVM (`local`, `local[...]`); any other runs them in
    executors of their own, which need the job's Python code shipped (`--py-files`)."""
    return master == "local" or master.startswith("local[")


def cluster_confs(package: Path) -> dict[str, str]:
    """The Spark properties of a job whose executors run elsewhere, `package` its `--py-files` zip.

    Spark starts its Python daemon (`spark.python.daemon.module`, a module of the package) before a task adds the
    job's py-files to `sys.path`: its PYTHONPATH names the zip too, by its bare name, which the executor fetched
    into its working directory (where the daemon starts) before its first task."""
    return {**EXECUTOR_CONFS, "spark.executorEnv.PYTHONPATH": package.name}


@dataclass(frozen=True)
class PushJobRequest:
    """What the push job is asked to do: write `input_path` as version `number` of `store`."""

    store: str
    number: int
    input_path: str
    key_field: str
    value_field: str
    push_job_id: str
    confs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SparkJobSpec:
    """One `spark-submit` of a job (push, repush, streaming writer)."""

    name: str
    master: str
    conf: dict[str, str]
    args: list[str]
    application: str = str(JOB_FILE)
    driver_memory: str = DRIVER_MEMORY
    py_files: list[str] = field(default_factory=list)  # what executors import (`job_package`), on a cluster
    env: dict[str, str] = field(default_factory=dict)  # spark-submit's, over the platform's (`submit_env`)
    properties_file: str | None = None  # a secured cluster's Spark settings and secret (`security.spark`)

    def argv(self) -> list[str]:
        """The command line, as Airflow's SparkSubmitHook builds it."""
        spark_submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent)) or "spark-submit"
        argv = [spark_submit, "--master", self.master, "--name", self.name, "--driver-memory", self.driver_memory]
        for key, value in self.conf.items():
            argv += ["--conf", f"{key}={value}"]
        if self.py_files:
            argv += ["--py-files", ",".join(self.py_files)]
        if self.properties_file:
            argv += ["--properties-file", self.properties_file]
        return [*argv, self.application, *self.args]


def scratch_dir(config: ClusterConfig) -> Path:
    """Where a job's driver and executors keep their scratch files (block manager dirs, the session's artifacts):
    in the platform's data dir, made if missing. Spark removes them when a job ends; a driver killed mid-job (a test
    does it, an operator may) leaves them here, with the platform's data, instead of in the machine's /tmp."""
    scratch = config.data_dir / "spark" / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    return scratch


def job_spec(
    name: str,
    master: str,
    args: list[str],
    application: str,
    confs: dict[str, str],
    scratch: Path,
    job_confs: dict[str, str] | None = None,
    driver_memory: str = DRIVER_MEMORY,
    cores_max: int | None = None,
    driver_host: str = LOOPBACK,
    kafka_client: Path | None = None,
    properties_file: str | None = None,
) -> SparkJobSpec:
    """A job's spark-submit on `master`: the platform's Spark properties, its driver on `driver_host` (the address
    of the host it runs on, which its executors reach), its scratch dir (`scratch_dir`), the job's own
    (`job_confs`), the executors' and the shipped package's on a cluster (with at most `cores_max` cores; None:
    every free one), then the request's `spark.*` confs over them all. `kafka_client`: the credentials file of the
    job's Kafka principal, named to its driver and executors by path (`security.principals`). `properties_file`: a
    secured cluster's Spark settings (`security.spark`)."""
    # The driver's RPC and block manager listen on its host's address alone, as every server of the platform does.
    conf = {**default_spark_confs(), "spark.driver.bindAddress": driver_host, "spark.driver.host": driver_host}
    conf.update(job_confs or {})
    conf["spark.local.dir"] = str(scratch)  # block managers'
    # The session's artifacts dir is made in the JVM's temporary dir.
    conf["spark.driver.extraJavaOptions"] += f" -Djava.io.tmpdir={scratch}"
    py_files: list[str] = []
    if not runs_in_driver(master):
        package = job_package.package_zip()
        conf.update(cluster_confs(package))
        if cores_max is not None:
            conf["spark.cores.max"] = str(cores_max)
        py_files.append(str(package))
    requested = spark_confs(confs)
    if "spark.jars" in requested:  # a request's jars join the platform's (the push job's functions need them)
        requested["spark.jars"] = ",".join(filter(None, [conf.get("spark.jars", ""), requested["spark.jars"]]))
    conf.update(requested)
    env = {}
    if kafka_client is not None:
        env[ENV_KAFKA_CLIENT] = conf[f"spark.executorEnv.{ENV_KAFKA_CLIENT}"] = str(kafka_client)
    return SparkJobSpec(name, master, conf, args, application, driver_memory, py_files, env, properties_file)


def master_of(config: ClusterConfig, confs: dict[str, str]) -> str:
    """Where a job goes: its request's `spark.master` conf, else the config's (`spark.master`)."""
    return confs.get("spark.master", config.spark.master)


def master_unreachable(master: str, timeout: float = 3.0) -> str | None:
    """Why a standalone master (`spark://host:port`, or several: `spark://h1:p1,h2:p2`) cannot take a job: none of
    its addresses accepts a connection (spark-submit would retry for a minute before giving up). None when one does,
    and for any other master."""
    if not master.startswith("spark://"):
        return None
    reasons = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return None
        except (OSError, ValueError) as exc:
            reasons.append(f"{address}: {exc}")
    return f"the Spark master {master} does not answer ({'; '.join(reasons)}): is the platform up (venice up)?"


def submit_env(config: ClusterConfig) -> dict[str, str]:
    """The environment of a `spark-submit` the platform runs: the config's, with this interpreter for Python."""
    return {**process_env(config), "PYSPARK_PYTHON": sys.executable}


# The push confs read here (`rollout.push_confs` refuses any other): the push job's flags, and the prefixes passed to
# Spark (a push's `spark.*` properties, and the tests' fault injections, as `spark.venice.push.test.*`).
JOB_FLAGS = {"allow.duplicate.key": "--allow-duplicate-key", "allow.empty.input": "--allow-empty"}
SPARK_PREFIX, TEST_FAULT_PREFIX = "spark.", "venice.push.test."


def spark_confs(confs: dict[str, str]) -> dict[str, str]:
    """The Spark properties among a push's configs: `spark.*` as given, and the test fault injections (spark-submit
    passes on only `spark.*` properties)."""
    picked = {key: value for key, value in confs.items() if key.startswith(SPARK_PREFIX)}
    picked.update({f"{SPARK_PREFIX}{key}": value for key, value in confs.items() if key.startswith(TEST_FAULT_PREFIX)})
    return picked


def job_flags(confs: dict[str, str]) -> list[str]:
    """The push job's flags for a push's configs (`allow.duplicate.key`, `allow.empty.input`): each `true` or
    `false` (ConfigError otherwise: `rollout.push_confs` checks them before anything starts)."""
    return [flag for key, flag in JOB_FLAGS.items() if conf_flag(confs, key)]


def _version_args(config: ClusterConfig, request: PushJobRequest) -> list[str]:
    """The version both jobs write: store, number, and its topic in the source region."""
    source = config.region(config.source_region)
    return [
        "--store",
        request.store,
        "--version",
        str(request.number),
        "--topic",
        source.version_topic(request.store, request.number),
        "--bootstrap",
        source.kafka_bootstrap,
    ]


def job_args(config: ClusterConfig, request: PushJobRequest) -> list[str]:
    """The push job's arguments (see `spark.jobs.push.parse_args`), but for its result file."""
    return [
        *_version_args(config, request),
        "--input",
        request.input_path,
        "--key-field",
        request.key_field,
        "--value-field",
        request.value_field,
        "--push-job-id",
        request.push_job_id,
        *job_flags(request.confs),
    ]


REPUSH_JOB_FILE = JOBS_DIR / "repush.py"


def repush_job_args(config: ClusterConfig, request: PushJobRequest) -> list[str]:
    """The repush job's arguments (see `spark.jobs.repush.parse_args`), but for its result file, from a repush's
    resolved confs (`controller.repush_config.resolved_confs`)."""
    from venice_core.controller import repush_config as rc

    confs = request.confs
    repush = rc.parse(confs)
    args = [
        *_version_args(config, request),
        "--source-topic",
        confs[rc.KAFKA_INPUT_TOPIC],
        "--source-version",
        str(rc.source_version(config, confs)),
        "--source-bootstrap",
        confs[rc.KAFKA_INPUT_BROKER_URL],
        "--max-records-per-mapper",
        str(repush.max_records_per_mapper),
        "--push-job-id",
        request.push_job_id,
    ]
    if repush.combiner:
        args.append("--combiner")
    if repush.ttl_start_timestamp is not None:
        args += ["--ttl-start-ms", str(repush.ttl_start_timestamp)]
    if repush.end_offsets is not None:
        args += ["--source-end-offsets", json.dumps(repush.end_offsets, sort_keys=True)]
    return args


def push_job_spec(config: ClusterConfig, request: PushJobRequest, result_file: Path) -> SparkJobSpec:
    """The push job's spark-submit for a request: the name says which store (so an operator can find the JVM). A
    repush (`source.kafka=true`) runs the repush job instead, with the same Spark settings."""
    from venice_core.controller import repush_config as rc  # imports the controller: only where a spec is rendered

    confs = request.confs
    # A push's input is read by the executors: on this machine's cluster a local path is theirs too (a cluster of
    # other machines needs input they all reach: HDFS, S3, a shared mount). The result file is the driver's (client
    # mode).
    repush = rc.is_repush(confs)
    kind, args, job = ("repush", repush_job_args, REPUSH_JOB_FILE) if repush else ("push", job_args, JOB_FILE)
    return job_spec(
        application_name(kind, request.store, request.number),
        master_of(config, confs),
        [*args(config, request), "--result-file", str(result_file)],
        str(job),
        confs,
        scratch_dir(config),
        driver_host=config.hosts.local_address(),
        kafka_client=kafka_client(config, principals.push(request.store)),
        properties_file=spark_security.properties_file(config, master_of(config, confs)),
    )


def kafka_client(config: ClusterConfig, principal: str) -> Path | None:
    """The principal's Kafka credentials file for a job, None on a platform without security."""
    return principals.client_file(config, principal) if config.security.enabled else None


STREAM_JOB_FILE = JOBS_DIR / "stream.py"
# A streaming job runs for good beside the platform: on the config's master as every job (by default `local[2,4]`:
# two local cores, a failed task retried up to 4 tries as on a cluster; on a cluster, one core: `STREAM_CORES_MAX`),
# and with less memory than a push. A retried task's writes carry the same producer GUIDs and sequence numbers
# again, skipped as duplicates; without retries one transient failure (a Python worker that did not connect back
# within Spark's 10 s on a saturated machine) stopped the whole pipeline.
STREAM_DRIVER_MEMORY = "1g"
# A stateful pipeline's shuffle: as many partitions (state stores) as cores, not Spark's 200 (fixed by a query's
# checkpoint at its first start).
# A query's stop waits at most 10 s for a task stuck in its batch (a drain past its timeout), not for ever.
STREAM_SPARK_CONFS = {"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.stopTimeout": "10000"}


@dataclass(frozen=True)
class StreamJobRequest:
    """A nearline streaming pipeline (`venice stream start`): the events of `source_topic` written as `store`'s
    nearline writes in `region`. `confs`: Spark properties (`spark.*`) for its spark-submit."""

    name: str
    store: str
    region: str
    source_topic: str
    source_bootstrap: str
    key_field: str
    value_fields: tuple[str, ...] = ()
    event_time_field: str | None = None
    starting_offsets: str = "earliest"
    max_records_per_batch: int = 100_000  # a first start on a backlog takes it in batches of this many
    trigger_seconds: float = 1.0
    confs: dict[str, str] = field(default_factory=dict)
    transform: str = "map"  # `spark.jobs.stream_transforms`
    window_seconds: float = 10.0
    watermark_seconds: float = 5.0
    drain_timeout_seconds: float = 60.0  # unless the drain's request gives one
    drain_poll_seconds: float = 2.0

    def to_json(self) -> dict[str, object]:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        data["value_fields"] = list(self.value_fields)
        return data

    @classmethod
    def of(cls, data: dict[str, Any]) -> StreamJobRequest:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["value_fields"] = tuple(known.get("value_fields") or ())
        return cls(**known)


def stream_job_spec(config: ClusterConfig, request: StreamJobRequest, run_id: str, checkpoint: Path) -> SparkJobSpec:
    """The streaming job's spark-submit for one run of a pipeline (see `spark.jobs.stream.parse_args`). Its checkpoint
    is a local path, written by the driver and (a stateful pipeline's state) by the executors: theirs too on this
    machine's cluster; a cluster of other machines needs a file system they all reach."""
    args = [
        "--name",
        request.name,
        "--run-id",
        run_id,
        "--store",
        request.store,
        "--region",
        request.region,
        "--source-topic",
        request.source_topic,
        "--source-bootstrap",
        request.source_bootstrap,
        "--key-field",
        request.key_field,
        "--value-fields",
        ",".join(request.value_fields),
        "--event-time-field",
        request.event_time_field or "",
        "--starting-offsets",
        request.starting_offsets,
        "--max-records-per-batch",
        str(request.max_records_per_batch),
        "--trigger-seconds",
        str(request.trigger_seconds),
        "--checkpoint",
        str(checkpoint),
        "--transform",
        request.transform,
        "--window-seconds",
        str(request.window_seconds),
        "--watermark-seconds",
        str(request.watermark_seconds),
        "--drain-timeout-seconds",
        str(request.drain_timeout_seconds),
        "--drain-poll-seconds",
        str(request.drain_poll_seconds),
    ]
    return job_spec(
        f"venice-stream-{request.name}",
        master_of(config, request.confs),
        args,
        str(STREAM_JOB_FILE),
        request.confs,
        scratch_dir(config),
        STREAM_SPARK_CONFS,
        STREAM_DRIVER_MEMORY,
        cores_max=STREAM_CORES_MAX,
        driver_host=config.hosts.local_address(),
        kafka_client=kafka_client(config, principals.nearline(request.store)),
        properties_file=spark_security.properties_file(config, master_of(config, request.confs)),
    )
