"""The drain markers of a streaming job's Kafka source (`spark.tasks.kafka_source`), as the driver's transforms and
the drain's resume read them: no pyspark here, so that the CLI, which plans a stream, does not import it."""

# The offsets' key of the drain markers (the id of the run that emitted them), beside the partitions' numbers.
MARKER_KEY = "drain"
MARKER_OFFSET = -1
# 9999-12-31T23:59:59Z: a drain marker's event time, later than the end of any window.
MARKER_EVENT_TIME_MS = 253_402_300_799_000
