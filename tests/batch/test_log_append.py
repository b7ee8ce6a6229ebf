"""A ``log`` batch counts its changes in the Spark job that appends them (lakemerge.table.transaction):
the same log, view and commit records as counting first and appending after; counts that do not add
up, a batch number already taken and a writer that commits the same batch number between this
batch's write and its commit all leave nothing of the batch committed, and the files are applied
exactly once."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import lakemerge
import lakemerge.batch.attempts
import lakemerge.batch.commit
import lakemerge.batch.counts
import lakemerge.batch.plan
from lakemerge.spark.scoped import scoped_conf
from lakemerge.table import ledger, logview, snapshots, stats, store, transaction
from lakemerge.write import log
from tests.helpers import jobs_of, planned_batches, write_lines

SCHEMA = "k INT, seq BIGINT, op STRING, a STRING, b STRING"
#: Batches of one or two files: inserts, updates, a partial update (null b), deletes of present and
#: absent keys, a late change, a duplicate key within a batch, and a column new in the last batch.
BATCHES: list[list[list[str]]] = [
    [["k,seq,op,a,b", "1,1,U,a1,b1", "2,1,U,a2,b2", "3,1,U,a3,b3", "4,1,U,a4,b4"]],
    [["k,seq,op,a,b", "1,2,U,x1,", "2,2,D,,", "9,2,D,,", "3,0,U,old,old"], ["k,seq,op,a,b", "5,2,U,a5,b5"]],
    [["k,seq,op,a,b", "5,3,U,y5,y5", "5,4,U,z5,", "2,1,U,late,late", "6,3,U,a6,b6"]],
    [["k,seq,op,a,b,c", "1,5,U,w1,w1,c1", "7,5,U,a7,,c7", "4,5,D,,,"]],
]


def config(root: Path, name: str) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name=name,
        path=str(root / name),
        key=("k",),
        sequence=("seq",),
        write_mode="log",
        ignore_null_updates=True,
        feed=lakemerge.FeedConfig(
            location=(str(root / f"in-{name}"),),
            format="csv",
            header=True,
            op_column="op",
            types={"k": "int", "seq": "bigint"},
        ),
    )


def drop(root: Path, table: lakemerge.TableConfig, number: int, files: list[list[str]]) -> None:
    for index, lines in enumerate(files):
        write_lines(root / f"in-{table.name}" / f"b{number:02d}_{index}.csv", lines)


def view(spark: Any, table: lakemerge.TableConfig) -> list[dict[str, Any]]:
    frame = lakemerge.read_merged(spark, table)
    assert frame is not None
    rows = [r.asDict() for r in frame.collect()]
    return sorted(rows, key=lambda r: r["k"])


def log_records(path: str) -> list[dict[str, Any]]:
    """The lakemerge records of the log's commits, oldest first, read from its JSON commit files."""
    records = []
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info and info.get("userMetadata"):
                records.append(json.loads(info["userMetadata"]))
    return records


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Paths that batches appended to through the single-job transaction."""
    seen: list[str] = []
    real = transaction.append_with_record

    def spy(spark: Any, path: str, *args: Any, **kwargs: Any) -> int | None:
        seen.append(path)
        return real(spark, path, *args, **kwargs)

    monkeypatch.setattr(transaction, "append_with_record", spy)
    return seen


def test_counting_while_appending_gives_what_counting_first_gives(spark: Any, tmp_path: Path, calls: list[str]) -> None:
    one, two = config(tmp_path, "one_job"), config(tmp_path, "two_jobs")
    assert transaction.supported(spark)
    for number, files in enumerate(BATCHES):
        for table in (one, two):
            drop(tmp_path, table, number, files)
        single = lakemerge.apply_table(one, spark=spark)
        spark.conf.set(transaction.ENABLED_CONF, "false")
        try:
            assert not transaction.supported(spark)
            double = lakemerge.apply_table(two, spark=spark)
        finally:
            spark.conf.unset(transaction.ENABLED_CONF)
        assert single.metrics == double.metrics
        assert (single.version, single.files_added, len(single.files)) == (
            double.version,
            double.files_added,
            len(files),
        )
    assert calls == [one.log_table] * len(BATCHES)
    assert view(spark, one) == view(spark, two)
    assert [r["metrics"] for r in log_records(one.log_table)] == [r["metrics"] for r in log_records(two.log_table)]
    last = log_records(one.log_table)[-1]["metrics"]
    assert (last["inserted"], last["updated"], last["deleted"], last["rows_read"]) == (1, 1, 1, 3)
    # The batch number is Delta's transaction identifier on the log, as with the DataFrame writer.
    log = deltalake.DeltaTable(one.log_table)
    assert log.transaction_version("lakemerge") == deltalake.DeltaTable(two.log_table).transaction_version("lakemerge")
    assert log.transaction_version("lakemerge") == len(BATCHES)
    rows = {r["k"]: r for r in view(spark, one)}
    assert rows[5]["a"] == "z5" and rows[5]["b"] == "y5"  # the partial update folded
    assert rows[7]["c"] == "c7" and rows[3]["a"] == "a3"  # the new column; the late change ignored
    assert 2 not in rows and 4 not in rows
    # Either way the log keeps statistics of its key, operation and batch number only, with the new column too.
    for path in (one.log_table, two.log_table):
        stats = {name for name in pa.table(deltalake.DeltaTable(path).get_add_actions(flatten=True)).column_names}
        assert {name for name in stats if name.startswith(("min.", "max."))} == {
            f"{side}.{column}" for side in ("min", "max") for column in ("k", "_lm_op", "_lm_batch")
        }, stats


def test_a_log_keeps_statistics_of_what_it_is_read_by_only(spark: Any) -> None:
    """The log's statistics columns: its keys whose type Delta keeps statistics for (quoted, so that
    any name works, and spelled as the rows spell them), its operation and its batch number."""
    table = config(Path("/x"), "t").model_copy(update={"key": ("K", "odd `name`, really", "blob", "flag")})
    schema = spark.createDataFrame(
        [], "k INT, `odd ``name``, really` STRING, blob BINARY, flag BOOLEAN, _lm_op STRING, _lm_batch BIGINT"
    ).schema
    assert log.properties(table, schema) == {
        "delta.dataSkippingStatsColumns": "`k`, `odd ``name``, really`, `_lm_op`, `_lm_batch`",
        "delta.checkpointInterval": "100",
        "delta.columnMapping.mode": "name",  # (a name Delta takes only with column mapping)
    }


def _second_batch_pending(spark: Any, tmp_path: Path) -> tuple[lakemerge.TableConfig, int]:
    """A log table given its first batch, with the second batch's files in its feed; the log's version."""
    table = config(tmp_path, "t")
    drop(tmp_path, table, 0, BATCHES[0])
    lakemerge.apply_table(table, spark=spark)
    drop(tmp_path, table, 1, BATCHES[1])
    return table, deltalake.DeltaTable(table.log_table).version()


def test_counts_that_do_not_add_up_commit_nothing(
    spark: Any, tmp_path: Path, calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    table, before = _second_batch_pending(spark, tmp_path)
    real = lakemerge.batch.counts.with_outcomes

    def miscounted(*args: Any, **kwargs: Any) -> lakemerge.BatchMetrics:
        metrics = real(*args, **kwargs)
        return dataclasses.replace(metrics, late=metrics.late + 1)

    monkeypatch.setattr(lakemerge.batch.counts, "with_outcomes", miscounted)
    with pytest.raises(lakemerge.AccountingError):
        lakemerge.apply_table(table, spark=spark)
    assert len(calls) == 2  # the second batch wrote its rows, then did not commit them
    assert deltalake.DeltaTable(table.log_table).version() == before
    monkeypatch.setattr(lakemerge.batch.counts, "with_outcomes", real)
    result = lakemerge.apply_table(table, spark=spark)
    assert result.version == before + 1 and len(result.files) == 2
    assert {r["k"] for r in view(spark, table)} == {1, 3, 4, 5}


def test_a_dataframe_s_log_batch_is_read_once_and_counted_while_it_is_appended(
    spark: Any, tmp_path: Path, calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DataFrame may not give the same rows twice (a stream's records are also parsed from text):
    its batch caches the records as it reads them, then counts its changes in the job that appends
    them, like a batch of files; the same metrics and log as the DataFrame writer's path."""
    from pyspark import StorageLevel

    planned = planned_batches(monkeypatch, "counted")
    one, two = config(tmp_path, "one_job"), config(tmp_path, "two_jobs")
    rows = [(1, 1, "U", "a1", "b1"), (2, 1, "U", "a2", "b2"), (1, 2, "U", "x1", None), (3, 2, "D", None, None)]
    for number, batch in enumerate((rows[:2], rows[2:]), start=1):
        frame = spark.createDataFrame(batch, SCHEMA)
        single = lakemerge.apply_changes(one, frame, source="job", batch_id=number, spark=spark)
        with scoped_conf(spark, {transaction.ENABLED_CONF: "false"}):
            double = lakemerge.apply_changes(two, frame, source="job", batch_id=number, spark=spark)
        assert single.metrics == double.metrics
    assert calls == [one.log_table] * 2
    assert [counted for counted, _ in planned] == [False, True] * 2
    assert all(levels == [StorageLevel.MEMORY_AND_DISK] for counted, levels in planned if not counted), planned
    assert view(spark, one) == view(spark, two)
    assert [(r["k"], r["a"], r["b"]) for r in view(spark, one)] == [(1, "x1", "b1"), (2, "a2", "b2")]


