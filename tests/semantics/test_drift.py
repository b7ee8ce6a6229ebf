"""Schema drift (docs/semantics.md §7) and ordering without a sequence field (§11)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import lakemerge
from tests.helpers import read_table, table_version, write_lines


def cfg(tmp_path: Path, schema: str | None, **table: object) -> lakemerge.TableConfig:
    feed = {"location": (str(tmp_path / "in"),), "format": "csv", "header": True, "schema": schema}
    feed.update(table.pop("feed", {}))  # type: ignore[call-overload]
    return lakemerge.TableConfig(
        name="t",
        path=str(tmp_path / "table"),
        key=("id",),
        sequence=table.pop("sequence", ("seq",)),  # type: ignore[arg-type]
        feed=lakemerge.FeedConfig(**feed),
        **table,
    )  # type: ignore[arg-type]


def apply(spark: object, t: lakemerge.TableConfig, folder: Path, lines: list[str]) -> lakemerge.BatchResult:
    write_lines(folder / "f.csv", lines)
    return lakemerge.apply_table(t, inputs=[str(folder)], spark=spark)


def test_column_order_and_case_differences(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, "id INT, seq BIGINT, v STRING")
    apply(spark, t, tmp_path / "1", ["id,seq,v", "1,1,a"])
    t3 = lakemerge.TableConfig(
        name="t",
        path=t.path,
        key=("ID",),
        sequence=("SEQ",),
        feed=lakemerge.FeedConfig(
            location=(str(tmp_path / "2"),), format="csv", header=True, schema="V STRING, SEQ BIGINT, ID INT"
        ),
    )
    r = apply(spark, t3, tmp_path / "2", ["V,SEQ,ID", "b,2,1", "c,1,2"])
    assert (r.metrics.updated, r.metrics.inserted) == (1, 1)
    assert read_table(t.path) == [{"id": 1, "seq": 2, "v": "b"}, {"id": 2, "seq": 1, "v": "c"}]


def test_wider_feed_type_needs_type_widening_on_the_table(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, "id INT, seq BIGINT, n INT")
    apply(spark, t, tmp_path / "1", ["id,seq,n", "1,1,5"])
    wide = cfg(tmp_path, "id INT, seq BIGINT, n BIGINT")
    with pytest.raises(
        lakemerge.SchemaError, match=r"'n' is BIGINT in the feed but INT in the table.*enableTypeWidening"
    ):
        apply(spark, wide, tmp_path / "2", ["id,seq,n", "1,2,5000000000"])
    assert table_version(t.path) == 0
    spark.sql(f"ALTER TABLE delta.`{t.path}` SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")  # type: ignore[attr-defined]
    r = lakemerge.apply_table(wide, inputs=[str(tmp_path / "2")], spark=spark)
    assert r.metrics.updated == 1
    got = spark.read.format("delta").load(t.path)  # type: ignore[attr-defined]
    assert dict(got.dtypes)["n"] == "bigint" and got.collect()[0]["n"] == 5000000000


def test_date_to_timestamp_only_when_configured(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, "id INT, seq BIGINT, at TIMESTAMP")
    apply(spark, t, tmp_path / "1", ["id,seq,at", "1,1,2024-01-01 10:00:00"])
    dated = cfg(tmp_path, "id INT, seq BIGINT, at DATE")
    with pytest.raises(lakemerge.SchemaError, match="'at' is DATE in the feed but TIMESTAMP"):
        apply(spark, dated, tmp_path / "2", ["id,seq,at", "1,2,2024-02-01"])
    widened = cfg(tmp_path, "id INT, seq BIGINT, at DATE", widen_date_to_timestamp=True)
    assert lakemerge.apply_table(widened, inputs=[str(tmp_path / "2")], spark=spark).metrics.updated == 1


def test_narrowing_or_a_string_where_a_number_was_changes_nothing(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, "id INT, seq BIGINT, n BIGINT")
    apply(spark, t, tmp_path / "1", ["id,seq,n", "1,1,5"])
    for i, ddl in enumerate(["id INT, seq BIGINT, n STRING", "id INT, seq BIGINT, n DOUBLE"]):
        with pytest.raises(
            lakemerge.SchemaError, match=r"column 'n' is (STRING|DOUBLE) in the feed but BIGINT"
        ) as info:
            apply(spark, cfg(tmp_path, ddl), tmp_path / f"x{i}", ["id,seq,n", "1,2,7"])
        assert str(tmp_path / "in") in str(info.value)
    assert table_version(t.path) == 0 and read_table(t.path)[0]["n"] == 5


def test_ordering_by_modification_time_without_a_sequence(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, "id INT, v STRING", sequence=(), feed={"file_order": "mtime"})
    old = write_lines(tmp_path / "1" / "b.csv", ["id,v", "1,older"])
    new = write_lines(tmp_path / "1" / "a.csv", ["id,v", "1,newer", "2,x"])
    os.utime(old, (1_700_000_000, 1_700_000_000))
    os.utime(new, (1_700_000_100, 1_700_000_100))
    lakemerge.apply_table(t, inputs=[str(tmp_path / "1")], spark=spark)
    assert {r["id"]: r["v"] for r in read_table(t.path)} == {1: "newer", 2: "x"}
    # A file modified before what is stored arrives late and loses; the stored sequence persists.
    late = write_lines(tmp_path / "2" / "c.csv", ["id,v", "1,late", "3,y"])
    os.utime(late, (1_699_999_000, 1_699_999_000))
    r = lakemerge.apply_table(t, inputs=[str(tmp_path / "2")], spark=spark)
    assert (r.metrics.late, r.metrics.inserted) == (1, 1)
    assert {r["id"]: r["_lm_sequence"] for r in read_table(t.path)}[1] == 1_700_000_100_000


def test_ordering_by_name_makes_later_batches_newer(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, "id INT, v STRING", sequence=())
    apply(spark, t, tmp_path / "1", ["id,v", "1,first", "1,second-row"])
    r = apply(spark, t, tmp_path / "2", ["id,v", "1,next-batch"])
    assert r.metrics.updated == 1
    assert [(x["v"], x["_lm_sequence"]) for x in read_table(t.path)] == [("next-batch", 2)]


def test_scd2_tables_take_new_columns(spark: object, tmp_path: Path) -> None:
    """docs/semantics.md §7: a new feed column is added to an SCD type 2 table too, null in the
    versions stored before it; tracked like every column when ``track_columns`` is not set."""
    t = cfg(tmp_path, None, history="scd2", feed={"types": {"id": "int", "seq": "bigint"}})
    apply(spark, t, tmp_path / "1", ["id,seq,name", "1,1,ann", "2,1,bob"])
    r = apply(spark, t, tmp_path / "2", ["id,seq,name,city", "1,2,ann,paris", "3,1,cy,rome"])
    assert (r.metrics.updated, r.metrics.inserted) == (1, 1)
    columns = ["id", "name", "city", "__start_at", "__end_at"]
    assert read_table(t.path, columns) == [
        {"id": 1, "name": "ann", "city": "paris", "__start_at": 2, "__end_at": None},
        {"id": 1, "name": "ann", "city": None, "__start_at": 1, "__end_at": 2},
        {"id": 2, "name": "bob", "city": None, "__start_at": 1, "__end_at": None},
        {"id": 3, "name": "cy", "city": "rome", "__start_at": 1, "__end_at": None},
    ]
    untracked = cfg(tmp_path / "u", None, history="scd2", track_columns=("name",), feed={"types": {"id": "int"}})
    apply(spark, untracked, tmp_path / "u1", ["id,seq,name", "1,1,ann"])
    apply(spark, untracked, tmp_path / "u2", ["id,seq,name,city", "1,2,ann,paris"])
    assert read_table(untracked.path, ["id", "seq", "city", "__start_at"]) == [
        {"id": 1, "seq": "2", "city": "paris", "__start_at": "1"}
    ]
