"""The write side of a ``log`` table: a batch's rows appended to its change log (the merged view
and the log's layout: :mod:`lakemerge.table.logview`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col, quoted
from lakemerge.config import TableConfig
from lakemerge.spark import literals
from lakemerge.spark.backends import backend
from lakemerge.table import store
from lakemerge.table.logview import LOG_BATCH, LOG_OP, read_merged
from lakemerge.write.classify import WRITES, Outcome

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType


def append(table: TableConfig, rows: DataFrame) -> None:
    """Append a batch's :func:`log_rows` to the log in one commit through the DataFrame writer (an
    empty append when it writes nothing, so that the batch's record exists). Call inside
    :func:`lakemerge.table.ledger.commit_record`."""
    writer = rows.write.format("delta").mode("append").option("mergeSchema", "true")
    writer.options(**properties(table, rows.schema)).save(table.log_table)


#: Commits between two checkpoints of a change log (Delta's default: 10). A log gains a commit with
#: every batch, and each tenth one paid for its checkpoint: 0.7 s warm, 1.7 s the first time in a
#: process, against about 1 s for the whole micro-batch of a stream. Seventy micro-batches of 1 % in
#: one process took 4 % less time with 100, and were no slower once the log outgrew the file list
#: Delta's checksum keeps (bench/RESULTS.md, "Change log checkpoints"). The log is lakemerge's own:
#: other readers see the table through its view.
CHECKPOINT_INTERVAL = 100


def properties(table: TableConfig, schema: StructType) -> dict[str, str]:
    """The table properties a change log is created with (Delta ignores them on an append to a log
    that exists), for log rows of ``schema``.

    Delta collects statistics of the log's key columns, operation and batch number only
    (``delta.dataSkippingStatsColumns``), not of every column as it does by default: a log is
    read by key (a batch's key ranges leave out the files that cannot hold its keys), by operation
    (its deletes, as tombstones) and by batch number (compaction), and a predicate on any other
    column cannot reach it through the merged view's ranking. Collecting them all cost about a third
    of the write of a large batch (bench/RESULTS.md, "Log files and statistics"). A key column of a type
    Delta keeps no statistics for (boolean, binary) is left out, as Delta refuses it there; names
    are spelled as in ``schema``, each quoted. Names that need it get column mapping
    (:func:`lakemerge.table.store.mapping_options`). Delta checkpoints the log every
    :data:`CHECKPOINT_INTERVAL` commits."""
    from pyspark.sql import types as T

    # (The types Delta collects statistics for: its SkippingEligibleDataType.)
    eligible = (T.NumericType, T.StringType, T.DateType, T.TimestampType, T.TimestampNTZType)
    fields = {f.name.lower(): f for f in schema.fields}
    keys = [fields[k.lower()] for k in table.key if k.lower() in fields]
    columns = [f.name for f in keys if isinstance(f.dataType, eligible)]
    listed = ", ".join(quoted(c) for c in (*columns, LOG_OP, LOG_BATCH))
    return {
        "delta.dataSkippingStatsColumns": listed,
        "delta.checkpointInterval": str(CHECKPOINT_INTERVAL),
        **store.mapping_options(schema),
    }


def log_rows(
    spark: SparkSession,
    table: TableConfig,
    classified: DataFrame,
    *,
    data_columns: Sequence[str],
    partial: Sequence[str],
    txn_version: int,
    writes: int,
    keyed: bool = False,
    stored_columns: Sequence[str] = (),
) -> DataFrame:
    """The log rows of a classified batch, in :func:`files_for` files (``writes``: how many rows at
    most): its inserts, updates and deletes, and (when the table keeps
    tombstones) its deletes of keys the view does not hold. ``keyed``: the batch's keys can be
    broadcast (see :func:`read_merged`). ``stored_columns``: the merged view's columns when the
    batch was planned; the view is read again only when the batch folds partial updates or lacks
    some of them."""
    from pyspark.sql import functions as F

    extra = [F.col(C.AFTER_DELETE)] if partial else []
    kept = [o.value for o in (*WRITES, *((Outcome.ABSENT,) if table.tombstones else ()))]
    rows = classified.filter(F.col(C.OUTCOME).isin(kept)).select(*[col(c) for c in data_columns], F.col(C.OP), *extra)
    missing = [c for c in stored_columns if c not in data_columns]
    stored = None
    if partial or missing:
        keys = rows.select(*[col(k) for k in table.key]) if keyed else None
        stored = read_merged(spark, table, keys=keys)
    if stored is not None:
        s, t = rows.alias("s"), stored.alias("t")
        on = [col(k, "s") == col(k, "t") for k in table.key]
        folded = []
        for c in data_columns:
            if c in partial and c in stored.columns:
                value = F.when(F.col(f"s.{C.AFTER_DELETE}"), col(c, "s")).otherwise(
                    F.coalesce(col(c, "s"), col(c, "t"))
                )
                folded.append(value.alias(c))
            else:
                folded.append(col(c, "s").alias(c))
        rows = s.join(t, on, "left").select(
            *folded, *[col(c, "t").alias(c) for c in missing], F.col(f"s.{C.OP}").alias(C.OP)
        )
    else:
        rows = rows.drop(*[C.AFTER_DELETE] if partial else [])
    rows = rows.withColumn(LOG_BATCH, batch_number(txn_version, table.key[0]))
    return rows.coalesce(files_for(spark, writes))


#: Log rows per file of a batch whose rows are spread over several cores (one file per core at most).
MIN_ROWS_PER_WRITER = 50_000


def files_for(spark: SparkSession, rows: int) -> int:
    """How many files a batch of at most ``rows`` log rows is written in: one per
    :data:`store.ROWS_PER_FILE`, or one per :data:`MIN_ROWS_PER_WRITER` rows up to one per core,
    whichever is more. The batch's join with its keys' stored rows, its classification and its
    write run in the tasks that write those files: in one file, on one core (bench/RESULTS.md,
    "Log files and statistics")."""
    cores = backend(spark).parallelism()
    return max(store.files_for(rows), min(cores, rows // MIN_ROWS_PER_WRITER))


def batch_number(number: int, key: str) -> Column:
    """``number`` as a bigint column, kept out of the code Spark generates for the query
    (:func:`lakemerge.spark.literals.opaque`, indexed by the row's ``key`` column): a batch number
    written as a literal would make every batch's stage new code to compile."""
    from pyspark.sql import functions as F

    return F.expr(literals.opaque(number, quoted(key), "bigint"))
