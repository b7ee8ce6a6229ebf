"""The floor benchmark's modes do what they say, and its summary compares what it should."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from bench import floor


def test_summary_takes_medians_per_round_and_ratios_to_the_references() -> None:
    runs = {
        "lookup": [[2.0, 0.6, 0.5, 0.4, 0.5], [2.0, 0.7, 0.6, 0.6, 0.6]],
        "hand": [[6.0, 3.0, 3.0, 3.0, 3.0], [6.0, 3.6, 3.0, 3.0, 3.0]],
    }
    lines = floor.summary(runs)
    assert "  lookup: 0.500 0.600 (0.550 s); warm 0.467 0.600 (0.533 s)" in lines
    # hand / lookup per round: 3.0 / 0.5 and 3.0 / 0.6; nothing compares hand with itself.
    assert "  lookup: 6.00 5.00 (5.50x)" in lines
    assert not any(line.startswith("  hand: ") and "x)" in line for line in lines)
    assert not any(line.startswith("rewrite / mode") for line in lines)


def test_unknown_mode_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        floor.main(["append", "merge"])
    assert "unknown mode(s) merge" in capsys.readouterr().err


def test_lookup_writes_each_change_with_its_stored_sequence(spark: object, tmp_path: Path) -> None:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    table, target, batch = str(tmp_path / "t"), str(tmp_path / "beside"), str(tmp_path / "b.parquet")
    spark.createDataFrame([(1, 5), (2, 7), (3, 9)], "o_orderkey long, seq long").write.format("delta").save(table)
    changes = [(2, 8, "U"), (4, 1, "U"), (3, 2, "D")]
    spark.createDataFrame(changes, "o_orderkey long, seq long, op string").write.parquet(batch)
    floor.lookup_batch(spark, table, target)(batch)
    rows = DeltaTable(target).to_pyarrow_table().to_pylist()
    found = {r["o_orderkey"]: (r["seq"], r["op"], r["stored_seq"]) for r in rows}
    assert found == {2: (8, "U", 7), 4: (1, "U", None), 3: (2, "D", 9)}
    floor.append_batch(spark, target)(batch)
    assert DeltaTable(target).to_pyarrow_table().num_rows == 6
