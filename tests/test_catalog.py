"""Tables registered by name in the Spark catalog, their views, and the settings that choose the
catalog. These run in the shared (in-memory catalog) session; the Hive metastore, the Thrift server
and a standalone cluster are exercised by tests/test_cluster.py (``pytest -m cluster``)."""

from __future__ import annotations

import itertools
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.spark.session import DEBUGGING, LOCAL_COMPILER, session_conf
from tests.helpers import read_table, table_version, write_lines

_names = itertools.count()


def a_table(root: Path, name: str, **extra: Any) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name=name,
        path=str(root / name),
        key=("id",),
        sequence=("seq",),
        feed=lakemerge.FeedConfig(
            location=(str(root / f"{name}_in"),),
            format="csv",
            header=True,
            schema="id INT, seq BIGINT, op STRING, name STRING",
            op_column="op",
            upsert_codes=("U",),
            delete_codes=("D",),
        ),
        **extra,
    )


def feed(root: Path, name: str, file: str, rows: list[str]) -> None:
    write_lines(root / f"{name}_in" / file, ["id,seq,op,name", *rows])


def unique(stem: str) -> str:
    return f"default.lm_{stem}_{next(_names)}"


def test_each_batch_registers_its_table_and_the_name_follows_new_commits(spark: Any, tmp_path: Path) -> None:
    name = unique("orders")
    table = a_table(tmp_path, "orders", catalog_name=name)
    feed(tmp_path, "orders", "c_1.csv", ["1,1,U,a", "2,1,U,b"])
    lakemerge.apply_table(table, spark=spark)
    assert spark.catalog.tableExists(name)
    feed(tmp_path, "orders", "c_2.csv", ["1,2,U,a2", "2,2,D,"])
    lakemerge.apply_table(table, spark=spark)
    by_name = sorted(tuple(r) for r in spark.sql(f"SELECT id, seq, name FROM {name}").collect())
    by_path = [(r["id"], r["seq"], r["name"]) for r in read_table(table.path, ["id", "seq", "name"])]
    assert by_name == by_path == [(1, 2, "a2")]
    location = spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]["location"]
    assert location.rstrip("/") == f"file:{table.path}"


def test_scd2_tables_get_a_view_of_their_current_rows(spark: Any, tmp_path: Path) -> None:
    name = unique("customers")
    table = a_table(tmp_path, "customers", catalog_name=name, history="scd2")
    feed(tmp_path, "customers", "c_1.csv", ["1,1,U,a", "1,2,U,b", "2,1,U,x", "2,3,D,"])
    lakemerge.apply_table(table, spark=spark)
    assert spark.sql(f"SELECT count(*) FROM {name}").collect()[0][0] == 3, "two versions of 1, one closed of 2"
    current = spark.sql(f"SELECT id, name FROM {name}_current").collect()
    assert [tuple(r) for r in current] == [(1, "b")]
    expected = sorted(tuple(r) for r in lakemerge.read_current(spark, table).select("id", "name").collect())
    assert [tuple(r) for r in current] == expected


def test_log_tables_get_a_merged_view_that_follows_the_log(spark: Any, tmp_path: Path) -> None:
    name = unique("events")
    table = a_table(tmp_path, "events", catalog_name=name, write_mode="log")
    feed(tmp_path, "events", "c_1.csv", ["1,1,U,a", "2,1,U,b"])
    lakemerge.apply_table(table, spark=spark)
    feed(tmp_path, "events", "c_2.csv", ["1,2,U,a2", "2,2,D,", "3,1,U,c"])
    lakemerge.apply_table(table, spark=spark)
    merged = sorted(tuple(r) for r in spark.sql(f"SELECT id, seq, name FROM {name}_merged").collect())
    assert merged == [(1, 2, "a2"), (3, 1, "c")]
    expected = lakemerge.read_merged(spark, table)
    assert expected is not None
    assert merged == sorted(tuple(r) for r in expected.select("id", "seq", "name").collect())


