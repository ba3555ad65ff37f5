"""Spark entry points (`spark-submit`) and the local push orchestration that runs them."""

from venice_core.jobs.spark_python import prefer_installed_pyspark

# A job that spark-submit starts imports this package before pyspark: from here on, pyspark comes from its compiled
# package, not from the zip spark-submit put first on the path (`spark_python`).
prefer_installed_pyspark()
