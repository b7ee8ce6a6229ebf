"""A DataFrame is a batch (``lakemerge.apply_changes``): every rule a file batch gets, exactly once
per source and batch id, bad records named by their place; read back with delta-rs and compared
with the plain-Python oracle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import lakemerge
from lakemerge.cli.app import app
from tests.helpers import read_log_view, read_table
from tests.oracle import Oracle

SCHEMA = "k INT, seq BIGINT, op STRING, v STRING"
COLUMNS = ["k", "seq", "v"]


def table_of(root: Path, mode: str = "copy_on_write", **extra: Any) -> lakemerge.TableConfig:
    """A table fed only by DataFrames: op codes I/U/D in column ``op``."""
    settings: dict[str, Any] = {
        "name": "t",
        "path": str(root / "t"),
        "key": ("k",),
        "sequence": ("seq",),
        "write_mode": mode,
        "records": lakemerge.RecordsConfig(op_column="op", upsert_codes=("I", "U"), delete_codes=("D",)),
    }
    settings.update(extra)
    return lakemerge.TableConfig(**settings)


def frame(spark: Any, rows: list[tuple[Any, ...]], schema: str = SCHEMA) -> Any:
    return spark.createDataFrame(rows, schema)


def stored(spark: Any, table: lakemerge.TableConfig) -> list[dict[str, Any]]:
    """The table's rows: delta-rs reads them, but for deletion vectors, which it cannot read yet."""
    if table.log_mode:
        return read_log_view(table.path, table.log_table, "k", COLUMNS)
    if table.write_mode == "deletion_vectors":
        rows = [{c: r[c] for c in COLUMNS} for r in spark.read.format("delta").load(table.path).collect()]
        return sorted(rows, key=lambda r: [(v is None, str(v)) for v in r.values()])
    return read_table(table.path, COLUMNS)


BATCHES = [
    [(1, 1, "I", "a"), (2, 1, "I", "b"), (3, 1, "I", "c"), (1, 2, "U", "a2"), (4, 5, "D", None)],
    [(1, 1, "U", "late"), (2, 3, "D", None), (3, 3, "U", "c3"), (5, 1, "I", "e"), (5, 2, "U", "e2")],
    [(2, 2, "U", "older than its delete"), (6, 1, "I", "f"), (3, 3, "U", "tie: the change wins")],
]


@pytest.mark.parametrize("mode", ["copy_on_write", "deletion_vectors", "log"])
def test_dataframe_batches_follow_every_rule_and_match_the_oracle(spark: Any, tmp_path: Path, mode: str) -> None:
    table = table_of(tmp_path, mode)
    oracle = Oracle(key=("k",), seq="seq", op="op")
    for number, rows in enumerate(BATCHES, 1):
        result = lakemerge.apply_changes(table, frame(spark, rows), source="orders-job", batch_id=number, spark=spark)
        counts = oracle.apply([[dict(zip(("k", "seq", "op", "v"), r, strict=True)) for r in rows]])
        assert result.version is not None and not result.applied_before
        assert (result.source, result.source_batch) == ("orders-job", number)
        got = result.metrics
        assert (got.inserted, got.updated, got.deleted, got.late, got.superseded, got.deletes_absent) == (
            counts.inserted,
            counts.updated,
            counts.deleted,
            counts.late,
            counts.superseded,
            counts.deletes_absent,
        ), number
        assert stored(spark, table) == [{c: r[c] for c in COLUMNS} for r in oracle.rows()]
    assert result.files == () and result.metrics.rows_read == 3


def test_the_same_source_and_batch_id_again_commits_nothing_and_says_so(spark: Any, tmp_path: Path) -> None:
    table = table_of(tmp_path)
    first = lakemerge.apply_changes(table, frame(spark, BATCHES[0]), source="job", batch_id=7, spark=spark)
    assert first.version == 0
    for again in (7, 3):  # the same id, and an older one
        result = lakemerge.apply_changes(table, frame(spark, BATCHES[1]), source="job", batch_id=again, spark=spark)
        assert result.version is None and result.applied_before
        assert result.metrics == lakemerge.BatchMetrics() and (result.source, result.source_batch) == ("job", again)
    other = lakemerge.apply_changes(table, frame(spark, BATCHES[1]), source="another job", batch_id=7, spark=spark)
    assert other.version == 1, "each source numbers its own batches"
    commits = lakemerge.history(table.path, spark=spark)
    assert [(c.source, c.source_batch) for c in commits] == [("another job", 7), ("job", 7)]
    shown = json.loads(CliRunner().invoke(app, ["history", table.path, "--json"]).stdout)
    assert [(c["source"], c["source_batch"]) for c in shown["commits"]] == [("another job", 7), ("job", 7)]
    text = CliRunner().invoke(app, ["history", table.path]).output
    assert "source" in text and "job #7" in text and "another" in text


