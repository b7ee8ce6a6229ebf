"""The floor benchmark's modes do what they say, and its summary compares what it should."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from bench import floor
from tests.helpers import query_rows


def test_summary_takes_medians_per_round_and_ratios_to_the_references() -> None:
    runs = {
        "lookup": [[2.0, 0.6, 0.5, 0.4, 0.5], [2.0, 0.7, 0.6, 0.6, 0.6]],
        "hand": [[6.0, 3.0, 3.0, 3.0, 3.0], [6.0, 3.6, 3.3, 3.3, 3.0]],
    }
    lines = floor.summary(runs)
    assert "  lookup: 0.500 0.600 (0.550 s); warm 0.467 0.600 (0.533 s)" in lines
    # hand / lookup round by round: 3.0 / 0.5 and 3.3 / 0.6; nothing compares hand with itself.
    assert "  lookup: 6.00 5.50 (5.75x)" in lines
    assert not any(line.startswith("  hand: ") and "x)" in line for line in lines)
    assert not any(line.startswith("rewrite / mode") for line in lines)
    # A reference alone is compared with nothing.
    assert not any("/ mode" in line for line in floor.summary({"hand": runs["hand"]}))


def test_unknown_mode_and_too_few_batches_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        floor.main(["append", "merge"])
    assert "unknown mode(s) merge" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        floor.main(["--count", "2", "append"])
    assert "--count at least 3" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("mode", "prune"),
    [("lookup", False), ("lookup", True), ("bound", False), ("bound", True), ("kept", False)],
)
def test_lookup_writes_each_change_with_its_newest_stored_sequence(
    spark: object, tmp_path: Path, mode: str, prune: bool
) -> None:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    table, target = str(tmp_path / "t"), str(tmp_path / "beside")
    spark.createDataFrame([(1, 5), (2, 7), (3, 9)], "o_orderkey long, seq long").write.format("delta").save(table)

    def batch(name: str, changes: list[tuple[int, int, str]]) -> str:
        # One Parquet file, as the harness's batches are (DuckDB writes them).
        path = str(tmp_path / f"{name}.parquet")
        columns = dict(zip(["o_orderkey", "seq", "op"], map(list, zip(*changes, strict=True)), strict=True))
        pq.write_table(pa.table(columns), path)
        return path

    earlier = mode != "bound"
    kept: list[object] = []
    if mode == "kept":
        lookup = floor.kept_batch(spark, table, target, kept)  # type: ignore[arg-type]
    else:
        lookup = floor.lookup_batch(spark, table, target, prune=prune, earlier=earlier)
    lookup(batch("b1", [(2, 8, "U"), (4, 1, "U"), (3, 2, "D")]))
    # The second batch sees the first one's rows (key 4's insert, key 2's update); the bound mode
    # sees the table alone, and the kept mode the first batch's rows from memory.
    # Key 3's stored row (sequence 9) is newer than the first batch's late delete of it (2).
    lookup(batch("b2", [(4, 6, "U"), (2, 3, "U"), (5, 1, "U"), (3, 4, "U")]))
    # Key 2's newest stored sequence is the first batch's (8), not the table's (7) or the second's (3).
    lookup(batch("b3", [(2, 10, "U")]))
    try:
        # The kept mode cached the table once, and each batch's rows as it was written.
        assert len(kept) == (4 if mode == "kept" else 0)
        assert all(frame.is_cached for frame in kept)  # type: ignore[attr-defined]
    finally:
        for frame in kept:
            frame.unpersist()  # type: ignore[attr-defined]
    rows = DeltaTable(target).to_pyarrow_table().to_pylist()
    found = sorted((r["o_orderkey"], r["seq"], r["op"], r["stored_seq"]) for r in rows)
    assert found == [
        (2, 3, "U", 8 if earlier else 7),
        (2, 8, "U", 7),
        (2, 10, "U", 8 if earlier else 7),
        (3, 2, "D", 9),
        (3, 4, "U", 9),
        (4, 1, "U", None),
        (4, 6, "U", 1 if earlier else None),
        (5, 1, "U", None),
    ]
    assert floor.key_bounds(str(tmp_path / "b2.parquet")) == (2, 5)
    bare = str(tmp_path / "bare.parquet")
    pq.write_table(pa.table({"o_orderkey": [7, 3]}), bare, write_statistics=False)
    assert floor.key_bounds(bare) is None
    floor.append_batch(spark, target)(str(tmp_path / "b1.parquet"))
    assert DeltaTable(target).to_pyarrow_table().num_rows == 11


def test_the_library_is_named_relative_to_the_checkout() -> None:
    inside = os.path.join(floor.HARNESS, "src", "lakemerge")
    assert floor._shown(inside) == os.path.join("src", "lakemerge")
    assert floor._shown("/elsewhere/lakemerge") == "/elsewhere/lakemerge"


@pytest.mark.parametrize(("vectors", "partitioned"), [(False, False), (True, False), (False, True), (True, True)])
def test_rules_applies_sequences_late_changes_and_tombstones(
    spark: object, tmp_path: Path, vectors: bool, partitioned: bool
) -> None:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    table, graves = str(tmp_path / "t"), str(tmp_path / "graves")
    # (a partitioned table, as the date layout is, has a column of its own: the key's parity)
    stored = [(1, 5, "a", 1), (2, 7, "b", 0), (3, 9, "c", 1)]
    writer = spark.createDataFrame(stored, "o_orderkey long, seq long, v string, part long").write.format("delta")
    writer = writer.partitionBy("part") if partitioned else writer
    writer.option("delta.enableDeletionVectors", str(vectors).lower()).save(table)

    def batch(name: str, changes: list[tuple[int, int, str | None, str]]) -> str:
        path = str(tmp_path / f"{name}.parquet")
        keys, seqs, values, ops = map(list, zip(*changes, strict=True))
        columns = {"o_orderkey": keys, "seq": seqs, "v": pa.array(values, pa.string()), "op": ops}
        pq.write_table(pa.table({**columns, "part": [key % 2 for key in keys]}), path)
        return path

    apply = floor.rules_batch(spark, table, graves, vectors=vectors)
    # Key 1 updated; key 2's change older than its stored row (late); key 3 deleted; key 9's delete
    # finds no row (a tombstone all the same); key 4 inserted.
    apply(batch("b1", [(1, 6, "a1", "U"), (2, 3, "b1", "U"), (3, 10, None, "D"), (9, 1, None, "D"), (4, 1, "d", "U")]))
    # Key 3's change is older than its tombstone (late); key 9's is newer than its own (inserted);
    # key 1's is older than the first batch's update (late); key 5's newest change wins.
    apply(batch("b2", [(3, 8, "c2", "U"), (9, 2, "y", "U"), (1, 4, "old", "U"), (5, 3, "e", "U"), (5, 4, "e2", "U")]))
    rows = sorted((r["o_orderkey"], r["seq"], r["v"]) for r in query_rows(table, ["o_orderkey", "seq", "v"]))
    assert rows == [(1, 6, "a1"), (2, 7, "b"), (4, 1, "d"), (5, 4, "e2"), (9, 2, "y")]
    tombstones = sorted((r["o_orderkey"], r["seq"]) for r in DeltaTable(graves).to_pyarrow_table().to_pylist())
    assert tombstones == [(3, 10), (9, 1)]
    assert floor.sequence_bounds(str(tmp_path / "b2.parquet")) == (2, 8)
    # Each batch committed once, under the table's transaction identifier (its batch number); with
    # deletion vectors the first batch's replaced rows were marked, their file kept.
    assert DeltaTable(table).version() == 2
    assert bool(list(Path(table).glob("**/deletion_vector_*.bin"))) == vectors
    assert bool(list(Path(table).glob("part=1/*.parquet"))) == partitioned
