"""Everything `spark-submit` runs, and how it is submitted, a package per place the code runs:

- `submit`: building and running spark-submit (the spec both orchestrators render), with what it is given: the job
  package (`--py-files`), the extra jars, the class-data archive. Runs in the control plane (CLI, Airflow, streams).
- `specs`: the task specs a driver hands its executors and the result a job reports to the control plane.
- `jobs`: the programs spark-submit runs, on the driver (push, repush, stream and its drain).
- `tasks`: what runs on the executors (the jobs' tasks, the Python data sources they read).
- `inputs`: a push's input and a repush's source inspected without a JVM (schemas, samples).

Only this package imports pyspark. A job that spark-submit starts imports this package before pyspark: from here on,
pyspark comes from its compiled package, not from the zip spark-submit put first on the path (`python_path`; a no-op
in any process whose path has no such zip)."""

from venice_core.spark.python_path import prefer_installed_pyspark

prefer_installed_pyspark()