def test_without_a_sequence_the_dataframes_order_and_later_batches_decide(spark: Any, tmp_path: Path) -> None:
    table = lakemerge.TableConfig(name="t", path=str(tmp_path / "t"), key=("k",))  # no feed, no op column
    rows = [(1, "first"), (2, "b"), (1, "second"), (1, "third")]
    lakemerge.apply_changes(table, spark.createDataFrame(rows, "k INT, v STRING").coalesce(1), source="s", batch_id=1)
    assert read_table(table.path, ["k", "v"]) == [{"k": 1, "v": "third"}, {"k": 2, "v": "b"}]
    lakemerge.apply_changes(table, spark.createDataFrame([(2, "b2")], "k INT, v STRING"), source="s", batch_id=2)
    assert read_table(table.path, ["k", "v"]) == [{"k": 1, "v": "third"}, {"k": 2, "v": "b2"}]


def test_bad_records_name_their_place_and_go_to_the_quarantine_within_the_threshold(spark: Any, tmp_path: Path) -> None:
    rules = lakemerge.RecordsConfig(op_column="op", upsert_codes=("I",), types={"seq": "bigint"})
    table = table_of(tmp_path, records=rules)
    rows = [(1, "1", "I", "a"), (2, "two", "I", "b"), (3, "3", "X", "c")]
    changes = spark.createDataFrame(rows, "k INT, seq STRING, op STRING, v STRING").coalesce(1)
    with pytest.raises(lakemerge.InputError) as raised:
        lakemerge.apply_changes(table, changes, source="job", batch_id=1, spark=spark)
    message = str(raised.value)
    assert message.startswith("job, batch 1, DataFrame partition 0, row 2: cannot convert column 'seq' value 'two'")
    assert "1 more bad row" in message
    assert not Path(table.path).exists()
    lenient = table.model_copy(update={"max_bad_rows": 5})
    result = lakemerge.apply_changes(lenient, changes, source="job", batch_id=1, spark=spark)
    assert result.metrics.rows_bad == 2 and result.metrics.inserted == 1
    kept = sorted((r.file, r.row, r.reason) for r in lakemerge.quarantine(lenient, spark=spark))
    assert kept == [
        ("job, batch 1, DataFrame partition 0, row", 2, "cannot convert column 'seq' value 'two' to bigint"),
        ("job, batch 1, DataFrame partition 0, row", 3, "unknown op code 'X'"),
    ]


def test_json_records_from_a_kafka_batch_name_topic_partition_and_offset(spark: Any, tmp_path: Path) -> None:
    rules = lakemerge.RecordsConfig(format="json", schema="k INT, seq BIGINT, op STRING, v STRING", op_column="op")
    table = table_of(tmp_path, records=rules)
    messages = [
        ("orders", 0, 10, '{"k": 1, "seq": 1, "op": "I", "v": "a"}'),
        ("orders", 1, 4, '{"k": 2, "seq": 1, "op": "I", "v": "b"}'),
        ("orders", 0, 11, '{"k": 1, "seq": 2, "op": "U", "v": "a2"}'),
        ("orders", 1, 5, "not json"),
        ("orders", 1, 6, '{"k": 3, "seq": "late", "op": "I", "v": "c"}'),
    ]
    kafka = spark.createDataFrame(messages, "topic STRING, partition INT, offset BIGINT, value STRING")
    with pytest.raises(lakemerge.InputError) as raised:
        lakemerge.apply_changes(table, kafka, source="stream:t", batch_id=0, spark=spark)
    assert str(raised.value).startswith(
        "stream:t, batch 0, topic orders, partition 1, offset 5: malformed JSON record (record: 'not json')"
    )
    lenient = table.model_copy(update={"max_bad_rows": 2})
    result = lakemerge.apply_changes(lenient, kafka, source="stream:t", batch_id=0, spark=spark)
    assert result.metrics.rows_bad == 2 and result.metrics.inserted == 2 and result.metrics.superseded == 1
    assert read_table(table.path, COLUMNS) == [{"k": 1, "seq": 2, "v": "a2"}, {"k": 2, "seq": 1, "v": "b"}]
    reasons = sorted((r.row, r.reason) for r in lakemerge.quarantine(lenient, spark=spark))
    assert reasons == [(5, "malformed JSON record"), (6, "cannot convert column 'seq' value 'late' to bigint")]


def test_a_source_or_batch_id_that_cannot_number_batches_is_refused(spark: Any, tmp_path: Path) -> None:
    table = table_of(tmp_path)
    changes = frame(spark, BATCHES[0])
    for source, batch_id in (("", 1), ("lakemerge", 1), ("job", -1), ("job", True)):
        with pytest.raises(lakemerge.ConfigError):
            lakemerge.apply_changes(table, changes, source=source, batch_id=batch_id, spark=spark)  # type: ignore[arg-type]
    assert not Path(table.path).exists()
