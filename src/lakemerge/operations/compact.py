"""``lakemerge compact``: fold a ``log`` table's change log into the table, bin-pack, cluster by
key, purge deletion vectors (docs/modes.md §Compaction).

Folding is crash-safe for readers of the merged view: the log rows up to the last batch (the
watermark) are MERGEd into the table in one commit made idempotent under the transaction id
``lakemerge.compact`` with the watermark as its version, so a rerun skips a fold already made. Then
the log's deletes up to the watermark (the table's tombstones while they are in the log) are
appended to the tombstone table, confirmed, in one commit made idempotent the same way under
``lakemerge.compact.tombstones``. Only then are the folded rows deleted from the log. The view
prefers log rows over table rows and a folded log row equals what the fold wrote, so the view
returns the same rows at every step, and every tombstone is in the log, the tombstone table or both.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from lakemerge.columns import col, quoted
from lakemerge.config.table import TableConfig
from lakemerge.results import CompactionResult
from lakemerge.spark import localfs
from lakemerge.table import ledger, logview, store, tombstones

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Delta transaction id under which folds are committed; its version is the last log batch folded.
COMPACT_APP_ID = "lakemerge.compact"
#: Delta transaction id (on the tombstone table) under which the log's deletes are moved there; its
#: version is the last log batch whose deletes were moved.
TOMBSTONES_APP_ID = "lakemerge.compact.tombstones"


def compaction_due(spark: SparkSession, table: TableConfig, *, batch: int) -> bool:
    """Whether automatic compaction should run after batch number ``batch``."""
    if table.compact_after_batches is not None and batch % table.compact_after_batches == 0:
        return True
    if table.log_mode and table.compact_after_log_rows is not None and logview.log_exists(spark, table):
        return spark.read.format("delta").load(table.log_table).count() >= table.compact_after_log_rows
    return False


def compact(table: TableConfig, *, spark: SparkSession) -> CompactionResult:
    """Fold the change log (``log`` mode), then bin-pack (and cluster by key), then purge deletion
    vectors (``deletion_vectors`` mode). Returns what was done."""
    started = time.monotonic()
    folded: dict[str, Any] = {}
    optimized: dict[str, int] = {}
    purged = False
    with localfs.writing(spark, localfs.tables_of(table)):
        if table.log_mode and logview.log_exists(spark, table):
            folded = _fold(spark, table)
        if store.table_exists(spark, table.path):
            optimized = _optimize(spark, table)
            if table.write_mode == "deletion_vectors":
                spark.sql(f"REORG TABLE {store.sql_path(table.path)} APPLY (PURGE)")
                purged = True
    return CompactionResult(
        table=table.name,
        path=table.path,
        **folded,
        **optimized,
        deletion_vectors_purged=purged,
        clustering=table.clustering,
        seconds=round(time.monotonic() - started, 3),
    )


def _fold(spark: SparkSession, table: TableConfig) -> dict[str, Any]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    exists = store.table_exists(spark, table.path)
    done = ledger.txn_version(spark, table.path, COMPACT_APP_ID) if exists else 0
    upto = ledger.txn_version(spark, table.log_table)
    entries = spark.read.format("delta").load(table.log_table)
    result: dict[str, Any] = {}
    if upto > done:
        pending = entries.filter((F.col(logview.LOG_BATCH) > done) & (F.col(logview.LOG_BATCH) <= upto))
        order = Window.partitionBy(*[col(k) for k in table.key]).orderBy(F.col(logview.LOG_BATCH).desc())
        latest = pending.withColumn("_lm_rank", F.row_number().over(order)).filter(F.col("_lm_rank") == 1)
        latest = latest.drop("_lm_rank").persist()
        try:
            rows = latest.count()
            record = {"compaction": {"log_batches": [done + 1, upto], "log_rows": rows}}
            with ledger.commit_record(spark, record, txn_version=upto, app_id=COMPACT_APP_ID):
                _merge(spark, table, latest, exists=exists)
        finally:
            latest.unpersist()
        result = {"log_batches_folded": upto - done, "log_rows_folded": rows}
        found = ledger.history_rows(spark, table.path, limit=1)
        result["version"] = int(found[0]["version"]) if found else None
        done = upto
    if table.tombstones:
        result["tombstones_moved"] = _move_tombstones(spark, table, entries, upto=done)
    stale = entries.filter(F.col(logview.LOG_BATCH) <= done).count()
    if stale:
        spark.sql(f"DELETE FROM {store.sql_path(table.log_table)} WHERE {logview.LOG_BATCH} <= {done}")
    result["log_rows_deleted"] = stale
    return result


def _move_tombstones(spark: SparkSession, table: TableConfig, entries: DataFrame, *, upto: int) -> int:
    """Append the log's deletes of batches up to ``upto`` not moved yet to the tombstone table,
    confirmed, each written at its batch's commit time (so that retention counts from the delete),
    in one commit under :data:`TOMBSTONES_APP_ID` with version ``upto``. Returns the rows moved."""
    from pyspark.sql import functions as F

    moved = (
        ledger.txn_version(spark, table.tombstone_table, TOMBSTONES_APP_ID) if tombstones.exists(spark, table) else 0
    )
    if upto <= moved:
        return 0
    deletes = entries.filter(
        (F.col(logview.LOG_OP) == "D") & (F.col(logview.LOG_BATCH) > moved) & (F.col(logview.LOG_BATCH) <= upto)
    ).persist()
    try:
        count = deletes.count()
        if not count:
            return 0
        times = _batch_times(spark, table.log_table)
        written = F.lit(int(time.time() * 1000))
        if times:
            when = spark.createDataFrame(sorted(times.items()), f"{logview.LOG_BATCH} BIGINT, _lm_at BIGINT")
            deletes = deletes.join(F.broadcast(when), on=logview.LOG_BATCH, how="left")
            written = F.coalesce(F.col("_lm_at"), written)
        rows = deletes.select(
            *[col(c) for c in (*table.key, *table.sequence_columns)],
            F.col(logview.LOG_BATCH).alias(tombstones.BATCH),
            written.alias(tombstones.WRITTEN_AT),
        )
        record = {"compaction": {"tombstones_of_log_batches": [moved + 1, upto], "tombstones": count}}
        with ledger.commit_record(spark, record, txn_version=upto, app_id=TOMBSTONES_APP_ID):
            tombstones.append_confirmed(table, rows, count=count)
    finally:
        deletes.unpersist()
    return count


def _batch_times(spark: SparkSession, path: str) -> dict[int, int]:
    """Batch number → commit time (epoch milliseconds) of the batch records in ``path``'s history."""
    times: dict[int, int] = {}
    for row in ledger.history_rows(spark, path):
        record = ledger.parse_record(row["userMetadata"])
        if record and isinstance(record.get("txn_version"), int):
            times.setdefault(int(record["txn_version"]), int(row["ts_ms"]))
    return times