@pytest.mark.internals
def test_a_log_batch_reads_its_changes_without_caching_them(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Caching a batch's changes cost more than reading them again: a log batch's plan caches
    nothing (a copy-on-write batch, which reads them many times, caches them)."""
    from pyspark import StorageLevel

    planned: list[Any] = []
    real = lakemerge.batch.attempts.plan_batch

    def spy(*args: Any, **kwargs: Any) -> Any:
        plan = real(*args, **kwargs)
        planned.append([frame.storageLevel for frame in (*plan.cached.frames, plan.classified)])
        return plan

    monkeypatch.setattr(lakemerge.batch.attempts, "plan_batch", spy)
    table, _ = _second_batch_pending(spark, tmp_path)
    lakemerge.apply_table(table, spark=spark)
    assert planned and all(level == StorageLevel.NONE for level in planned[-1]), planned
    assert {r["k"] for r in view(spark, table)} == {1, 3, 4, 5}
    cow = table.model_copy(update={"name": "cow", "path": str(tmp_path / "cow"), "write_mode": "copy_on_write"})
    lakemerge.apply_table(cow, spark=spark)
    assert planned[-1][0] == StorageLevel.MEMORY_AND_DISK


def test_a_feed_file_changed_while_its_log_batch_runs_commits_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The changes are read more than once: a file rewritten between those reads is refused before
    the commit, named, and the rerun applies what the file holds then."""
    table, before = _second_batch_pending(spark, tmp_path)
    real = lakemerge.batch.commit._append_counting
    target = tmp_path / f"in-{table.name}" / "b01_1.csv"

    def rewritten(*args: Any, **kwargs: Any) -> Any:
        write_lines(target, ["k,seq,op,a,b", "5,2,U,a5,b5", "6,2,U,a6,b6"])
        return real(*args, **kwargs)

    monkeypatch.setattr(lakemerge.batch.commit, "_append_counting", rewritten)
    with pytest.raises(lakemerge.InputError, match="changed while its batch was read") as raised:
        lakemerge.apply_table(table, spark=spark)
    assert "b01_1.csv" in str(raised.value)
    assert deltalake.DeltaTable(table.log_table).version() == before
    monkeypatch.setattr(lakemerge.batch.commit, "_append_counting", real)
    result = lakemerge.apply_table(table, spark=spark)
    assert result.version == before + 1 and result.metrics.rows_read == 6
    assert {r["k"] for r in view(spark, table)} == {1, 3, 4, 5, 6}


@pytest.fixture(params=["checksum", "delta lookup"])
def lookup(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a batch finds the log's last batch number when it commits: from the checksum Delta
    writes beside each commit, or (when a checksum lacks it) from Delta's own lookup."""
    if request.param == "delta lookup":
        monkeypatch.setattr(transaction, "checksum_transaction", lambda snapshot, app_id: None)
    return str(request.param)


def test_a_batch_number_taken_before_the_write_writes_nothing(spark: Any, tmp_path: Path, lookup: str) -> None:
    table = config(tmp_path, "t")
    drop(tmp_path, table, 0, BATCHES[0])
    lakemerge.apply_table(table, spark=spark)
    drop(tmp_path, table, 1, BATCHES[1])
    first = lakemerge.batch.plan.plan_batch(table, spark=spark, counted=False)
    second = lakemerge.batch.plan.plan_batch(table, spark=spark, counted=False)
    assert isinstance(first, lakemerge.batch.plan.BatchPlan) and isinstance(second, lakemerge.batch.plan.BatchPlan)
    files = {p.name for p in Path(table.log_table).glob("*.parquet")}
    try:
        assert lakemerge.batch.commit.commit_batch(first, spark=spark).version == 1
        written = {p.name for p in Path(table.log_table).glob("*.parquet")} - files
        with pytest.raises(lakemerge.batch.commit.Superseded):
            lakemerge.batch.commit.commit_batch(second, spark=spark)
    finally:
        first.release()
        second.release()
    assert {p.name for p in Path(table.log_table).glob("*.parquet")} - files == written  # nothing more written
    assert deltalake.DeltaTable(table.log_table).version() == 1
    assert lakemerge.apply_table(table, spark=spark).version is None  # its files are applied


def test_a_writer_committing_the_batch_number_between_write_and_commit_wins(
    spark: Any, tmp_path: Path, calls: list[str], monkeypatch: pytest.MonkeyPatch, lookup: str
) -> None:
    """Another process commits the same batch while this one has written its rows: Delta rejects this
    commit; the batch plans again, finds its files applied, and the log holds the batch once."""
    table = config(tmp_path, "t")
    drop(tmp_path, table, 0, BATCHES[0])
    lakemerge.apply_table(table, spark=spark)
    drop(tmp_path, table, 1, BATCHES[1])
    rival = lakemerge.batch.plan.plan_batch(table, spark=spark)  # counted, committed through the DataFrame writer
    assert isinstance(rival, lakemerge.batch.plan.BatchPlan)
    real = lakemerge.batch.counts.with_outcomes
    raced: list[int] = []

    def racing(*args: Any, **kwargs: Any) -> lakemerge.BatchMetrics:
        if not raced:
            raced.append(lakemerge.batch.commit.commit_batch(rival, spark=spark).version or -1)
        return real(*args, **kwargs)

    monkeypatch.setattr(lakemerge.batch.counts, "with_outcomes", racing)
    try:
        result = lakemerge.apply_table(table, spark=spark)
    finally:
        rival.release()
    assert raced == [1] and calls == [table.log_table] * 2  # the first batch, then this one's write
    assert result.version is None and len(result.skipped_files) == 3
    assert deltalake.DeltaTable(table.log_table).version() == 1
    records = log_records(table.log_table)
    assert len(records) == 2 and records[-1]["batch_id"] == rival.batch_id
    assert {r["k"] for r in view(spark, table)} == {1, 3, 4, 5}


def _third_batch_jobs(spark: Any, tmp_path: Path) -> tuple[lakemerge.TableConfig, list[str]]:
    """A log table given two batches, and the Spark jobs its third batch ran."""
    table = config(tmp_path, "t")
    for number, files in enumerate(BATCHES[:2]):
        drop(tmp_path, table, number, files)
        lakemerge.apply_table(table, spark=spark)
    drop(tmp_path, table, 2, BATCHES[2])
    return table, jobs_of(spark, lambda: lakemerge.apply_table(table, spark=spark))


def test_a_batch_reads_the_logs_last_batch_number_from_its_checksum_not_a_state_reconstruction(
    spark: Any, tmp_path: Path
) -> None:
    """Delta's own lookup of an idempotent transaction reconstructs the log's whole state first (a
    Spark job per batch); the checksum Delta writes beside each commit lists the transactions."""
    table, ran = _third_batch_jobs(spark, tmp_path)
    assert any("writeAndReturnCommitData" in job for job in ran)  # the batch's jobs are seen
    assert not [job for job in ran if "Compute snapshot" in job]
    assert deltalake.DeltaTable(table.log_table).transaction_version("lakemerge") == 3
    assert lakemerge.apply_table(table, spark=spark).version is None  # nothing pending: applied once


def test_the_checksums_batch_number_is_delta_s_and_a_missing_checksum_falls_back_to_delta(
    spark: Any, tmp_path: Path
) -> None:
    table = config(tmp_path, "t")
    for number, files in enumerate(BATCHES[:2]):
        drop(tmp_path, table, number, files)
        lakemerge.apply_table(table, spark=spark)
    snapshot = snapshots.latest_snapshot(spark, table.log_table)
    assert snapshot.transaction("lakemerge") == 2 == snapshot.transaction_state("lakemerge")
    assert snapshot.transaction("another") == -1
    # A log written by a writer that leaves no checksum (delta-rs) is read by Delta's lookup.
    other = str(tmp_path / "other")
    pyarrow_table = deltalake.DeltaTable(table.log_table).to_pyarrow_table()
    deltalake.write_deltalake(other, pyarrow_table)
    assert not list((Path(other) / "_delta_log").glob("*.crc"))
    assert snapshots.latest_snapshot(spark, other).transaction("lakemerge") is None
    assert ledger.txn_version(spark, other) == 0
    assert ledger.txn_version(spark, table.log_table) == 2


def test_a_batch_reads_the_log_from_its_checksums_list_of_files_without_reconstructing_its_state(
    spark: Any, tmp_path: Path
) -> None:
    """The log has a new version after every batch; reading it through Delta rebuilt that version's
    state from its commits (a "Filtering files" job over them, and a cached frame) in every batch."""
    table, ran = _third_batch_jobs(spark, tmp_path)
    assert any("writeAndReturnCommitData" in job for job in ran)
    assert not [job for job in ran if "Filtering files" in job], ran  # (one for the log before)
    rows = {r["k"]: r for r in view(spark, table)}
    assert rows[5]["a"] == "z5" and rows[5]["b"] == "y5" and rows[6]["a"] == "a6" and rows[3]["a"] == "a3"


def test_a_log_read_from_its_list_of_files_holds_what_delta_reads(spark: Any, tmp_path: Path) -> None:
    """Files of every version, a column added by a later batch (null in the older files), deletion
    vectors; and no list (a checksum written without one): the caller reads through Delta."""
    table = config(tmp_path, "t")
    for number, files in enumerate(BATCHES):
        drop(tmp_path, table, number, files)
        lakemerge.apply_table(table, spark=spark)
    # The commit that adds column c leaves the list out of its checksum (Delta lists a version's
    # files only when its schema is the previous version's); the next commit lists them again.
    assert stats.read_listed(spark, table.log_table) is None
    drop(tmp_path, table, len(BATCHES), [["k,seq,op,a,b,c", "8,6,U,a8,b8,c8"]])
    lakemerge.apply_table(table, spark=spark)

    def rows(frame: Any) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in frame.select("k", "seq", "a", "b", "c", "_lm_op", "_lm_batch").collect())

    listed = stats.read_listed(spark, table.log_table)
    assert listed is not None
    assert rows(listed) == rows(store.read_pinned(spark, table.log_table))
    assert len(rows(listed)) == sum(len(lines) - 1 for files in BATCHES for lines in files) - 3 + 1  # late, superseded
    assert {r[4] for r in rows(listed) if r[6] < len(BATCHES)} == {None}  # files older than column c
    # Deletion vectors: the rows a DELETE marks gone are gone.
    other = str(tmp_path / "dv")
    spark.range(20).selectExpr("id", "id % 3 AS m").write.format("delta").option(
        "delta.enableDeletionVectors", "true"
    ).save(other)
    spark.sql(f"DELETE FROM delta.`{other}` WHERE m = 1")
    assert (Path(other) / "_delta_log").exists() and list(Path(other).glob("deletion_vector_*.bin"))
    dv = stats.read_listed(spark, other)
    assert dv is not None and sorted(r.id for r in dv.collect()) == [i for i in range(20) if i % 3 != 1]
    # A checksum without the list of files.
    bare = str(tmp_path / "bare")
    with scoped_conf(spark, {"spark.databricks.delta.allFilesInCrc.enabled": "false"}):
        spark.range(5).write.format("delta").save(bare)
    assert stats.read_listed(spark, bare) is None


def test_the_merged_view_s_schema_without_building_it_is_the_view_s(spark: Any, tmp_path: Path) -> None:
    """logview.merged_schema: the view's columns and types from its sides' schemas (the table's, then
    the log's new ones), at every step of a table's life; none where table and log type a column
    differently, which only Spark's union can settle."""
    table = config(tmp_path, "t")

    def both() -> tuple[Any, Any]:
        sides = logview.read_sides(spark, table)
        built = logview.merged(table, sides)
        return logview.merged_schema(table, sides), built.schema if built is not None else None

    assert both() == (None, None)
    for number, files in enumerate(BATCHES):
        drop(tmp_path, table, number, files)
        lakemerge.apply_table(table, spark=spark)
        found, built = both()
        assert found is not None and [(f.name, f.dataType) for f in found.fields] == [
            (f.name, f.dataType) for f in built.fields
        ]
    assert "c" in found.names
    spark.range(2).selectExpr("CAST(id AS INT) AS k", "id AS seq", "CAST(id AS STRING) AS a").write.format(
        "delta"
    ).mode("overwrite").option("overwriteSchema", "true").save(table.path)  # (the first batch made it, empty)
    found, built = both()
    assert [(f.name, f.dataType) for f in found.fields] == [(f.name, f.dataType) for f in built.fields]
    assert found.names[:3] == ["k", "seq", "a"]  # the table's columns first
    wide = {
        table.path: spark.range(1).selectExpr("id AS k"),
        table.log_table: logview.read_sides(spark, table)[table.log_table],
    }
    assert logview.merged_schema(table, wide) is None  # k: bigint in the table, int in the log


def test_a_batch_reaching_only_its_own_keys_builds_only_their_view(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose keys are broadcast builds the merged view of its keys only, not the whole view
    as well (its schema is all the batch needs of that); one with too many keys to broadcast builds
    the whole view, which it classifies against."""
    table, _ = _second_batch_pending(spark, tmp_path)
    built: list[bool] = []
    real = logview.merged

    def spy(table: Any, sides: Any, *, keys: Any = None, deletes: bool = False) -> Any:
        built.append(keys is not None)
        return real(table, sides, keys=keys, deletes=deletes)

    monkeypatch.setattr(logview, "merged", spy)
    lakemerge.apply_table(table, spark=spark)
    assert built and all(built), built  # (its partial update is folded against its keys' view too)
    drop(tmp_path, table, 2, BATCHES[2])
    monkeypatch.setattr(lakemerge.batch.plan, "key_broadcast_rows", lambda schema, key: 0)
    built.clear()
    lakemerge.apply_table(table, spark=spark)
    assert built and not any(built), built
    rows = {r["k"]: r for r in view(spark, table)}
    assert rows[5]["a"] == "z5" and rows[5]["b"] == "y5" and 2 not in rows  # (folded; the late change ignored)


def test_a_log_keyed_by_a_boolean_column_too_is_created_and_read(spark: Any, tmp_path: Path) -> None:
    """Delta keeps no statistics of a boolean column and refuses one among a table's statistics
    columns: a key column of that type is left out of the log's (the other key column stays)."""
    table = config(tmp_path, "t").model_copy(update={"key": ("k", "b")})
    table.feed.types.update({"b": "boolean"})
    drop(tmp_path, table, 0, [["k,b,seq,op,a", "1,true,1,U,x", "1,false,1,U,y"]])
    lakemerge.apply_table(table, spark=spark)
    drop(tmp_path, table, 1, [["k,b,seq,op,a", "1,true,2,U,z", "1,false,2,D,"]])
    lakemerge.apply_table(table, spark=spark)
    assert [(r["k"], r["b"], r["a"]) for r in view(spark, table)] == [(1, True, "z")]
    configured = deltalake.DeltaTable(table.log_table).metadata().configuration
    assert configured["delta.dataSkippingStatsColumns"] == "`k`, `_lm_op`, `_lm_batch`"


def test_a_log_is_checkpointed_every_hundredth_commit(spark: Any, tmp_path: Path) -> None:
    """A change log gains a commit with every batch; Delta checkpoints it every hundredth, not every
    tenth (the checkpoint is written inside the commit that reaches it), and the table keeps
    Delta's default."""
    table = config(tmp_path, "t")
    drop(tmp_path, table, 0, BATCHES[0])
    lakemerge.apply_table(table, spark=spark)
    configured = deltalake.DeltaTable(table.log_table).metadata().configuration
    assert configured["delta.checkpointInterval"] == "100"
    assert "delta.checkpointInterval" not in deltalake.DeltaTable(table.path).metadata().configuration


def _files_added(path: str) -> list[int]:
    """How many data files each commit of the Delta table at ``path`` added, oldest first."""
    counts = []
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        counts.append(sum(1 for line in commit.read_text().splitlines() if '"add"' in line[:10]))
    return counts


def test_a_large_batch_is_logged_by_every_core_with_what_one_file_holds(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of at least ``MIN_ROWS_PER_WRITER`` rows per core is written in one log file per core
    (its join with its keys' stored rows, its classification and its write in as many tasks, not
    one), a smaller one in one file; the view and the counts are the same either way."""
    wide, narrow = config(tmp_path, "wide"), config(tmp_path, "narrow")
    cores = spark.sparkContext.defaultParallelism
    assert cores >= 2
    for number, files in enumerate(BATCHES):
        results = []
        for table, least in ((wide, 1), (narrow, 10**9)):
            drop(tmp_path, table, number, files)
            monkeypatch.setattr(log, "MIN_ROWS_PER_WRITER", least)
            results.append(lakemerge.apply_table(table, spark=spark))
        assert results[0].metrics == results[1].metrics
    assert view(spark, wide) == view(spark, narrow)
    assert _files_added(narrow.log_table) == [1] * len(BATCHES)
    # Every core wrote one of a batch's files, or none where its share of the keys held no change.
    added = _files_added(wide.log_table)
    assert max(added) == cores and all(1 <= n <= cores for n in added), added
    assert log.files_for(spark, 10) == 1
    monkeypatch.setattr(log, "MIN_ROWS_PER_WRITER", 50_000)
    assert log.files_for(spark, 2 * 50_000 * cores) == cores
    assert log.files_for(spark, 3 * store.ROWS_PER_FILE) == max(3, cores)
