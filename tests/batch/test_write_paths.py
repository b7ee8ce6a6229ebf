"""The cheaper paths a batch takes when it can: insert-only batches are appends, the batch
number comes from the records already read, and truncate tombstones are looked for only when the
side table says it ever held one. Each path must give exactly what the general one gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deltalake
import pytest

import lakemerge
from lakemerge.table import ledger, stats, store, tombstones
from tests.helpers import csv_table, jobs_of, read_table, write_lines

HEADER = "id,seq,op,a"


def _table(
    tmp_path: Path, schema: str = "id INT, seq BIGINT, op STRING, a STRING", write_mode: str = "copy_on_write"
) -> lakemerge.TableConfig:
    feed = lakemerge.FeedConfig(
        location=(str(tmp_path / "in"),),
        format="csv",
        header=True,
        schema=schema,
        op_column="op",
        truncate_codes=() if write_mode == "log" else ("T",),
    )
    return lakemerge.TableConfig(
        name="t", path=str(tmp_path / "table"), key=("id",), sequence=("seq",), feed=feed, write_mode=write_mode
    )


def _batch(spark: Any, table: lakemerge.TableConfig, folder: Path, lines: list[str], header: str = HEADER) -> Any:
    write_lines(folder / "f.csv", [header, *lines])
    return lakemerge.apply_table(table, inputs=[str(folder)], spark=spark)


def _operation(path: str, version: int) -> str:
    found = [h for h in deltalake.DeltaTable(path).history() if h["version"] == version]
    return str(found[0]["operation"])


def test_an_insert_only_batch_is_an_append_that_adds_new_columns(spark: Any, tmp_path: Path) -> None:
    table = _table(tmp_path)
    _batch(spark, table, tmp_path / "1", ["1,5,U,a1", "2,5,U,a2"])
    wider = _table(tmp_path, schema="id INT, seq BIGINT, op STRING, a STRING, c STRING")
    result = _batch(
        spark,
        wider,
        tmp_path / "2",
        [
            "3,1,U,a3,c3",
            "4,1,U,,c4",
            "1,4,U,late,late",  # older than the stored row: late, writes nothing
            "9,1,D,,",  # delete of a key the table lacks: nothing to write
        ],
        header="id,seq,op,a,c",
    )
    m = result.metrics
    assert (m.inserted, m.updated, m.deleted, m.late, m.deletes_absent) == (2, 0, 0, 1, 1)
    assert _operation(table.path, result.version) == "WRITE"
    assert result.files_added >= 1 and result.files_removed == 0
    assert read_table(table.path, ["id", "seq", "a", "c"]) == [
        {"id": 1, "seq": 5, "a": "a1", "c": None},
        {"id": 2, "seq": 5, "a": "a2", "c": None},
        {"id": 3, "seq": 1, "a": "a3", "c": "c3"},
        {"id": 4, "seq": 1, "a": None, "c": "c4"},
    ]
    # The append is the batch's one commit: its files are never applied again.
    again = lakemerge.apply_table(wider, inputs=[str(tmp_path / "2")], spark=spark)
    assert again.version is None and len(again.skipped_files) == 1
    # A batch that updates goes through MERGE.
    merged = _batch(spark, table, tmp_path / "3", ["3,2,U,new"])
    assert _operation(table.path, merged.version) == "MERGE"


def test_the_batch_number_comes_from_the_records_and_follows_delta(spark: Any, tmp_path: Path) -> None:
    table = _table(tmp_path)
    for n in (1, 2):
        _batch(spark, table, tmp_path / str(n), [f"{n},{n},U,x"])
    lakemerge.rollback(table.path, to_version=0, reapply=False, spark=spark)
    _batch(spark, table, tmp_path / "3", ["3,3,U,x"])
    _, history = ledger.state(spark, table.path)
    assert history.last_batch == ledger.txn_version(spark, table.path) == 3
    assert ledger.last_batch(spark, table.path, known=history) == 3


def test_without_records_the_batch_number_comes_from_delta(spark: Any, tmp_path: Path) -> None:
    """A table whose history holds no batch record (written by hand under lakemerge's
    transaction id, as after a log cleanup removed the records) numbers from Delta's state."""
    table = _table(tmp_path)
    spark.conf.set("spark.databricks.delta.write.txnAppId", ledger.TXN_APP_ID)
    spark.conf.set("spark.databricks.delta.write.txnVersion", "5")
    try:
        spark.createDataFrame([(1, 1, "a")], "id INT, seq BIGINT, a STRING").write.format("delta").save(table.path)
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
    _, history = ledger.state(spark, table.path)
    assert history.last_batch is None and ledger.last_batch(spark, table.path, known=history) == 5
    result = _batch(spark, table, tmp_path / "1", ["2,1,U,b"])
    assert result.version == 1 and ledger.txn_version(spark, table.path) == 6