def _merge(spark: SparkSession, table: TableConfig, latest: DataFrame, *, exists: bool) -> None:
    from pyspark.sql import functions as F

    columns = [c for c in latest.columns if c not in (logview.LOG_OP, logview.LOG_BATCH)]
    if not exists:
        store.create_table(latest.filter(F.col(logview.LOG_OP) == "U").select(*[col(c) for c in columns]), table)
        return
    values = {quoted(c): f"s.{quoted(c)}" for c in columns}
    on = " AND ".join(f"t.{quoted(k)} = s.{quoted(k)}" for k in table.key)
    op = f"s.{quoted(logview.LOG_OP)}"
    clauses = [
        f"WHEN MATCHED AND {op} = 'D' THEN DELETE",
        store.when_updated("TRUE", values),
        store.when_inserted(f"{op} = 'U'", values),
    ]
    store.merge_into(spark, table.path, latest, on=on, clauses=clauses)


def _optimize(spark: SparkSession, table: TableConfig) -> dict[str, int]:
    """OPTIMIZE the table (ZORDER BY, or liquid clustering by, the key when configured)."""
    path = store.sql_path(table.path)
    keys = [k for k in table.key if k not in table.partition_by]
    listed = ", ".join(quoted(k) for k in keys)
    statement = f"OPTIMIZE {path}"
    if table.clustering == "zorder" and keys:
        statement += f" ZORDER BY ({listed})"
    elif table.clustering == "liquid":
        spark.sql(f"ALTER TABLE {path} CLUSTER BY ({listed})")
    row = spark.sql(statement).select("metrics.*").collect()[0]
    return {
        "files_added": int(row["numFilesAdded"] or 0),
        "files_removed": int(row["numFilesRemoved"] or 0),
        "bytes_added": int(row["filesAdded"]["totalSize"] or 0),
        "bytes_removed": int(row["filesRemoved"]["totalSize"] or 0),
    }
