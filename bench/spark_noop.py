"""A Spark application that runs one trivial Python task per core and stops: `bench.raw_topology.spark_start_seconds`
submits it to time what every push or repush pays before its first record."""

from pyspark.sql import SparkSession

if __name__ == "__main__":
    spark = SparkSession.builder.appName("venice-bench-noop").getOrCreate()
    spark.sparkContext.parallelize(range(4), 2).map(lambda x: x + 1).count()
    spark.stop()
