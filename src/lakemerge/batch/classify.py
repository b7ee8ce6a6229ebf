"""A batch's third phase: collapse its changes to one per key and classify each against the table.

Each change becomes an insert, update, delete, late change, delete of an absent key or unchanged
snapshot row (:mod:`lakemerge.write.classify`); an SCD2 table's changes become versions of its
keys' history instead (:mod:`lakemerge.write.scd2`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from lakemerge.batch import ranges as batch_ranges
from lakemerge.batch.cached import Cached
from lakemerge.batch.stored import Stored, Truncate
from lakemerge.changes import collapse
from lakemerge.columns import col
from lakemerge.config import TableConfig
from lakemerge.table import kept, logview, prune, store
from lakemerge.table.prune import KeyRanges, key_ranges
from lakemerge.table.tombstones import Tombstones
from lakemerge.write import scd2
from lakemerge.write.classify import classify

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Classified:
    """A batch's classified changes.

    Attributes:
        changes: each collapsed change with its outcome (an SCD2 batch: its history's changes).
        history: an SCD2 batch's versions to write.
        ranges: the key ranges the batch's write stays within, when they pay.
    """

    changes: DataFrame
    history: scd2.History | None
    ranges: KeyRanges | None


@dataclass(frozen=True)
class Reach:
    """How far a batch reaches into the table, decided before it classifies.

    Attributes:
        whole: it may reach stored rows beyond its own keys (or the table is new or small).
        early: its key ranges were looked for when it was counted.
        ranges: those ranges, when they pay.
        small: it can be broadcast (the stored rows are cut down to its keys first).
        compare: with a snapshot in the batch, the columns that tell an unchanged row.
        keyed: its keys alone can be broadcast (the stored rows are cut down to them first, when
            the batch itself is not ``small``).
    """

    whole: bool
    early: bool
    ranges: KeyRanges | None
    small: bool
    compare: tuple[str, ...] = ()
    keyed: bool = False


def classify_batch(
    spark: SparkSession,
    table: TableConfig,
    valid: DataFrame,
    stored: Stored,
    tombstones: Tombstones,
    *,
    reach: Reach,
    truncate: Truncate,
    partial: tuple[str, ...],
    data_columns: tuple[str, ...],
    cached: Cached,
    counted: bool,
) -> Classified:
    """Collapse and classify ``valid`` against ``stored`` (cached when the batch is ``counted``,
    without column compression: :mod:`lakemerge.spark.cache`)."""
    if table.scd2:
        history = scd2.build(
            table,
            valid,
            stored.rows,
            tombstones=tombstones.rows,
            data_columns=data_columns,
            partial=partial,
            persist=cached.persist,
        )
        history = replace(history, changes=cached.persist(history.changes), source=cached.persist(history.source))
        return Classified(history.changes, history, reach.ranges)
    latest = collapse(valid, key=table.key, sequence=table.sequence_columns, partial=partial)
    ranges = reach.ranges
    if not reach.whole and truncate.before is None and not reach.early:
        files = batch_ranges.stored_files(spark, table)
        ranges = batch_ranges.paying(files, key_ranges(valid, table.key, span=prune.span_of(files)))
    candidates, tombstones = _candidates(spark, table, valid, stored, tombstones, ranges=ranges, compare=reach.compare)
    classified = classify(
        latest,
        candidates,
        key=table.key,
        sequence=table.sequence_columns,
        partition_by=table.partition_by,
        truncate_before=truncate.before,
        tombstones=tombstones.rows,
        truncated_before=tombstones.truncated_before,
        compare=reach.compare,
        broadcast=reach.small,
        reduce=reach.keyed and not reach.small,
        keys=valid,
        table_of_keys=stored.of_keys,
        table_deletes=stored.of_keys,
        table_tombstones=stored.of_keys and table.tombstones,
        row_index=table.write_mode == "deletion_vectors" and store.marks_rows(stored.snapshot),
    )
    return Classified(cached.persist(classified, compressed=False) if counted else classified, None, ranges)


def _candidates(
    spark: SparkSession,
    table: TableConfig,
    valid: DataFrame,
    stored: Stored,
    tombstones: Tombstones,
    *,
    ranges: KeyRanges | None,
    compare: tuple[str, ...],
) -> tuple[DataFrame | None, Tombstones]:
    """The stored rows a batch's changes are classified against, and the tombstones to honour.

    A ``log`` batch whose keys can be broadcast reads only its keys' newest rows of the merged view,
    deletes too: one read of the log gives its tombstones of those keys as well. Another ``log``
    batch adds the log's deletes to the tombstone table's (classification cuts both down to the
    batch's keys). Rows are filtered by the key ranges, and the tombstones with them, except where
    the rows were read from the files within the ranges alone (a table's, or the sides of a ``log``
    batch's own keys): the filter's literals would make new code for Spark to compile every batch,
    and each change finds its key's row by the key. Both sides filtered alike, or neither, their
    semi-joins on the batch's keys share one broadcast of those keys.

    The sides of a ``log`` batch's own keys are read for the columns classification compares
    alone; a whole table side (not cut down to the files within the batch's key ranges) is read
    from memory where the process keeps it (:mod:`lakemerge.table.kept`)."""

    candidates = stored.rows
    if stored.of_keys:
        keys = valid.select(*[col(k) for k in table.key])
        columns = (*table.key, *table.sequence_columns, *table.partition_by, *compare)
        sides = logview.narrowed(table, stored.sides, columns)
        if table.path in sides and not stored.within:
            sides[table.path] = kept.table_side(spark, table.path, sides[table.path])
        candidates = logview.newest_of_keys(spark, table, keys=keys, sides=sides)
    elif table.log_mode and table.tombstones and stored.rows is not None:
        tombstones = tombstones.adding(logview.tombstones(spark, table))
    read_within = stored.within and (stored.of_keys or not table.log_mode)
    if candidates is not None and ranges is not None and not read_within:
        candidates = candidates.filter(ranges.predicate())
        if tombstones.rows is not None:
            tombstones = replace(tombstones, rows=tombstones.rows.filter(ranges.predicate()))
    if table.log_mode and candidates is not None:
        candidates = logview.with_file_column(candidates)
    return candidates, tombstones
