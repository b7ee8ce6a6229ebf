"""The SparkSession lakemerge starts: Delta's settings, and the JVM and Spark settings that make a
short-lived local process fast (each measured in bench/RESULTS.md, "Measurements behind lakemerge's
defaults"). Tests that pin how lakemerge runs, not what it does, are marked ``internals``."""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.spark.session import DEBUGGING, LOCAL_COMPILER, session_conf


@pytest.mark.internals
def test_sessions_keep_the_code_of_a_batchs_queries_compiled(spark: Any) -> None:
    # A batch compiles about 100 classes; Spark's default cache of 100 evicted the previous batch's.
    assert session_conf(lakemerge.SparkSettings())["spark.sql.codegen.cache.maxEntries"] == "1000"
    assert (
        session_conf(lakemerge.SparkSettings(master="spark://h:7077"))["spark.sql.codegen.cache.maxEntries"] == "1000"
    )
    own = lakemerge.SparkSettings(conf={"spark.sql.codegen.cache.maxEntries": 50})
    assert session_conf(own)["spark.sql.codegen.cache.maxEntries"] == "50", "the user's conf wins"
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "1000", "the suite's session starts with it"


@pytest.mark.internals
def test_local_sessions_run_the_parallel_garbage_collector(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    compiler = list(LOCAL_COMPILER)
    options = session_conf(lakemerge.SparkSettings())["spark.driver.extraJavaOptions"]
    assert options.split() == ["-XX:+UseParallelGC", *compiler]
    hive = lakemerge.SparkSettings(catalog="hive", metastore_dir="/m")
    assert session_conf(hive)["spark.driver.extraJavaOptions"].split() == [
        "-XX:+UseParallelGC",
        *compiler,
        "-Dderby.system.home=/m",
    ]
    own = lakemerge.SparkSettings(conf={"spark.driver.extraJavaOptions": "-Xss4m -XX:+UseG1GC"})
    assert session_conf(own)["spark.driver.extraJavaOptions"].split() == [*compiler, "-Xss4m", "-XX:+UseG1GC"], (
        "the user's collector wins"
    )
    other = lakemerge.SparkSettings(conf={"spark.driver.extraJavaOptions": "-Xss4m"})
    assert session_conf(other)["spark.driver.extraJavaOptions"].split() == ["-XX:+UseParallelGC", *compiler, "-Xss4m"]
    cluster = session_conf(lakemerge.SparkSettings(master="spark://h:7077"))
    assert "spark.driver.extraJavaOptions" not in cluster, "a cluster's JVMs are the cluster's"
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = {str(bean.getName()) for bean in beans}
    assert names == {"PS Scavenge", "PS MarkSweep"}, f"the suite's session runs {names}"


@pytest.mark.internals
def test_local_sessions_compile_spark_s_planner_with_c2_later(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    options = session_conf(lakemerge.SparkSettings())["spark.driver.extraJavaOptions"].split()
    assert options == ["-XX:+UseParallelGC", *LOCAL_COMPILER]
    unrelated = "-Dapp.storage=Tiered -XX:+PrintTieredEvents -Xlog:gc:file=/logs/Tier1.log"
    kept = session_conf(lakemerge.SparkSettings(conf={"spark.driver.extraJavaOptions": unrelated}))
    assert kept["spark.driver.extraJavaOptions"].split() == ["-XX:+UseParallelGC", *LOCAL_COMPILER, *unrelated.split()]
    tiers = session_conf(lakemerge.SparkSettings(catalog="hive", metastore_dir="/x/Tiers"))
    assert set(LOCAL_COMPILER) <= set(tiers["spark.driver.extraJavaOptions"].split()), "a folder's name is no option"


@pytest.mark.internals
@pytest.mark.parametrize(
    "own",
    [
        "-XX:Tier4InvocationThreshold=9000",
        "-XX:TieredStopAtLevel=1",
        "-XX:-TieredCompilation",
        "-XX:CompileThresholdScaling=2",
        "-XX:CompilationMode=high-only",
        "-Xint",
        "-Xcomp",
    ],
)
def test_the_user_s_compiler_options_win(own: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    chosen = session_conf(lakemerge.SparkSettings(conf={"spark.driver.extraJavaOptions": own}))
    assert chosen["spark.driver.extraJavaOptions"].split() == ["-XX:+UseParallelGC", own]
    # Options the JVM reads before the extra ones would lose to ours: they are looked at too.
    default = lakemerge.SparkSettings(conf={"spark.driver.defaultJavaOptions": f"{own} -XX:+UseG1GC"})
    assert "spark.driver.extraJavaOptions" not in session_conf(default)
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", f"-XX:+UseSerialGC {own}")
    assert "spark.driver.extraJavaOptions" not in session_conf(lakemerge.SparkSettings())


def test_hive_sessions_keep_derby_s_folder_beside_the_user_s_options(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    hive = lakemerge.SparkSettings(catalog="hive", metastore_dir="/m", conf={"spark.driver.extraJavaOptions": "-Xss4m"})
    assert session_conf(hive)["spark.driver.extraJavaOptions"].split() == [
        "-XX:+UseParallelGC",
        *LOCAL_COMPILER,
        "-Dderby.system.home=/m",
        "-Xss4m",
    ]
    spaced = session_conf(lakemerge.SparkSettings(catalog="hive", metastore_dir="/a b/m"))
    assert shlex.split(spaced["spark.driver.extraJavaOptions"])[-1] == "-Dderby.system.home=/a b/m"


@pytest.mark.internals
def test_the_suite_s_session_runs_with_the_compiler_thresholds(spark: Any) -> None:
    # The values in force (a later option or _JAVA_OPTIONS would override what was passed), asked of
    # HotSpot through its public interface's method (the bean's own class is not exported).
    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
    diagnostic = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(diagnostic)
    parameters = gateway.new_array(jvm.java.lang.Class, 1)
    parameters[0] = jvm.java.lang.Class.forName("java.lang.String")
    get_option = diagnostic.getMethod("getVMOption", parameters)
    for option in LOCAL_COMPILER:
        name, value = option.removeprefix("-XX:").split("=")
        arguments = gateway.new_array(jvm.java.lang.Object, 1)
        arguments[0] = name
        found = get_option.invoke(bean, arguments)
        assert str(found.getValue()) == value, f"{name} is {found.getValue()}"


@pytest.mark.internals
def test_sessions_do_not_record_the_python_call_site_of_every_column_expression(spark: Any) -> None:
    from pyspark.errors.utils import is_debugging_enabled

    for master in ("local[2]", "spark://h:7077"):
        assert session_conf(lakemerge.SparkSettings(master=master))[DEBUGGING] == "false"
    own = lakemerge.SparkSettings(conf={DEBUGGING: "true"})
    assert session_conf(own)[DEBUGGING] == "true", "the user's choice wins"
    assert spark.conf.get(DEBUGGING) == "false"
    assert not is_debugging_enabled(), "PySpark still walks the stack for every column expression"


@pytest.mark.internals
@pytest.mark.parametrize(
    ("master", "partitions"), [("local", "1"), ("local[*]", "1"), ("local[8]", "1"), ("spark://h:7077", None)]
)
def test_local_sessions_rebuild_delta_file_lists_in_one_partition(master: str, partitions: str | None) -> None:
    conf = session_conf(lakemerge.SparkSettings(master=master))
    assert conf.get("spark.databricks.delta.snapshotPartitions") == partitions


def test_nothing_is_written_to_the_working_directory(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's in-memory catalog makes ./spark-warehouse the first time a statement names a table
    (a batch whose every change is late commits its record by one): local sessions keep it under
    the temp directory."""
    import os

    import lakemerge
    from lakemerge.spark.session import session_conf
    from tests.helpers import write_lines

    conf = session_conf(lakemerge.SparkSettings(master="local[1]"))
    assert conf["spark.sql.warehouse.dir"].startswith(tempfile.gettempdir())
    assert "spark.sql.warehouse.dir" not in session_conf(lakemerge.SparkSettings(master="spark://h:7077"))
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    t = lakemerge.TableConfig(
        name="t",
        path=str(tmp_path / "t"),
        key=("id",),
        sequence=("seq",),
        feed=lakemerge.FeedConfig(location=(str(tmp_path / "in"),), format="csv", header=True),
    )
    write_lines(tmp_path / "in" / "a.csv", ["id,seq", "1,5"])
    lakemerge.apply_table(t, spark=spark)
    write_lines(tmp_path / "in" / "b.csv", ["id,seq", "1,4"])  # late: a commit of its record only
    assert lakemerge.apply_table(t, spark=spark).metrics.late == 1
    assert os.listdir(work) == []