def test_a_name_held_by_another_table_is_refused_after_the_commit_stands(spark: Any, tmp_path: Path) -> None:
    name = unique("taken")
    first = a_table(tmp_path, "first", catalog_name=name)
    second = a_table(tmp_path, "second", catalog_name=name)
    feed(tmp_path, "first", "c_1.csv", ["1,1,U,a"])
    feed(tmp_path, "second", "c_1.csv", ["7,1,U,z"])
    lakemerge.apply_table(first, spark=spark)
    with pytest.raises(lakemerge.TableError) as caught:
        lakemerge.apply_table(second, spark=spark)
    message = str(caught.value)
    assert "version 0 committed" in message and name in message and "lakemerge register" in message
    assert str(tmp_path / "first") in message, "the message names who holds the name"
    assert table_version(second.path) == 0, "the batch stands: the catalog is only an index"
    # The rerun finds nothing pending and says the same until the name is free.
    with pytest.raises(lakemerge.TableError, match="nothing to apply"):
        lakemerge.apply_table(second, spark=spark)
    assert [tuple(r) for r in spark.sql(f"SELECT id FROM {name}").collect()] == [(1,)]


def test_register_names_existing_tables_and_skips_tables_not_made_yet(spark: Any, tmp_path: Path) -> None:
    from tests.test_seed import cli

    made, unmade = f"lm_made_{next(_names)}", f"lm_unmade_{next(_names)}"
    pipeline = tmp_path / "p.toml"
    body = ""
    for table in (made, unmade):
        body += (
            f'[tables.{table}]\npath = "{table}"\nkey = "id"\nsequence = "seq"\n'
            f'[tables.{table}.feed]\nlocation = "{table}_in"\nformat = "csv"\nheader = true\nop_column = "op"\n'
            'upsert_codes = ["U"]\ndelete_codes = ["D"]\nschema = "id INT, seq BIGINT, op STRING, name STRING"\n'
        )
    pipeline.write_text(body)
    feed(tmp_path, made, "c_1.csv", ["1,1,U,a"])
    config = lakemerge.load_pipeline(pipeline)
    lakemerge.apply_table(config.table(made), spark=spark)
    assert not spark.catalog.tableExists(f"default.{made}"), "no catalog_name: batches register nothing"
    code, out = cli("register", str(pipeline), "--json")
    assert code == 0, out
    [entry] = json.loads(out)["tables"]
    assert (entry["table"], entry["name"], entry["created"]) == (made, f"default.{made}", True)
    assert spark.catalog.tableExists(f"default.{made}") and not spark.catalog.tableExists(f"default.{unmade}")
    code, out = cli("register", str(pipeline), "-t", made)
    assert code == 0 and "already registered" in out, out
    with pytest.raises(lakemerge.TableError, match="apply a batch first"):
        from lakemerge.operations.catalog import register

        register(spark, config.table(unmade).model_copy(update={"catalog_name": "default.x"}))


def test_hive_settings_name_tables_and_place_the_metastore_beside_the_pipeline(tmp_path: Path) -> None:
    pipeline = tmp_path / "etc" / "p.toml"
    pipeline.parent.mkdir()
    table = (
        '[tables.{n}]\npath = "{n}"\nkey = "id"\n{extra}'
        '[tables.{n}.feed]\nlocation = "in"\nformat = "parquet"\nop_column = "op"\n'
    )
    pipeline.write_text(
        '[spark]\ncatalog = "hive"\ndatabase = "lake"\n'
        + table.format(n="a", extra="")
        + table.format(n="b", extra='catalog_name = "sales.bee"\n')
    )
    config = lakemerge.load_pipeline(pipeline)
    assert (config.table("a").catalog_name, config.table("b").catalog_name) == ("lake.a", "sales.bee")
    assert config.spark.metastore_dir == str(tmp_path / "etc" / "metastore")
    conf = session_conf(config.spark)
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"].startswith(
        f"jdbc:derby:;databaseName={tmp_path / 'etc' / 'metastore'}/metastore_db"
    )
    assert conf["spark.sql.warehouse.dir"] == str(tmp_path / "etc" / "warehouse")
    assert conf["spark.jars.packages"].startswith("io.delta:delta-spark_4.1_2.13:")

    service = lakemerge.SparkSettings(
        master="spark://h:7077",
        catalog="hive",
        metastore_uri="thrift://ms:9083",
        conf={"spark.sql.shuffle.partitions": 64},
    )
    conf = session_conf(service)
    assert conf["spark.hadoop.hive.metastore.uris"] == "thrift://ms:9083"
    assert "spark.hadoop.javax.jdo.option.ConnectionURL" not in conf
    assert conf["spark.sql.shuffle.partitions"] == "64", "the user's conf wins; local-mode tuning stays local"
    assert "spark.ui.enabled" not in conf
    plain = session_conf(lakemerge.SparkSettings())
    assert "spark.sql.catalogImplementation" not in plain


