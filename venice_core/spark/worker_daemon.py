"""Spark's Python worker daemon (`spark.python.daemon.module`): pyspark's own `pyspark.daemon`, run with pyspark
imported from its installed package (`spark.python_path`). Spark starts it as `python -m venice_core.spark.worker_daemon
pyspark.worker`; the workers it forks inherit its path."""

import runpy

from venice_core.spark.python_path import prefer_installed_pyspark

if __name__ == "__main__":
    prefer_installed_pyspark()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
