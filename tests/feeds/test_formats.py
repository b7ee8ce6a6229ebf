"""Formats and CDC envelopes, on files written by the real tools' conventions."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from tests.helpers import jobs_of, read_table, write_lines


def table(
    tmp_path: Path, key: tuple[str, ...] = ("id",), sequence: tuple[str, ...] = ("seq",), **feed: object
) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name="t",
        path=str(tmp_path / "table"),
        key=key,
        sequence=sequence,
        feed=lakemerge.FeedConfig(location=(str(tmp_path / "in"),), **feed),
    )  # type: ignore[arg-type]


def test_hive_text_with_null_markers(spark: object, tmp_path: Path) -> None:
    write_lines(tmp_path / "in" / "000000_0", ["1\x011\x01\\N\x01a", "2\x011\x01x\x01\\N"])
    t = table(
        tmp_path,
        format="text",
        delimiter_regex="\x01",
        null_value="\\N",
        columns=("id", "seq", "u", "v"),
        types={"id": "int", "seq": "bigint"},
    )
    lakemerge.apply_table(t, spark=spark)
    assert read_table(t.path) == [{"id": 1, "seq": 1, "u": None, "v": "a"}, {"id": 2, "seq": 1, "u": "x", "v": None}]


def test_csv_quoting_newlines_compression_encoding_and_bom(spark: object, tmp_path: Path) -> None:
    header = "id,seq,v\n"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text(
        "\ufeff" + header + '1,1,"with, comma"\n2,1,"say ""hi"""\n', encoding="utf-8"
    )
    (tmp_path / "in" / "b.csv.gz").write_bytes(gzip.compress((header + '3,1,"two\nlines"\n').encode()))
    (tmp_path / "in" / "c.csv.bz2").write_bytes(bz2.compress((header + "4,1,bz\n").encode()))
    t = table(tmp_path, format="csv", header=True, multiline=True, types={"id": "int", "seq": "bigint"})
    lakemerge.apply_table(t, spark=spark)
    assert {r["id"]: r["v"] for r in read_table(t.path)} == {1: "with, comma", 2: 'say "hi"', 3: "two\nlines", 4: "bz"}

    latin = tmp_path / "latin"
    latin.mkdir()
    (latin / "l.csv").write_bytes((header + "5,1,café\n").encode("latin-1"))
    t2 = table(tmp_path, format="csv", header=True, encoding="ISO-8859-1", types={"id": "int", "seq": "bigint"})
    lakemerge.apply_table(t2, inputs=[str(latin)], spark=spark)
    assert {r["id"]: r["v"] for r in read_table(t.path)}[5] == "café"


def test_a_configured_type_spark_does_not_know_is_refused_every_time(spark: object, tmp_path: Path) -> None:
    write_lines(tmp_path / "in" / "a.csv", ["id,seq,v", "1,1,x"])
    for _ in range(2):  # (type names Spark parsed are remembered in the process; a bad one never is)
        t = table(tmp_path, format="csv", header=True, types={"id": "int", "seq": "bigint", "v": "integr"})
        with pytest.raises(lakemerge.ConfigError, match="'integr' is not a Spark SQL type") as raised:
            lakemerge.apply_table(t, spark=spark)
        assert raised.value.key == "feed.types.v"
    assert not (tmp_path / "table").exists()
    t = table(tmp_path, format="csv", header=True, types={"id": "int", "seq": "bigint"})
    lakemerge.apply_table(t, spark=spark)
    assert read_table(t.path) == [{"id": 1, "seq": 1, "v": "x"}]


def test_orc_and_avro(spark: object, tmp_path: Path) -> None:
    for fmt in ("orc", "avro"):
        folder = tmp_path / fmt
        spark.createDataFrame(  # type: ignore[attr-defined]
            [(1, 1, "a"), (1, 2, "b"), (2, 1, "c")], "id int, seq long, v string"
        ).coalesce(1).write.format(fmt).save(str(folder / "in"))
        t = lakemerge.TableConfig(
            name=fmt,
            path=str(folder / "table"),
            key=("id",),
            sequence=("seq",),
            feed=lakemerge.FeedConfig(location=(str(folder / "in"),), format=fmt),
        )
        r = lakemerge.apply_table(t, spark=spark)
        assert (r.metrics.inserted, r.metrics.superseded) == (2, 1)
        assert read_table(t.path) == [{"id": 1, "seq": 2, "v": "b"}, {"id": 2, "seq": 1, "v": "c"}]


