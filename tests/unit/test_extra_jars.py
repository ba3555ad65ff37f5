"""The jars the jobs add to pyspark's: Spark's Avro module of pyspark's own version, and the platform's functions."""

from __future__ import annotations

import re

import pyspark

from venice_core.spark.submit import extra_jars


def test_the_avro_module_is_pyspark_s_version() -> None:
    pom = extra_jars.POM.read_text()
    assert re.search(r"<artifactId>spark-avro_2\.13</artifactId>\s*<version>([^<]+)</version>", pom).group(1) == (
        pyspark.__version__
    )


def test_spark_confs_name_every_jar_and_the_functions_jar_holds_each_function() -> None:
    import zipfile

    jars = extra_jars.jar_confs()["spark.jars"].split(",")
    assert any("spark-avro_2.13" in jar for jar in jars) and str(extra_jars.functions_jar()) in jars
    names = zipfile.ZipFile(extra_jars.functions_jar()).namelist()
    for java_class in extra_jars.FUNCTIONS.values():
        assert java_class.replace(".", "/") + ".class" in names
