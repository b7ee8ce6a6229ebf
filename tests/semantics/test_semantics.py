"""docs/semantics.md §1, §2 and §8, one rule per test, read back with delta-rs."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import pytest

import lakemerge
from tests.helpers import read_table, table_columns, table_version, write_lines

SCHEMA = "id INT, part STRING, seq BIGINT, op STRING, v STRING"
HEADER = "id,part,seq,op,v"


def cfg(tmp_path: Path, **overrides: object) -> lakemerge.TableConfig:
    feed: dict[str, object] = {
        "location": (str(tmp_path / "in"),),
        "format": "csv",
        "header": True,
        "schema": SCHEMA,
        "op_column": "op",
    }
    feed.update(overrides.pop("feed", {}))  # type: ignore[call-overload]
    table: dict[str, object] = {"name": "t", "path": str(tmp_path / "table"), "key": ("id",), "sequence": ("seq",)}
    table.update(overrides)
    return lakemerge.TableConfig(feed=lakemerge.FeedConfig(**feed), **table)  # type: ignore[arg-type]


def batch(
    spark: object, table: lakemerge.TableConfig, folder: Path, files: dict[str, list[str]], header: str = HEADER
) -> lakemerge.BatchResult:
    for name, rows in files.items():
        write_lines(folder / name, [header, *rows] if header else rows)
    return lakemerge.apply_table(table, inputs=[str(folder)], spark=spark)


def rows(table: lakemerge.TableConfig, columns: tuple[str, ...] = ("id", "seq", "v")) -> list[dict[str, object]]:
    return read_table(table.path, list(columns))


def test_latest_sequence_wins_and_older_changes_are_late(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path)
    batch(spark, t, tmp_path / "1", {"a.csv": ["1,p,5,I,five", "2,p,5,I,five"]})
    r = batch(spark, t, tmp_path / "2", {"a.csv": ["1,p,4,U,four", "2,p,6,U,six", "2,p,3,U,three"]})
    assert (r.metrics.late, r.metrics.updated, r.metrics.superseded) == (1, 1, 1)
    assert rows(t) == [{"id": 1, "seq": 5, "v": "five"}, {"id": 2, "seq": 6, "v": "six"}]


def test_incoming_change_wins_an_exact_tie_with_the_stored_row(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path)
    batch(spark, t, tmp_path / "1", {"a.csv": ["1,p,5,I,old", "2,p,5,I,old"]})
    r = batch(spark, t, tmp_path / "2", {"a.csv": ["1,p,5,U,new", "2,p,5,D,"]})
    assert (r.metrics.updated, r.metrics.deleted, r.metrics.late) == (1, 1, 0)
    assert rows(t) == [{"id": 1, "seq": 5, "v": "new"}]


def test_ties_within_a_batch_go_to_the_later_file_then_the_later_row(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path)
    r = batch(
        spark,
        t,
        tmp_path / "1",
        {
            "b.csv": ["1,p,7,U,b-first", "1,p,7,U,b-second", "2,p,7,U,b"],
            "a.csv": ["1,p,7,U,a", "2,p,7,U,a", "2,p,9,U,a-newer"],
        },
    )
    assert r.metrics.superseded == 4 and r.metrics.changes == 2
    assert rows(t) == [{"id": 1, "seq": 7, "v": "b-second"}, {"id": 2, "seq": 9, "v": "a-newer"}]


def test_file_order_holds_when_small_files_are_packed_and_big_files_split(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path)
    files = {f"f_{i:02d}.csv": [f"1,p,1,U,file-{i}"] for i in range(20)}
    files["g_big.csv"] = [f"2,p,1,U,row-{i:05d}-{'x' * 60}" for i in range(4000)]
    conf = spark.conf  # type: ignore[attr-defined]
    conf.set("spark.sql.files.maxPartitionBytes", "32768")
    conf.set("spark.sql.files.openCostInBytes", "1")
    try:
        r = batch(spark, t, tmp_path / "1", files)
    finally:
        conf.unset("spark.sql.files.maxPartitionBytes")
        conf.unset("spark.sql.files.openCostInBytes")
    assert r.metrics.rows_read == 4020 and r.metrics.changes == 2
    got = {row["id"]: row["v"] for row in rows(t)}
    assert got[1] == "file-19"
    assert str(got[2]).startswith("row-03999-")


def test_sequence_of_several_columns_compares_left_to_right(spark: object, tmp_path: Path) -> None:
    schema = "id INT, day DATE, n INT, op STRING, v STRING"
    t = cfg(tmp_path, sequence=("day", "n"), feed={"schema": schema})
    header = "id,day,n,op,v"
    batch(spark, t, tmp_path / "1", {"a.csv": ["1,2024-01-02,1,I,x", "2,2024-01-02,5,I,x"]}, header)
    r = batch(
        spark,
        t,
        tmp_path / "2",
        {
            "a.csv": [
                "1,2024-01-01,9,U,older-day",
                "2,2024-01-02,6,U,same-day-later",
                "1,2024-01-02,0,U,same-day-earlier",
            ]
        },
        header,
    )
    assert r.metrics.late == 1 and r.metrics.updated == 1 and r.metrics.superseded == 1
    assert read_table(t.path, ["id", "n", "v"]) == [
        {"id": 1, "n": 1, "v": "x"},
        {"id": 2, "n": 6, "v": "same-day-later"},
    ]


def test_delete_then_reinsert_within_and_across_batches(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path)
    r = batch(spark, t, tmp_path / "1", {"a.csv": ["1,p,1,I,a", "1,p,2,D,", "1,p,3,I,again", "2,p,1,I,b"]})
    assert r.metrics.inserted == 2
    r = batch(spark, t, tmp_path / "2", {"a.csv": ["2,p,2,D,"]})
    assert r.metrics.deleted == 1
    r = batch(spark, t, tmp_path / "3", {"a.csv": ["2,p,3,I,back", "3,p,1,D,"]})
    assert (r.metrics.inserted, r.metrics.deletes_absent) == (1, 1)
    assert rows(t) == [{"id": 1, "seq": 3, "v": "again"}, {"id": 2, "seq": 3, "v": "back"}]


def test_op_codes_any_case_when_configured(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, feed={"delete_codes": ("d", "del"), "upsert_codes": ("i", "u"), "op_codes_ignore_case": True})
    batch(spark, t, tmp_path / "1", {"a.csv": ["1,p,1,I,a", "2,p,1,u,b", "3,p,1,U,c"]})
    r = batch(spark, t, tmp_path / "2", {"a.csv": ["1,p,2,D,", "2,p,2,DEL,"]})
    assert r.metrics.deleted == 2
    assert rows(t) == [{"id": 3, "seq": 1, "v": "c"}]


def test_op_codes_are_case_sensitive_by_default(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, feed={"upsert_codes": ("I", "U")})
    with pytest.raises(lakemerge.InputError, match="unknown op code 'd'"):
        batch(spark, t, tmp_path / "1", {"a.csv": ["1,p,1,I,a", "1,p,2,d,"]})


def test_composite_key_and_partition_move(spark: object, tmp_path: Path) -> None:
    schema = "region STRING, id INT, part STRING, seq BIGINT, op STRING, v STRING"
    header = "region,id,part,seq,op,v"
    t = cfg(tmp_path, key=("region", "id"), partition_by=("part",), feed={"schema": schema})
    batch(spark, t, tmp_path / "1", {"a.csv": ["east,1,p1,1,I,a", "west,1,p1,1,I,b", "east,2,p2,1,I,c"]}, header)
    r = batch(spark, t, tmp_path / "2", {"a.csv": ["east,1,p2,2,U,moved", "east,2,p1,2,U,moved-too"]}, header)
    assert r.metrics.updated == 2
    assert read_table(t.path, ["region", "id", "part", "v"]) == [
        {"region": "east", "id": 1, "part": "p2", "v": "moved"},
        {"region": "east", "id": 2, "part": "p1", "v": "moved-too"},
        {"region": "west", "id": 1, "part": "p1", "v": "b"},
    ]
    dt = deltalake.DeltaTable(t.path)
    assert dt.metadata().partition_columns == ["part"]
    # Each partition directory holds exactly its own rows: no stale copy left behind.
    by_partition = {p: len(dt.to_pyarrow_table(filters=[("part", "=", p)])) for p in ("p1", "p2")}
    assert by_partition == {"p1": 2, "p2": 1}


def test_each_batch_is_one_commit_carrying_its_metrics_and_files(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path)
    first = batch(spark, t, tmp_path / "1", {"a.csv": ["1,p,1,I,a"], "b.csv": ["2,p,1,I,b"]})
    second = batch(spark, t, tmp_path / "2", {"a.csv": ["1,p,2,U,a2", "2,p,0,U,late", "3,p,1,D,"]})
    third = batch(spark, t, tmp_path / "3", {"a.csv": ["1,p,0,U,late-only"]})
    assert (first.version, second.version, third.version) == (0, 1, 2)
    history = {h["version"]: h for h in deltalake.DeltaTable(t.path).history()}
    assert set(history) == {0, 1, 2}
    for result in (first, second, third):
        record = json.loads(history[result.version]["userMetadata"])
        assert record["batch_id"] == result.batch_id
        assert record["metrics"] == result.metrics.__dict__
        assert [f["path"] for f in record["files"]] == [f.path for f in result.files]
    assert json.loads(history[1]["userMetadata"])["metrics"]["late"] == 1
    # A batch with nothing to write still commits its record (and changes no data).
    assert third.metrics.late == 1 and rows(t) == [{"id": 1, "seq": 2, "v": "a2"}, {"id": 2, "seq": 1, "v": "b"}]


@pytest.mark.parametrize("write_mode", ["copy_on_write", "log"])
def test_feed_columns_added_and_missing(spark: object, tmp_path: Path, write_mode: str) -> None:
    t = cfg(tmp_path, write_mode=write_mode)
    batch(spark, t, tmp_path / "1", {"a.csv": ["1,p,1,I,a"]})
    t2 = cfg(tmp_path, write_mode=write_mode, feed={"schema": "id INT, seq BIGINT, op STRING, extra STRING"})
    batch(spark, t2, tmp_path / "2", {"a.csv": ["1,2,U,x1", "2,1,I,x2"]}, header="id,seq,op,extra")
    expected = [
        {"id": 1, "part": "p", "v": "a", "extra": "x1"},  # missing columns keep their stored values
        {"id": 2, "part": None, "v": None, "extra": "x2"},  # and are null on insert
    ]
    if write_mode == "log":  # the log's rows carry them: the view, then the table after compaction
        view = lakemerge.read_merged(spark, t2)
        assert view is not None
        got = [r.asDict() for r in view.select("id", "part", "v", "extra").orderBy("id").collect()]
        assert got == expected
        lakemerge.compact(lakemerge.PipelineConfig(tables={"t": t2}), spark=spark)
    assert table_columns(t.path) == ["id", "part", "seq", "v", "extra"]
    assert read_table(t.path, ["id", "part", "v", "extra"]) == expected


def test_narrower_feed_types_widen_to_the_table(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, feed={"schema": "id INT, part STRING, seq BIGINT, op STRING, v DOUBLE"})
    batch(spark, t, tmp_path / "1", {"a.csv": ["1,p,1,I,1.5"]})
    t2 = cfg(tmp_path, feed={"schema": "id INT, part STRING, seq INT, op STRING, v FLOAT"})
    r = batch(spark, t2, tmp_path / "2", {"a.csv": ["1,p,2,U,2.5"]})
    assert r.metrics.updated == 1
    assert read_table(t.path, ["id", "seq", "v"]) == [{"id": 1, "seq": 2, "v": 2.5}]


def test_json_lines_and_parquet_feeds(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, feed={"format": "json", "schema": None})
    write_lines(
        tmp_path / "j" / "a.json",
        [
            '{"id": 1, "seq": 1, "op": "I", "v": "a", "attrs": {"c": "red"}}',
            '{"id": 2, "seq": 1, "op": "I", "v": "b", "attrs": {"c": "blue"}}',
            '{"id": 1, "seq": 2, "op": "U", "v": "a2", "attrs": {"c": "green"}}',
        ],
    )
    r = lakemerge.apply_table(t, inputs=[str(tmp_path / "j")], spark=spark)
    assert (r.metrics.inserted, r.metrics.superseded) == (2, 1)
    got = read_table(t.path, ["id", "v", "attrs"])
    assert got == [{"id": 1, "v": "a2", "attrs": {"c": "green"}}, {"id": 2, "v": "b", "attrs": {"c": "blue"}}]

    pq = tmp_path / "pq"
    spark.createDataFrame(  # type: ignore[attr-defined]
        [(2, 5, "D", None), (3, 5, "U", "c"), (3, 5, "U", "c-later-row")], "id long, seq long, op string, v string"
    ).coalesce(1).write.parquet(str(pq))
    tp = cfg(tmp_path, feed={"format": "parquet", "schema": None})
    r = lakemerge.apply_table(tp, inputs=[str(pq)], spark=spark)
    assert (r.metrics.deleted, r.metrics.inserted) == (1, 1)
    assert read_table(t.path, ["id", "v"]) == [{"id": 1, "v": "a2"}, {"id": 3, "v": "c-later-row"}]
    assert table_version(t.path) == 1


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_headerless_delimited_files_with_a_ddl_schema(spark: object, tmp_path: Path, delimiter: str) -> None:
    t = cfg(tmp_path, feed={"header": False, "delimiter": delimiter})
    lines = [delimiter.join(r) for r in (["1", "p", "1", "I", "with,comma"], ["2", "p", "1", "I", "b"])]
    r = batch(spark, t, tmp_path / "1", {"a.txt": lines}, header="")
    assert r.metrics.inserted == 2
    assert {row["id"]: row["v"] for row in rows(t)} == {1: "with,comma", 2: "b"}


def test_same_input_same_table(spark: object, tmp_path: Path) -> None:
    files = {f"f{i}.csv": [f"{k},p,{(k * i) % 3},U,v{i}-{k}" for k in range(12)] for i in range(4)}
    results = []
    for name in ("x", "y"):
        t = cfg(tmp_path / name)
        batch(spark, t, tmp_path / name / "in", files)
        results.append(rows(t))
    assert results[0] == results[1]