def debezium(
    op: str, before: dict[str, object] | None, after: dict[str, object] | None, lsn: int, schema: bool = False
) -> str:
    event = {
        "before": before,
        "after": after,
        "op": op,
        "ts_ms": 1_700_000_000_000 + lsn,
        "source": {"connector": "postgresql", "db": "shop", "table": "customers", "lsn": lsn},
    }
    if schema:
        return json.dumps(
            {"schema": {"type": "struct", "optional": False, "name": "shop.customers.Envelope"}, "payload": event}
        )
    return json.dumps(event)


def test_debezium_events_with_and_without_schema(spark: object, tmp_path: Path) -> None:
    write_lines(
        tmp_path / "in" / "customers-0.json",
        [
            debezium("r", None, {"id": 1, "name": "ann"}, 10),
            debezium("c", None, {"id": 2, "name": "bob"}, 11, schema=True),
            debezium("u", {"id": 1, "name": "ann"}, {"id": 1, "name": "anne"}, 12, schema=True),
            debezium("d", {"id": 2, "name": "bob"}, None, 13),
            "null",  # the tombstone Kafka keeps after a delete
            debezium("c", None, {"id": 3, "name": "cy"}, 14),
        ],
    )
    t = table(tmp_path, sequence=("__source_lsn",), format="debezium")
    r = lakemerge.apply_table(t, spark=spark)
    assert (r.metrics.rows_read, r.metrics.ignored, r.metrics.inserted, r.metrics.deletes_absent) == (6, 1, 2, 1)
    assert read_table(t.path) == [
        {"id": 1, "name": "anne", "__source_lsn": 12},
        {"id": 3, "name": "cy", "__source_lsn": 14},
    ]
    write_lines(
        tmp_path / "in2" / "customers-1.json",
        [debezium("d", {"id": 3, "name": "cy"}, None, 20), debezium("u", {"id": 1}, {"id": 1, "name": "old"}, 5)],
    )
    r = lakemerge.apply_table(t, inputs=[str(tmp_path / "in2")], spark=spark)
    assert (r.metrics.deleted, r.metrics.late) == (1, 1)
    assert read_table(t.path) == [{"id": 1, "name": "anne", "__source_lsn": 12}]


def test_dms_csv_full_load_then_changes(spark: object, tmp_path: Path) -> None:
    write_lines(tmp_path / "in" / "LOAD00000001.csv", ["1,ann,2024-01-01 00:00:00", "2,bob,2024-01-01 00:00:00"])
    write_lines(
        tmp_path / "in" / "20240102-101010123.csv",
        ['U,1,"ann, jr",2024-01-02 10:00:00', "D,2,bob,2024-01-02 10:00:01", "I,3,cy,2024-01-02 10:00:02"],
    )
    t = table(
        tmp_path,
        sequence=("commit_ts",),
        format="csv",
        envelope="dms",
        schema="id INT, name STRING, commit_ts TIMESTAMP",
    )
    r = lakemerge.apply_table(t, spark=spark)
    assert (r.metrics.inserted, r.metrics.superseded, r.metrics.deletes_absent) == (2, 2, 1)
    assert [(x["id"], x["name"]) for x in read_table(t.path)] == [(1, "ann, jr"), (3, "cy")]


def test_dms_parquet(spark: object, tmp_path: Path) -> None:
    spark.createDataFrame([(1, "a", 1)], "id int, name string, seq long").coalesce(1).write.parquet(  # type: ignore[attr-defined]
        str(tmp_path / "load")
    )
    spark.createDataFrame(
        [("U", 1, "a2", 2), ("I", 2, "b", 2)],
        "Op string, id int, name string, seq long",  # type: ignore[attr-defined]
    ).coalesce(1).write.parquet(str(tmp_path / "cdc"))
    (tmp_path / "in").mkdir()
    for folder, name in (("load", "LOAD00000001.parquet"), ("cdc", "20240102-000000001.parquet")):
        part = next((tmp_path / folder).glob("*.parquet"))
        part.rename(tmp_path / "in" / name)
    t = table(tmp_path, format="parquet", envelope="dms")
    lakemerge.apply_table(t, spark=spark)
    assert [(x["id"], x["name"]) for x in read_table(t.path)] == [(1, "a2"), (2, "b")]