def test_sessions_keep_the_code_of_a_batchs_queries_compiled(spark: Any) -> None:
    # A batch compiles about 100 classes; Spark's default cache of 100 evicted the previous batch's.
    assert session_conf(lakemerge.SparkSettings())["spark.sql.codegen.cache.maxEntries"] == "1000"
    assert (
        session_conf(lakemerge.SparkSettings(master="spark://h:7077"))["spark.sql.codegen.cache.maxEntries"] == "1000"
    )
    own = lakemerge.SparkSettings(conf={"spark.sql.codegen.cache.maxEntries": 50})
    assert session_conf(own)["spark.sql.codegen.cache.maxEntries"] == "50", "the user's conf wins"
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "1000", "the suite's session starts with it"


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


def test_sessions_do_not_record_the_python_call_site_of_every_column_expression(spark: Any) -> None:
    from pyspark.errors.utils import is_debugging_enabled

    for master in ("local[2]", "spark://h:7077"):
        assert session_conf(lakemerge.SparkSettings(master=master))[DEBUGGING] == "false"
    own = lakemerge.SparkSettings(conf={DEBUGGING: "true"})
    assert session_conf(own)[DEBUGGING] == "true", "the user's choice wins"
    assert spark.conf.get(DEBUGGING) == "false"
    assert not is_debugging_enabled(), "PySpark still walks the stack for every column expression"


@pytest.mark.parametrize(
    ("master", "partitions"), [("local", "1"), ("local[*]", "1"), ("local[8]", "1"), ("spark://h:7077", None)]
)
def test_local_sessions_rebuild_delta_file_lists_in_one_partition(master: str, partitions: str | None) -> None:
    conf = session_conf(lakemerge.SparkSettings(master=master))
    assert conf.get("spark.databricks.delta.snapshotPartitions") == partitions


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"metastore_uri": "thrift://x:9083"}, "need catalog = 'hive'"),
        ({"catalog": "hive", "metastore_uri": "thrift://x:9083", "metastore_dir": "/m"}, "not both"),
        ({"catalog": "hive", "database": "1st"}, "not a database name"),
        ({"catalog": "glue"}, "catalog"),
    ],
)
def test_bad_catalog_settings_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(lakemerge.ConfigError, match=message):
        from lakemerge.config.loading import validate

        validate(lakemerge.SparkSettings, settings, source="p.toml", prefix="spark")


@pytest.mark.parametrize("name", ["a.b.c", "drop table", "x-y", ""])
def test_bad_catalog_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="catalog name"):
        a_table(tmp_path, "t", catalog_name=name)


def test_conf_prints_what_a_cluster_job_needs(tmp_path: Path) -> None:
    from tests.test_seed import cli

    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        '[spark]\nmaster = "spark://head:7077"\ncatalog = "hive"\nmetastore_uri = "thrift://ms:9083"\n'
        '[spark.conf]\n"spark.executor.memory" = "2g"\n'
        '[tables.t]\npath = "hdfs://nn/lake/t"\nkey = "id"\n'
        '[tables.t.feed]\nlocation = "hdfs://nn/landing/t"\nformat = "parquet"\nop_column = "op"\n'
    )
    code, out = cli("conf", str(pipeline))
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "--master spark://head:7077"
    assert "--conf spark.hadoop.hive.metastore.uris=thrift://ms:9083" in lines
    assert "--conf spark.executor.memory=2g" in lines
    code, out = cli("conf", str(pipeline), "--defaults")
    assert code == 0 and "spark.sql.catalogImplementation hive" in out.splitlines(), out
    assert lakemerge.load_pipeline(pipeline).table("t").path == "hdfs://nn/lake/t", "URIs are left as they are"
