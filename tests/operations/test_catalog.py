"""Tables registered by name in the Spark catalog, their views, and the settings that choose the
catalog. These run in the shared (in-memory catalog) session; the Hive metastore, the Thrift server
and a standalone cluster are exercised by tests/cluster/test_cluster.py (``pytest -m cluster``)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.spark.session import session_conf
from lakemerge.spark.versions import installed_pairing
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
    from tests.semantics.test_seed import cli

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
    assert conf["spark.jars.packages"].startswith(f"io.delta:delta-spark_{installed_pairing().spark}_2.13:")

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
    from tests.semantics.test_seed import cli

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