def test_several_feeds_write_one_table_in_one_batch(spark: object, tmp_path: Path) -> None:
    write_lines(tmp_path / "east" / "e1.csv", ["id;seq;v", "1;1;east", "2;1;east"])
    write_lines(tmp_path / "west" / "w1.json", ['{"id": 2, "seq": 1, "v": "west"}', '{"id": 3, "seq": 2, "v": "west"}'])
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        '[tables.customers]\npath = "table"\nkey = "id"\nsequence = "seq"\n'
        '[[tables.customers.feeds]]\nlocation = "east"\nformat = "csv"\nheader = true\ndelimiter = ";"\n'
        'schema = "id INT, seq BIGINT, v STRING"\narchive = "archive/east"\n'
        '[[tables.customers.feeds]]\nlocation = "west"\nformat = "json"\nschema = "id INT, seq BIGINT, v STRING"\n'
    )
    config = lakemerge.load_pipeline(pipeline)
    results = lakemerge.run(config, spark=spark)
    assert [r.version for r in results] == [0] and len(results[0].files) == 2
    # Equal sequences: the later feed in the pipeline wins the tie.
    assert {r["id"]: r["v"] for r in read_table(config.table("customers").path)} == {1: "east", 2: "west", 3: "west"}
    assert [p.name for p in (tmp_path / "archive" / "east").iterdir()] == ["e1.csv"]
    assert (tmp_path / "west" / "w1.json").exists()  # the west feed does not archive


@pytest.mark.internals
def test_a_parquet_feed_has_spark_s_inferred_schema_without_its_inference_job(spark: Any, tmp_path: Path) -> None:
    """Spark infers a Parquet feed's schema from the first file in path order, in a Spark job of its
    own; lakemerge reads that file's footer with Spark's own function instead: the same schema (of
    Spark's writer and of pyarrow's), and no job. Schemas merged across files
    (``spark.sql.parquet.mergeSchema``) are still Spark's to infer."""
    import datetime
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakemerge.feeds import formats

    folder = tmp_path / "in"
    spark.sql(
        "SELECT 1 AS id, 1L AS seq, CAST(2.50 AS DECIMAL(9, 2)) AS price, TIMESTAMP_NTZ'2024-01-01 10:00:00' AS at,"
        " named_struct('a', 1, 'b', array('x')) AS nested"
    ).coalesce(1).write.parquet(str(folder / "spark"))
    (written,) = (folder / "spark").glob("*.parquet")
    first = written.rename(folder / "a.parquet")
    arrow = pa.table(
        {
            "id": pa.array([2], pa.int32()),
            "seq": pa.array([1], pa.int64()),
            "price": pa.array([decimal.Decimal("1.25")], pa.decimal128(9, 2)),
            "at": pa.array([datetime.datetime(2024, 1, 2)], pa.timestamp("us")),
            "extra": pa.array(["only here"]),
        }
    )
    pq.write_table(arrow, folder / "b.parquet")
    paths = [str(p) for p in (folder / "b.parquet", first)]

    def spark_s(names: list[str]) -> Any:
        return spark.read.parquet(*names).schema

    found: list[Any] = []
    for chosen in (paths, paths[:1]):
        assert jobs_of(spark, lambda c=chosen: found.append(formats.parquet_schema(spark, c))) == []
        assert found[-1] == spark_s(chosen)
    reads: list[Any] = []
    assert jobs_of(spark, lambda: reads.append(formats.read_columnar(spark, "parquet", paths))) == []
    (read,) = reads
    assert read.columns == ("id", "seq", "price", "at", "nested")
    assert sorted(r["id"] for r in read.frame.collect()) == [1, 2]
    spark.conf.set("spark.sql.parquet.mergeSchema", "true")
    try:
        assert formats.parquet_schema(spark, paths) is None
        assert "extra" in formats.read_columnar(spark, "parquet", paths).columns
    finally:
        spark.conf.unset("spark.sql.parquet.mergeSchema")
