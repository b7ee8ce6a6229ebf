"""The Hudi peers of the benchmark get the other peers' session settings, minus Delta's own."""

from __future__ import annotations

from bench import envs, hudi


def test_hudi_session_keeps_engine_settings_and_drops_deltas() -> None:
    conf = hudi.engine_conf({"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "8"})
    assert conf["spark.driver.memory"] == "2g"
    assert conf["spark.sql.shuffle.partitions"] == "8"
    assert conf["spark.ui.enabled"] == "false"
    assert "-XX:+UseParallelGC" in conf["spark.driver.extraJavaOptions"]
    assert "-XX:Tier4InvocationThreshold=25000" in conf["spark.driver.extraJavaOptions"]
    assert conf["spark.hadoop.fs.AbstractFileSystem.file.impl"].endswith("RawLocalFs")
    for key in conf:
        assert not key.startswith(("spark.databricks.", "spark.sql.extensions", "spark.sql.catalog", "spark.jars"))
    session = {**conf, **hudi._HUDI_SESSION}
    assert session["spark.jars.packages"] == hudi.HUDI_PACKAGE
    assert "Hoodie" in session["spark.sql.extensions"]


def test_hudi_writes_partition_only_the_date_layout() -> None:
    dated = hudi.options("MERGE_ON_READ", "date")
    assert dated["hoodie.datasource.write.partitionpath.field"] == "o_year"
    assert dated["hoodie.datasource.write.table.type"] == "MERGE_ON_READ"
    flat = hudi.options("COPY_ON_WRITE", "clustered")
    assert flat["hoodie.datasource.write.partitionpath.field"] == ""
    assert flat["hoodie.datasource.write.keygenerator.class"].endswith("NonpartitionedKeyGenerator")
    assert flat["hoodie.datasource.write.precombine.field"] == "seq"


def test_spark35_calibration_runs_the_same_iceberg_release() -> None:
    own = hudi._iceberg_session("/w")
    assert own["spark.jars.packages"] == hudi.ICEBERG_PACKAGE
    assert hudi.ICEBERG_PACKAGE.rsplit(":", 1)[1] == envs.ICEBERG["4.1"].rsplit(":", 1)[1]
    assert "3.5" in hudi.ICEBERG_PACKAGE and hudi.CALIBRATION in hudi.PEERS


def test_spark35_process_sees_no_other_spark_or_python_path() -> None:
    base = {"SPARK_HOME": "/opt/spark-4", "PYSPARK_PYTHON": "/x", "PATH": "/bin"}
    assert envs.process_env(base, envs.SPARK35, "/repo") == {"PATH": "/bin", "PYTHONPATH": "/repo"}


def test_report_names_only_the_spark35_packages_of_peers_that_ran() -> None:
    from bench import report

    hudi_only = report.environment({"lakemerge_log", "hudi_mor"})
    assert "hudi-spark3.5-bundle_2.12:1.0.2" in hudi_only and "iceberg-spark-runtime-3.5" not in hudi_only
    assert "PySpark 3.5" not in report.environment({"lakemerge_log", "iceberg_mor"})
    assert "iceberg-spark-runtime-3.5_2.12:1.12.0" in report.environment({hudi.CALIBRATION})
