"""A counted batch of Parquet files reads its records from the files each time instead of caching
them: the same table results, and a file rewritten between those reads commits nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakemerge
import lakemerge.batch.commit
from tests.helpers import planned_batches, query_rows, table_version, write_lines

#: Batches of one file: inserts, then updates, a delete, a late change and a key twice.
BATCHES: list[list[tuple[int, int, str, str | None]]] = [
    [(1, 1, "U", "a1"), (2, 1, "U", "a2"), (3, 1, "U", "a3")],
    [(1, 2, "U", "b1"), (2, 2, "D", None), (3, 0, "U", "old"), (4, 2, "U", "a4"), (4, 3, "U", "b4")],
]


def _config(root: Path, fmt: str, mode: str) -> lakemerge.TableConfig:
    feed: dict[str, Any] = {"location": (str(root / "in"),), "format": fmt, "op_column": "op"}
    if fmt == "csv":
        feed.update(header=True, schema="k BIGINT, seq BIGINT, op STRING, v STRING")
    return lakemerge.TableConfig(
        name="t",
        path=str(root / "table"),
        key=("k",),
        sequence=("seq",),
        write_mode=mode,
        feed=lakemerge.FeedConfig(**feed),
    )


def _drop(root: Path, fmt: str, number: int, rows: list[tuple[int, int, str, str | None]]) -> Path:
    target = root / "in" / f"b{number:02d}.{fmt}"
    if fmt == "csv":
        write_lines(target, ["k,seq,op,v", *(",".join("" if x is None else str(x) for x in r) for r in rows)])
    else:
        k, seq, op, v = map(list, zip(*rows, strict=True))
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"k": k, "seq": seq, "op": op, "v": pa.array(v, pa.string())}), target)
    return target


def read_table(path: str, columns: list[str]) -> list[dict[str, Any]]:
    return sorted(query_rows(path, columns), key=lambda r: r["k"])


@pytest.mark.parametrize("mode", ["copy_on_write", "deletion_vectors"])
def test_parquet_and_csv_batches_give_the_same_table(spark: Any, tmp_path: Path, mode: str) -> None:
    found = []
    for fmt in ("parquet", "csv"):
        table = _config(tmp_path / fmt, fmt, mode)
        for number, rows in enumerate(BATCHES, start=1):
            _drop(tmp_path / fmt, fmt, number, rows)
            result = lakemerge.apply_table(table, spark=spark)
        assert (result.metrics.updated, result.metrics.deleted, result.metrics.late) == (1, 1, 1)
        assert (result.metrics.inserted, result.metrics.superseded) == (1, 1)
        found.append(read_table(table.path, ["k", "seq", "v"]))
    assert (
        found[0]
        == found[1]
        == [
            {"k": 1, "seq": 2, "v": "b1"},
            {"k": 3, "seq": 1, "v": "a3"},
            {"k": 4, "seq": 3, "v": "b4"},
        ]
    )


@pytest.mark.internals
def test_only_a_batch_of_text_files_caches_its_records(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parquet is read by column: a second read of its files cost less than caching their records.
    Text is parsed whole on each read: its records are cached."""
    from pyspark import StorageLevel

    planned = planned_batches(monkeypatch, "reread")
    for fmt in ("parquet", "csv"):
        table = _config(tmp_path / fmt, fmt, "copy_on_write")
        for number, rows in enumerate(BATCHES, start=1):
            _drop(tmp_path / fmt, fmt, number, rows)
            lakemerge.apply_table(table, spark=spark)
    parquet, csv = planned[1], planned[3]
    # Parquet: the classification alone is cached; CSV: the records too, first.
    assert parquet == (True, [StorageLevel.MEMORY_AND_DISK]), planned
    assert csv == (False, [StorageLevel.MEMORY_AND_DISK] * 2), planned


@pytest.mark.parametrize("mode", ["copy_on_write", "deletion_vectors"])
def test_a_parquet_file_changed_while_its_batch_runs_commits_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Its records are read more than once: a file rewritten between those reads is refused before
    the commit, named, and the rerun applies what the file holds then."""
    table = _config(tmp_path, "parquet", mode)
    _drop(tmp_path, "parquet", 1, BATCHES[0])
    lakemerge.apply_table(table, spark=spark)
    target = _drop(tmp_path, "parquet", 2, BATCHES[1])
    before = table_version(table.path)
    real = lakemerge.batch.commit._prepare

    def rewritten(*args: Any, **kwargs: Any) -> Any:
        _drop(tmp_path, "parquet", 2, [(1, 5, "U", "c1"), (5, 5, "U", "a5"), (6, 5, "D", None)])
        return real(*args, **kwargs)

    monkeypatch.setattr(lakemerge.batch.commit, "_prepare", rewritten)
    with pytest.raises(lakemerge.InputError, match="changed while its batch was read") as raised:
        lakemerge.apply_table(table, spark=spark)
    assert target.name in str(raised.value)
    assert table_version(table.path) == before
    monkeypatch.setattr(lakemerge.batch.commit, "_prepare", real)
    result = lakemerge.apply_table(table, spark=spark)
    assert (result.metrics.rows_read, result.metrics.updated, result.metrics.deletes_absent) == (3, 1, 1)
    assert read_table(table.path, ["k", "v"]) == [
        {"k": 1, "v": "c1"},
        {"k": 2, "v": "a2"},
        {"k": 3, "v": "a3"},
        {"k": 5, "v": "a5"},
    ]
