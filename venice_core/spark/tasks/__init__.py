"""What runs on Spark's executors: the push, repush and streaming jobs' tasks (`push_tasks`, `repush_tasks`,
`stream_tasks`), Spark's hash partitioning computed ahead (`hash_partitioning`) and the Python data sources the
executors read (`avro_source`, `kafka_source`). A Python worker imports only these and what they need (no metadata
store, no SQLAlchemy: 1.5 s per worker), and what the driver hands them (`spark.specs`)."""
