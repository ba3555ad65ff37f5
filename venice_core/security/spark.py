"""Spark's own security on a secured platform's standalone cluster: `spark.authenticate` with a shared secret (every
RPC between the master, the workers, a job's driver and its executors authenticated) and `spark.network.crypto`
(those connections encrypted). The secret is one of the platform's (`secrets`), written with the settings into a
`spark-defaults.conf` of mode 0600 that the master, the workers and every spark-submit read through
`$SPARK_CONF_DIR`: never a `--conf` on a command line. A worker hands it to its executors in their environment, as
Spark does. An application submitted without it is refused by the master and never runs."""

from __future__ import annotations

from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.security.files import folder, keep_private
from venice_core.security.secrets import secret

ENV_CONF_DIR = "SPARK_CONF_DIR"


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
    keep_private(folder_ / "spark-defaults.conf", "".join(f"{key} {value}\n" for key, value in settings.items()))
    folder_.chmod(0o700)
    return folder_


def env(config: ClusterConfig, master: str | None = None) -> dict[str, str]:
    """The environment entry of a Spark process (a daemon, a spark-submit to `master`): the secured conf dir."""
    return {ENV_CONF_DIR: str(conf_dir(config))} if secured(config, master) else {}
