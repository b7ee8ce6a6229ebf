"""Partial updates, truncate, column selection and the quarantine (docs/semantics.md §3, §4, §9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import lakemerge
import lakemerge.batch.commit
from lakemerge.cli.app import app
from tests.helpers import read_table, table_columns, table_version, write_lines

SCHEMA = "id INT, seq BIGINT, op STRING, a STRING, b STRING"
HEADER = "id,seq,op,a,b"
runner = CliRunner()


def cfg(tmp_path: Path, **table: object) -> lakemerge.TableConfig:
    feed = {
        "location": (str(tmp_path / "in"),),
        "format": "csv",
        "header": True,
        "schema": SCHEMA,
        "op_column": "op",
        "upsert_codes": ("I", "U"),
        "truncate_codes": ("T",),
    }
    feed.update(table.pop("feed", {}))  # type: ignore[call-overload]
    return lakemerge.TableConfig(
        name="t",
        path=str(tmp_path / "table"),
        key=("id",),
        sequence=("seq",),
        feed=lakemerge.FeedConfig(**feed),
        **table,
    )  # type: ignore[arg-type]


def batch(
    spark: object, t: lakemerge.TableConfig, folder: Path, rows: list[str], header: str = HEADER
) -> lakemerge.BatchResult:
    write_lines(folder / "f.csv", [header, *rows])
    return lakemerge.apply_table(t, inputs=[str(folder)], spark=spark)


def rows(t: lakemerge.TableConfig) -> dict[object, tuple[object, ...]]:
    return {r["id"]: (r["a"], r["b"]) for r in read_table(t.path, ["id", "a", "b"])}


def test_partial_updates_fold_in_sequence_order_and_a_delete_resets_them(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, ignore_null_updates=True)
    batch(spark, t, tmp_path / "1", ["1,1,I,a1,b1", "2,1,I,a1,b1", "3,1,I,a1,b1"])
    r = batch(
        spark,
        t,
        tmp_path / "2",
        [
            "1,3,U,,b3",
            "1,2,U,a2,",  # folded in sequence order (not file order): a2, b3
            "2,2,U,a2,",
            "2,3,D,,",
            "2,4,U,,b4",  # the delete resets the fold: the stored a1 is gone too
            "3,2,U,,",  # all null: nothing changes but the sequence
            "4,1,U,,b1",  # insert of a partial row: nulls stay null
        ],
    )
    assert (r.metrics.updated, r.metrics.inserted, r.metrics.superseded) == (3, 1, 3)
    assert rows(t) == {1: ("a2", "b3"), 2: (None, "b4"), 3: ("a1", "b1"), 4: (None, "b1")}


def test_partial_updates_limited_to_listed_columns(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, ignore_null_updates=("a",))
    batch(spark, t, tmp_path / "1", ["1,1,I,a1,b1"])
    batch(spark, t, tmp_path / "2", ["1,2,U,,"])
    assert rows(t) == {1: ("a1", None)}


def test_without_partial_updates_a_null_overwrites(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path)
    batch(spark, t, tmp_path / "1", ["1,1,I,a1,b1"])
    batch(spark, t, tmp_path / "2", ["1,2,U,,b2"])
    assert rows(t) == {1: (None, "b2")}


def test_truncate_removes_every_older_row_in_one_commit(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path)
    batch(spark, t, tmp_path / "1", ["1,1,I,a,a", "2,5,I,b,b", "3,9,I,c,c", "4,6,I,d,d"])
    r = batch(
        spark,
        t,
        tmp_path / "2",
        [
            "5,3,I,e,e",  # older than the truncate: gone too
            ",6,T,,",  # truncate at 6: rows 1 (1) and 2 (5) go; 4 (exactly 6) and 3 (9) stay
            "6,7,I,f,f",  # newer: stays
            "1,8,U,new,new",
        ],
    )
    assert r.version == 1
    assert (r.metrics.truncates, r.metrics.truncated, r.metrics.inserted, r.metrics.superseded) == (1, 2, 2, 1)
    assert rows(t) == {1: ("new", "new"), 3: ("c", "c"), 4: ("d", "d"), 6: ("f", "f")}
    # A truncate that removes nothing still commits its record.
    r = batch(spark, t, tmp_path / "3", [",2,T,,"])
    assert (r.version, r.metrics.truncated) == (2, 0) and table_version(t.path) == 2


def test_truncate_config_needs_an_op_column(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="truncate_codes need an op_column"):
        lakemerge.FeedConfig(location=(str(tmp_path),), truncate_codes=("T",))


def test_keep_and_drop_columns(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, feed={"drop_columns": ("b",)})
    batch(spark, t, tmp_path / "1", ["1,1,I,a1,b1"])
    assert table_columns(t.path) == ["id", "seq", "a"]
    t2 = cfg(tmp_path / "k", feed={"keep_columns": ("id", "seq", "b")})
    batch(spark, t2, tmp_path / "k" / "1", ["1,1,I,a1,b1"])
    assert table_columns(t2.path) == ["id", "seq", "b"]
    with pytest.raises(ValueError, match="cannot be dropped"):
        cfg(tmp_path, feed={"drop_columns": ("seq",)})


def test_bad_rows_within_the_threshold_are_quarantined_and_listed(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, max_bad_rows=2)
    r = batch(spark, t, tmp_path / "1", ["1,1,I,a,a", "2,x,I,b,b", "3,1,Z,c,c", "4,1,I,d,d"])
    assert (r.metrics.rows_bad, r.metrics.inserted, r.metrics.rows_read) == (2, 2, 4)
    assert sorted(rows(t)) == [1, 4]
    listed = lakemerge.quarantine(t, spark=spark)
    assert [(q.row, q.reason) for q in listed] == [
        (3, "cannot convert column 'seq' value 'x' to bigint"),
        (4, "unknown op code 'Z'"),
    ]
    assert listed[0].record == "2,x,I,b,b" and listed[0].file.endswith("1/f.csv") and listed[0].batch_id == r.batch_id
    out = runner.invoke(app, ["quarantine", t.path, "--json"])
    assert out.exit_code == 0, out.output
    assert [q["row"] for q in json.loads(out.output)["rows"]] == [3, 4]

    # Over the threshold: the batch fails and nothing is committed, to the table or the quarantine.
    with pytest.raises(lakemerge.InputError, match="threshold"):
        batch(spark, t, tmp_path / "2", ["5,x,I,,", "6,x,I,,", "7,x,I,,", "8,1,I,h,h"])
    assert table_version(t.path) == 0 and len(lakemerge.quarantine(t, spark=spark)) == 2


def test_bad_fraction_threshold(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, max_bad_fraction=0.5)
    r = batch(spark, t, tmp_path / "1", ["1,1,I,a,a", "2,x,I,b,b"])
    assert r.metrics.rows_bad == 1
    with pytest.raises(lakemerge.InputError):
        batch(spark, t, tmp_path / "2", ["1,2,I,a,a", "2,x,I,b,b", "3,x,I,b,b"])


def test_quarantine_of_an_uncommitted_batch_is_not_listed(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = cfg(tmp_path, max_bad_rows=5)
    batch(spark, t, tmp_path / "1", ["1,1,I,a,a"])

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("crash between the quarantine write and the commit")

    monkeypatch.setattr(lakemerge.batch.commit, "write_changes", crash)
    with pytest.raises(RuntimeError):
        batch(spark, t, tmp_path / "2", ["2,x,I,b,b", "3,1,I,c,c"])
    monkeypatch.undo()
    assert lakemerge.quarantine(t, spark=spark) == []
    r = lakemerge.apply_table(t, inputs=[str(tmp_path / "2")], spark=spark)
    assert r.metrics.rows_bad == 1
    assert [q.batch_id for q in lakemerge.quarantine(t, spark=spark)] == [r.batch_id]
