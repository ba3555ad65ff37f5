"""The programs `spark-submit` runs, on the driver: the push job (`push`), the repush job (`repush`) and the nearline
streaming job (`stream`, with its drain: `drain_monitor`, `stream_drain`, `drain_resume`, over Spark's checkpoint logs
in `checkpoint_log`; its transforms in `stream_transforms`), and what the push job computes in the JVM
(`avro_columns`). Each job is a file given to spark-submit (`spark.submit.JOBS_DIR`), this folder first on its path;
what its executors run is in `spark.tasks`."""
