"""Spark's own security on a secured platform's standalone cluster: `spark.authenticate` with a shared secret (every
RPC between the master, the workers, a job's driver and its executors authenticated) and `spark.network.crypto`
(those connections encrypted). The secret is one of the platform's (`secrets`), written with the settings into a
`spark-defaults.conf` of mode 0600 that the master, the workers and every spark-submit read through
`$SPARK_CONF_DIR` (the daemons) or `--properties-file` (a spark-submit): never a `--conf` on a command line. A worker
hands it to its executors in their environment, as Spark does. An application submitted without it is refused by the
master and never runs.

A spark-submit names the file rather than the folder: Spark's launcher puts `$SPARK_CONF_DIR` first on the driver's
classpath, and a classpath other than the one the driver's class archive was made with (`class_archive`) makes the
JVM refuse the archive: the driver then loaded and verified every class itself, 8-13 s more before each secured job's
first task on two cores."""

from __future__ import annotations

from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.security.files import folder, keep_private
from venice_core.security.secrets import secret

ENV_CONF_DIR = "SPARK_CONF_DIR"
DEFAULTS_FILE = "spark-defaults.conf"


def secured(config: ClusterConfig, master: str | None = None) -> bool:
    """Whether Spark is secured here: a secured platform, and a standalone master (`master`, else the config's)."""
    return config.security.enabled and (master or config.spark.master).startswith("spark://")


def conf_dir(config: ClusterConfig) -> Path:
    """The folder of the secured `spark-defaults.conf` (written when missing or changed)."""
    folder_ = folder(config) / "spark"
    settings = {
        "spark.authenticate": "true",
        "spark.authenticate.secret": secret(config, "spark-authenticate"),
        "spark.network.crypto.enabled": "true",
    }
    keep_private(folder_ / DEFAULTS_FILE, "".join(f"{key} {value}\n" for key, value in settings.items()))
    folder_.chmod(0o700)
    return folder_


def env(config: ClusterConfig) -> dict[str, str]:
    """The environment entry of a Spark daemon (the master, a worker): the secured conf dir."""
    return {ENV_CONF_DIR: str(conf_dir(config))} if secured(config) else {}


def properties_file(config: ClusterConfig, master: str) -> str | None:
    """The secured `spark-defaults.conf` of a spark-submit to `master` (its `--properties-file`), None if unsecured."""
    return str(conf_dir(config) / DEFAULTS_FILE) if secured(config, master) else None