def test_a_truncate_marks_the_side_table_and_stays_honoured(spark: Any, tmp_path: Path) -> None:
    table = _table(tmp_path)
    _batch(spark, table, tmp_path / "1", ["1,1,U,a", "2,8,U,b", "3,1,U,c", "4,1,U,d"])
    _batch(spark, table, tmp_path / "2", ["2,9,D,", "3,2,D,", "4,2,D,", "8,2,D,"])
    # Every batch reads the side table: a batch adds one file of tombstones, not one per shuffle partition.
    assert len(deltalake.DeltaTable(table.tombstone_table).file_uris()) == 1
    properties = store.table_properties(spark, table.tombstone_table)
    assert tombstones.TRUNCATES_PROPERTY not in properties
    _batch(spark, table, tmp_path / "3", [",6,T,"])
    assert store.table_properties(spark, table.tombstone_table)[tombstones.TRUNCATES_PROPERTY] == "true"
    # Later batches: a new key older than the truncate is late; a newer one is inserted.
    result = _batch(spark, table, tmp_path / "4", ["5,4,U,old", "6,7,U,new"])
    assert (result.metrics.late, result.metrics.inserted) == (1, 1)
    assert read_table(table.path, ["id", "a"]) == [{"id": 6, "a": "new"}]
    # Vacuum rewrites the side table; the mark (and so the truncate) survives it.
    _, history = ledger.state(spark, table.path)
    tombstones.collect_garbage(spark, table, history.batch_ids, txn_version=4)
    assert store.table_properties(spark, table.tombstone_table)[tombstones.TRUNCATES_PROPERTY] == "true"
    result = _batch(spark, table, tmp_path / "5", ["7,5,U,old"])
    assert result.metrics.late == 1


def _loaded(frame: Any) -> bool:
    """Whether the cached frame's data is in Spark's cache now (not dropped for recomputation)."""
    return bool(frame._jdf.queryExecution().withCachedData().cacheBuilder().isCachedColumnBuffersLoaded())


@pytest.mark.internals
@pytest.mark.parametrize(
    ("write_mode", "lines"),
    [
        # (Each batch holds a change older than the tombstone of key 1, so that the tombstones are read.)
        ("copy_on_write", ["2,3,D,", "3,3,U,c3", "9,3,U,i", "1,1,U,late"]),
        ("copy_on_write", ["7,3,U,x", "8,3,D,", "1,1,U,late"]),
        ("log", ["2,3,D,", "3,3,U,c3", "9,3,U,i", "1,1,U,late"]),
    ],
    ids=["merge", "insert-only-append", "log-append"],
)
def test_the_batch_s_own_writes_leave_its_cached_classification_in_place(
    spark: Any, tmp_path: Path, write_mode: str, lines: list[str]
) -> None:
    """A batch writes to paths its classification read: its tombstones, its log, its table. Spark
    drops (and plans again, or recomputes) every cached plan over a path that is written, so the
    classification must read fixed versions, or each write would redo it."""
    from lakemerge.batch import commit as commit_module
    from lakemerge.batch import plan as plan_module

    table = _table(tmp_path, write_mode=write_mode)
    _batch(spark, table, tmp_path / "1", ["1,1,U,a", "2,1,U,b", "3,1,U,c"])
    _batch(spark, table, tmp_path / "2", ["1,2,D,"])
    write_lines(tmp_path / "3" / "f.csv", [HEADER, *lines])
    plan = plan_module.plan_batch(table, spark=spark, inputs=[str(tmp_path / "3")])
    assert isinstance(plan, plan_module.BatchPlan)
    try:
        assert _loaded(plan.classified)
        # Each stored side is reduced to the batch's keys by one broadcast semi-join (each a Spark
        # job): the tombstones and the table; in log mode only the log (its table is written by the
        # first compaction), whose one read gives both the stored rows and the log's tombstones, and
        # the merged view made of the reduced sides is not reduced once more.
        cached = plan.classified._jdf.queryExecution().withCachedData().cacheBuilder().cachedPlan().toString()
        planned = cached.split("== Initial Plan ==")[-1]  # the final plan drops what ran empty
        assert planned.count("LeftSemi") == (1 if write_mode == "log" else 2), planned
        assert planned.count("FileScan parquet") == (1 if write_mode == "log" else 2), planned
        commit_module.commit_batch(plan, spark=spark)
        assert _loaded(plan.classified), "classification dropped from the cache by the batch's own writes"
    finally:
        plan.release()


@pytest.mark.internals
def test_a_batch_reads_the_tombstone_table_from_its_checksums_list_of_files(spark: Any, tmp_path: Path) -> None:
    """The tombstone table gains a version with every batch that deletes; reading it through Delta
    rebuilt that version's state from its commits (a "Filtering files" job) in each such batch."""
    table = csv_table(tmp_path)
    batches = [["k,seq,op,a", "1,1,U,x", "2,1,U,y", "3,1,U,z"], ["k,seq,op,a", "1,2,D,", "4,2,U,w"]]
    for number, lines in enumerate(batches):
        write_lines(tmp_path / "in" / f"b{number}.csv", lines)
        lakemerge.apply_table(table, spark=spark)
    assert stats.read_listed(spark, table.tombstone_table) is not None
    write_lines(tmp_path / "in" / "b2.csv", ["k,seq,op,a", "2,3,D,", "1,1,U,late", "5,3,U,v"])
    ran = jobs_of(spark, lambda: lakemerge.apply_table(table, spark=spark))
    # Neither side: the table too is read from its checksum's list of files.
    assert [job for job in ran if "Filtering files" in job] == [], ran
    assert read_table(table.path, ["k", "seq", "a"]) == [
        {"k": 3, "seq": 1, "a": "z"},
        {"k": 4, "seq": 2, "a": "w"},
        {"k": 5, "seq": 3, "a": "v"},
    ]
    assert sorted(r["k"] for r in read_table(table.tombstone_table)) == [1, 2]
