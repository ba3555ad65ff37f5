"""Spark's Python worker daemon (`spark.python.daemon.module`): pyspark's own `pyspark.daemon`, run with pyspark
imported from its installed package (`spark_python`). Spark starts it as `python -m venice_core.jobs.spark_daemon
pyspark.worker`; the workers it forks inherit its path."""

import runpy

from venice_core.jobs.spark_python import prefer_installed_pyspark

if __name__ == "__main__":
    prefer_installed_pyspark()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
