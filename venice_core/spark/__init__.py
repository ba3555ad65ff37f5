"""Everything `spark-submit` runs (the push, repush and streaming jobs, what their executors run, their sources and
input reading) and how it is submitted (`submit`: the spec both orchestrators render; the class-data archive).

Only this package imports pyspark. A job that spark-submit starts imports this package before pyspark: from here on,
pyspark comes from its compiled package, not from the zip spark-submit put first on the path (`python_path`; a no-op
in any process whose path has no such zip)."""

from venice_core.spark.python_path import prefer_installed_pyspark

prefer_installed_pyspark()
