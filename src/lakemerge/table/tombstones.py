"""Tombstones: the remembered (key, sequence) of deletes (docs/semantics.md §12 Tombstones, docs/history.md).

They live in a Delta table of their own beside the table, so that no reader of the table ever sees
them. Columns: the table's key and sequence columns, then

- ``_lm_batch`` / ``_lm_batch_id``: the batch number and id that wrote the tombstone;
- ``_lm_written_at``: when (epoch milliseconds), for retention;
- ``_lm_truncate``: a table-wide tombstone left by a truncate (key columns null);
- ``_lm_confirmed``: ``lakemerge vacuum`` saw the batch committed.

A table-wide tombstone is only looked for when the side table carries the property
``lakemerge.truncates = true``, which is set (in a commit of its own) before the first truncate
tombstone is appended; a batch without truncates in the table's past pays no job for them.

A batch appends its tombstones before its table commit. An unconfirmed tombstone counts only
while the table's history holds a commit of its batch id: a crash between the two writes, or a
writer that lost a race, leaves tombstones that nobody honours.

A ``log`` table writes no tombstone here per batch: its deletes are rows of the change log, committed
with the batch (:func:`lakemerge.table.logview.tombstones` reads them), and compaction moves them here,
confirmed, before it deletes them from the log (:func:`append_confirmed`).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lakemerge import columns as C
from lakemerge.columns import col, quoted
from lakemerge.config.table import TableConfig
from lakemerge.spark import literals
from lakemerge.table import store
from lakemerge.table.snapshots import is_delta

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

BATCH, BATCH_ID, WRITTEN_AT, TRUNCATE, CONFIRMED = (
    "_lm_batch",
    "_lm_batch_id",
    "_lm_written_at",
    "_lm_truncate",
    "_lm_confirmed",
)
#: Side-table property set before the first truncate tombstone is written.
TRUNCATES_PROPERTY = "lakemerge.truncates"
#: Up to this many committed batch ids are written into the read's filter (a hash set in the plan);
#: more are broadcast as a table, which costs a Spark job of its own.
INLINE_IDS = 10_000
#: The newest tombstone sequence of a key, as a struct of the sequence columns (classification's column).
SEQ = "_lm_tomb_seq"


@dataclass(frozen=True)
class Tombstones:
    """The effective tombstones of a table.

    Attributes:
        rows: every honoured key tombstone (key and sequence columns); ``None`` when there is none.
        truncated_before: the newest truncate's sequence, as a struct literal, or ``None``.
    """

    rows: DataFrame | None = None
    truncated_before: Column | None = None

    def adding(self, rows: DataFrame | None) -> Tombstones:
        """These tombstones and ``rows`` (key and sequence columns, all honoured)."""
        if rows is None:
            return self
        return replace(self, rows=rows if self.rows is None else self.rows.unionByName(rows))


def exists(spark: SparkSession, table: TableConfig) -> bool:
    return is_delta(spark, table.tombstone_table)


def read(spark: SparkSession, table: TableConfig, committed: Collection[str], *, oldest: Any = None) -> Tombstones:
    """The tombstones to honour: confirmed ones, and those of batches in ``committed``.

    ``oldest``: the smallest value of the first sequence column among the batch's changes, when
    known. A tombstone makes a change late only when the change is older than it; when no
    tombstone is newer than ``oldest`` by the statistics of the side table's files
    (:func:`cannot_make_late`), no key tombstone is read at all.

    The side table is read at the version it has now (:func:`stats.read_listed` where Delta's
    checksum lists that version's files: the table gains a version with most batches, whose state
    Delta would rebuild from its commits on every read; else :func:`store.read_pinned`): a batch
    appends its own tombstones after it classified, which must not drop its cached classification.

    One small action finds the newest truncate, when the side table has ever held one. Returns an
    empty :class:`Tombstones` when the table keeps none."""
    from pyspark.sql import functions as F

    from lakemerge.table.stats import read_listed
    from lakemerge.table.store import read_pinned, table_properties

    if not table.tombstones or not exists(spark, table):
        return Tombstones()
    # A log table takes no truncates (refused at config time), so it never looks for one.
    truncates = not table.log_mode and table_properties(spark, table.tombstone_table).get(TRUNCATES_PROPERTY) == "true"
    skipped = oldest is not None and cannot_make_late(spark, table, oldest)
    if skipped and not truncates:
        return Tombstones()
    listed = read_listed(spark, table.tombstone_table)
    frame = listed if listed is not None else read_pinned(spark, table.tombstone_table)
    frame, known = _known(spark, frame, committed)
    frame = frame.filter(F.col(CONFIRMED) | known)
    sequence = table.sequence_columns
    truncate = None
    if truncates:
        newest = F.max(F.struct(*[col(c) for c in sequence]))
        truncate = frame.filter(F.col(TRUNCATE)).agg(newest).collect()[0][0]
    before = None
    if truncate is not None:
        types = {f.name: f.dataType for f in frame.schema.fields}
        values = truncate.asDict()
        before = F.struct(*[F.lit(values[c]).cast(types[c]).alias(c) for c in sequence])
    keys = frame.filter(~F.col(TRUNCATE)).select(*[col(c) for c in (*table.key, *sequence)])
    return Tombstones(rows=None if skipped else keys, truncated_before=before)


def cannot_make_late(spark: SparkSession, table: TableConfig, oldest: Any) -> bool:
    """Whether the tombstones cannot make late a change of sequence ``oldest`` (a value of the
    table's first sequence column) or newer, by the statistics of the side table's files as its
    latest checksum lists them (no Spark job): with one sequence column, ``oldest`` is at least
    their largest (an equal sequence is not older); with several, above it in the first column.
    ``False`` whenever that cannot be told: a file without statistics of the column, a type
    Delta's statistics do not bound exactly (only integers, decimals and dates are taken), files
    the checksum does not list. An empty side table holds no tombstone: ``True``."""
    import datetime
    import decimal

    from lakemerge.table.stats import file_key_bounds

    if type(oldest) not in (int, decimal.Decimal, datetime.date):  # (as the statistics are read)
        return False
    sequence = table.sequence_columns
    bounds = file_key_bounds(spark, table.tombstone_table, sequence[0], job=False)
    if bounds is None or any(high is None for _, high, _ in bounds):
        return False
    newest = max((high for _, high, _ in bounds), default=None)
    try:
        return newest is None or (oldest >= newest if len(sequence) == 1 else oldest > newest)
    except TypeError:  # (a value that does not compare with the statistics' kind)
        return False


def _known(spark: SparkSession, frame: DataFrame, committed: Collection[str]) -> tuple[DataFrame, Column]:
    """``frame`` and a condition: its row's batch id is among ``committed``. Up to
    :data:`INLINE_IDS` ids go into the condition; more are broadcast as a table joined to ``frame``."""
    from pyspark.sql import functions as F

    if not committed:
        return frame, F.lit(False)
    if len(committed) <= INLINE_IDS:
        return frame, F.col(BATCH_ID).isin(sorted(committed))
    ids = spark.createDataFrame([(i,) for i in sorted(committed)], f"{BATCH_ID} STRING")
    frame = frame.join(F.broadcast(ids.withColumn("_lm_known", F.lit(True))), on=BATCH_ID, how="left")
    return frame, F.col("_lm_known").isNotNull()


def append(
    spark: SparkSession,
    table: TableConfig,
    deletes: DataFrame | None,
    *,
    truncate: Column | None,
    batch: int,
    batch_id: str,
    types: dict[str, str],
    count: int,
) -> None:
    """Append the batch's tombstones: ``deletes`` (key and sequence columns) and, for a truncate,
    one table-wide row, ``count`` rows in all, in files of about :data:`store.ROWS_PER_FILE` rows
    (not one per shuffle partition: the side table is read by every batch). ``types`` gives the SQL
    type of each key and sequence column, so that a truncate's null key columns are typed like the
    table's."""
    from pyspark.sql import functions as F

    from lakemerge.table.store import files_for

    columns = (*table.key, *table.sequence_columns)
    parts: list[DataFrame] = []
    if deletes is not None:
        parts.append(deletes.select(*[col(c) for c in columns]).withColumn(TRUNCATE, F.lit(False)))
    if truncate is not None:
        one = spark.range(1).select(
            *[F.lit(None).cast(types[k]).alias(k) for k in table.key],
            *[truncate[c].cast(types[c]).alias(c) for c in table.sequence_columns],
            F.lit(True).alias(TRUNCATE),
        )
        parts.append(one)
    if not parts:
        return
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    now = int(time.time() * 1000)
    # (Numbers that change from batch to batch, kept out of the code Spark compiles for the write.)
    row = quoted(table.key[0])
    rows = rows.select(
        *[col(c).cast(types[c]).alias(c) for c in columns],
        F.expr(literals.opaque(batch, row, "bigint")).alias(BATCH),
        F.lit(batch_id).alias(BATCH_ID),
        F.expr(literals.opaque(now, row, "bigint")).alias(WRITTEN_AT),
        F.col(TRUNCATE),
        F.lit(False).alias(CONFIRMED),
    )
    if truncate is not None:
        _mark_truncates(spark, table, rows.limit(0))
    rows.coalesce(files_for(count)).write.format("delta").mode("append").options(
        **store.mapping_options(rows.schema)
    ).save(table.tombstone_table)


def _mark_truncates(spark: SparkSession, table: TableConfig, empty: DataFrame) -> None:
    """Set :data:`TRUNCATES_PROPERTY` on the side table (creating it empty first when needed)
    before a truncate tombstone is appended: a crash in between leaves the property set and no
    truncate row, which readers handle; the reverse would hide the truncate."""
    from lakemerge.table.store import table_properties

    if exists(spark, table) and table_properties(spark, table.tombstone_table).get(TRUNCATES_PROPERTY) == "true":
        return
    if not exists(spark, table):
        empty.write.format("delta").mode("append").options(**store.mapping_options(empty.schema)).save(
            table.tombstone_table
        )
    spark.sql(
        f"ALTER TABLE {store.sql_path(table.tombstone_table)} SET TBLPROPERTIES ('{TRUNCATES_PROPERTY}' = 'true')"
    )


def append_confirmed(table: TableConfig, rows: DataFrame, *, count: int) -> None:
    """Append ``rows`` (``count`` of them: key and sequence columns, :data:`BATCH` and
    :data:`WRITTEN_AT`) as confirmed key tombstones, in files of about :data:`store.ROWS_PER_FILE`
    rows: what compaction moves out of a ``log`` table's change log. Call inside
    :func:`lakemerge.table.ledger.commit_record` to make the append idempotent."""
    from pyspark.sql import functions as F

    from lakemerge.table.store import files_for

    confirmed = rows.select(
        *[col(c) for c in (*table.key, *table.sequence_columns)],
        F.col(BATCH).cast("long").alias(BATCH),
        F.lit(None).cast("string").alias(BATCH_ID),
        F.col(WRITTEN_AT).cast("long").alias(WRITTEN_AT),
        F.lit(False).alias(TRUNCATE),
        F.lit(True).alias(CONFIRMED),
    )
    writer = confirmed.coalesce(files_for(count)).write.format("delta").mode("append")
    writer.options(**store.mapping_options(confirmed.schema)).save(table.tombstone_table)


def deletes_of(classified: DataFrame, table: TableConfig, outcomes: Collection[str]) -> DataFrame:
    """The delete changes of ``classified`` whose outcome is among ``outcomes``: key and sequence."""
    from pyspark.sql import functions as F

    chosen = classified.filter((F.col(C.OP) == "D") & F.col(C.OUTCOME).isin(list(outcomes)))
    return chosen.select(*[col(c) for c in (*table.key, *table.sequence_columns)])


@dataclass(frozen=True)
class Collected:
    """What :func:`collect_garbage` did."""

    removed: int
    kept: int


def collect_garbage(
    spark: SparkSession, table: TableConfig, committed: Collection[str], *, txn_version: int, now_ms: int | None = None
) -> Collected:
    """Rewrite the tombstone table in one commit, keeping only what must be honoured.

    Drops tombstones older than the retention, orphans (an unconfirmed tombstone of a batch number
    the table has passed without committing its batch id) and, in ``latest`` tables, every key
    tombstone but the newest of its key; marks the rest confirmed. Tombstones of batches not yet
    decided (a batch number above the table's) are kept as they are."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not exists(spark, table):
        return Collected(removed=0, kept=0)
    path = table.tombstone_table
    frame = spark.read.format("delta").load(path)
    before = frame.count()
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    horizon = now_ms - int(table.tombstone_retention_days * 86_400_000)
    frame, known = _known(spark, frame, committed)
    pending = ~F.col(CONFIRMED) & (F.col(BATCH) > txn_version)
    alive = F.col(CONFIRMED) | known | pending
    kept = frame.filter(alive & (F.col(WRITTEN_AT) >= horizon))
    kept = kept.withColumn(CONFIRMED, F.col(CONFIRMED) | known).drop("_lm_known")
    if not table.scd2:
        sequence = F.struct(*[col(c) for c in table.sequence_columns])
        group = [F.col(TRUNCATE), *[col(k) for k in table.key]]
        newest = Window.partitionBy(*group).orderBy(sequence.desc(), F.col(WRITTEN_AT).desc())
        decided = kept.filter(F.col(CONFIRMED))
        kept = (
            decided.withColumn("_lm_rank", F.row_number().over(newest))
            .filter("_lm_rank = 1")
            .drop("_lm_rank")
            .unionByName(kept.filter(~F.col(CONFIRMED)))
        )
    kept = kept.localCheckpoint()
    after = kept.count()
    kept.write.format("delta").mode("overwrite").save(path)
    return Collected(removed=before - after, kept=after)
