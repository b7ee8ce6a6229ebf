"""Decide, for each collapsed change, what it does to the table (docs/semantics.md §1 Latest version wins).

Outcomes:

- ``insert``: an upsert for a key the table lacks;
- ``update``: an upsert whose sequence is at least the stored row's (an exact tie goes to the
  incoming change);
- ``delete``: a delete whose sequence is at least the stored row's;
- ``late``: a change older than the stored row: ignored and counted;
- ``absent``: a delete for a key the table lacks: nothing to do;
- ``unchanged``: a full snapshot's row equal to the stored row: nothing to write (docs/semantics.md §5).

For a key the table lacks, a change older than the key's newest tombstone, or than the newest
truncate, is ``late`` too (docs/history.md). Only the key and sequence columns of the table are
read (Parquet prunes the rest), and a hash of the data columns when the batch holds a snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col, quoted
from lakemerge.table.tombstones import SEQ

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


class Outcome(StrEnum):
    """What one collapsed change does to the table."""

    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"
    LATE = "late"
    ABSENT = "absent"
    UNCHANGED = "unchanged"


WRITES = (Outcome.INSERT, Outcome.UPDATE, Outcome.DELETE)


def newer_or_equal(source: str, target: str, sequence: Sequence[str]) -> str:
    """SQL condition: the ``source`` alias's sequence is at least the ``target`` alias's,
    comparing the sequence columns left to right."""
    left = ", ".join(f"{source}.{quoted(c)}" for c in sequence)
    right = ", ".join(f"{target}.{quoted(c)}" for c in sequence)
    return f"struct({left}) >= struct({right})"


def classify(
    changes: DataFrame,
    table: DataFrame | None,
    *,
    key: Sequence[str],
    sequence: Sequence[str],
    partition_by: Sequence[str] = (),
    truncate_before: Column | None = None,
    tombstones: DataFrame | None = None,
    truncated_before: Column | None = None,
    compare: Sequence[str] = (),
    broadcast: bool = False,
    reduce: bool = False,
    keys: DataFrame | None = None,
    table_of_keys: bool = False,
    table_deletes: bool = False,
    table_tombstones: bool = False,
    row_index: bool = False,
) -> DataFrame:
    """Add ``_lm_outcome`` to each collapsed change, comparing with ``table`` (``None``: no table yet).

    Matched changes also get the stored row's data file (``_lm_t_file``) and partition values
    (``_lm_t_partition``), for dry runs to count what a batch touches. Stored rows older than the
    batch's truncate (``truncate_before``) count as absent: the truncate removes them.

    Args:
        tombstones: the tombstones to honour (key and sequence columns; a key may have several).
        truncated_before: the newest truncate of earlier batches.
        compare: with a snapshot in the batch, the columns whose values decide whether a snapshot
            row (``_lm_snapshot``) equals the stored row.
        broadcast: the batch is small enough to broadcast: the stored rows are first reduced to
            the batch's keys with a broadcast semi-join, so that the table is scanned once and
            never shuffled (a left join cannot broadcast its preserved side).
        reduce: the batch is too big to broadcast but its keys alone are not: the stored rows and
            the tombstones are first reduced to the batch's keys with a broadcast semi-join, then
            joined with it by a shuffle of those rows only (never of the whole table's keys).
        keys: with ``broadcast`` or ``reduce``, a frame holding the same keys as ``changes`` that
            is cheaper to compute (the batch before it was collapsed: duplicates do no harm to a
            semi-join, and the collapse's shuffle is not run once more for the keys alone).
        table_of_keys: ``table`` holds only the batch's keys already (a log table's merged view
            reduced to them): it is not marked for broadcast, so Spark joins those rows by a
            shuffle unless its own size threshold finds them tiny (forced through the driver, they
            measured 3-10 % slower for batches of 1,500 to 150,000 changes, bench/RESULTS.md,
            "A log batch's stored rows"); ``broadcast`` still reduces ``tombstones`` to the batch's keys.
        table_deletes: ``table`` holds deleted keys too, as rows whose ``_lm_op`` is ``D`` (a log
            table's newest row per key, :func:`lakemerge.table.logview.newest_of_keys`): they count as
            absent.
        table_tombstones: with ``table_deletes``, such a row's sequence is also the key's tombstone
            (on top of ``tombstones``).
        row_index: matched changes also get the stored row's index in its file (``_lm_t_row``), for
            a write that marks it with a deletion vector.
    """
    from pyspark.sql import functions as F

    incoming = F.struct(*[col(c) for c in sequence])
    keys = (changes if keys is None else keys).select(*[col(k) for k in key]) if broadcast or reduce else None
    changes, forgotten = _forgotten(changes, incoming, tombstones, truncated_before, key, sequence, keys, broadcast)
    if table is None:
        return changes.withColumn(C.OUTCOME, _outcome_without_table(forgotten)).drop("_lm_t_tomb")
    stored = _stored(table, key, sequence, partition_by, compare, table_deletes=table_deletes, row_index=row_index)
    if keys is not None and not table_of_keys:
        stored = _of_keys(stored, keys, key, broadcast=broadcast)
    joined = _join_on_key(changes, stored, key, "_lm_t")
    if table_tombstones:
        forgotten = forgotten | F.coalesce(~F.col("_lm_t_found") & (incoming < F.col("_lm_t_seq")), F.lit(False))
    outcome = _outcome(incoming, forgotten, truncate_before, compare)
    return joined.withColumn(C.OUTCOME, outcome).drop("_lm_t_seq", "_lm_t_found", "_lm_t_hash", "_lm_t_tomb")


def _forgotten(
    changes: DataFrame,
    incoming: Column,
    tombstones: DataFrame | None,
    truncated_before: Column | None,
    key: Sequence[str],
    sequence: Sequence[str],
    keys: DataFrame | None,
    broadcast: bool,
) -> tuple[DataFrame, Column]:
    """The changes with their key's newest tombstone (``_lm_t_tomb``) joined, and whether each is
    older than that tombstone or than an earlier batch's truncate: a change the table forgot."""
    from pyspark.sql import functions as F

    forgotten = F.lit(False)
    if tombstones is not None:
        newest = _newest(tombstones, key, sequence, keys, broadcast=broadcast)
        changes = _join_on_key(changes, newest.withColumnRenamed(SEQ, "_lm_t_tomb"), key, "_lm_tb")
        forgotten = F.coalesce(incoming < F.col("_lm_t_tomb"), F.lit(False))
    if truncated_before is not None:
        forgotten = forgotten | (incoming < truncated_before)
    return changes, forgotten


def _outcome_without_table(forgotten: Column) -> Column:
    """A change's outcome when there is no table yet: late when forgotten, else a delete of an
    absent key or an insert."""
    from pyspark.sql import functions as F

    return (
        F.when(forgotten, F.lit(Outcome.LATE.value))
        .when(F.col(C.OP) == "D", F.lit(Outcome.ABSENT.value))
        .otherwise(F.lit(Outcome.INSERT.value))
    )


def _stored(
    table: DataFrame,
    key: Sequence[str],
    sequence: Sequence[str],
    partition_by: Sequence[str],
    compare: Sequence[str],
    *,
    table_deletes: bool,
    row_index: bool,
) -> DataFrame:
    """What the classification reads of each stored row: its key, its sequence (``_lm_t_seq``),
    whether it is a live row (``_lm_t_found``), its file, row index and partition, and the hash of
    the compared values (``_lm_t_hash``)."""
    from pyspark.sql import functions as F

    return table.select(
        *[col(k) for k in key],
        F.struct(*[col(c) for c in sequence]).alias("_lm_t_seq"),
        (F.col(C.OP) == "U" if table_deletes else F.lit(True)).alias("_lm_t_found"),
        F.col("_metadata.file_path").alias(C.STORED_FILE),
        *([F.col("_metadata.row_index").alias(C.STORED_ROW)] if row_index else []),
        F.to_json(F.struct(*[col(c) for c in partition_by])).alias(C.STORED_PARTITION)
        if partition_by
        else F.lit(None).cast("string").alias(C.STORED_PARTITION),
        *([values_hash(compare).alias("_lm_t_hash")] if compare else []),
    )


def _outcome(incoming: Column, forgotten: Column, truncate_before: Column | None, compare: Sequence[str]) -> Column:
    """A change's outcome against the stored row joined to it: a stored row older than the batch's
    truncate counts as absent; an exact tie goes to the change; a snapshot row equal to the stored
    one is unchanged."""
    from pyspark.sql import functions as F

    op = F.col(C.OP)
    found = F.coalesce(F.col("_lm_t_found"), F.lit(False))
    if truncate_before is not None:
        found = found & (F.col("_lm_t_seq") >= truncate_before)
    same = F.lit(False)
    if compare:
        same = F.coalesce(F.col(C.SNAPSHOT), F.lit(False)) & (values_hash(compare) == F.col("_lm_t_hash"))
    return (
        F.when(~found & forgotten, F.lit(Outcome.LATE.value))
        .when(~found & (op == "D"), F.lit(Outcome.ABSENT.value))
        .when(~found, F.lit(Outcome.INSERT.value))
        .when(incoming < F.col("_lm_t_seq"), F.lit(Outcome.LATE.value))
        .when(op == "D", F.lit(Outcome.DELETE.value))
        .when(same, F.lit(Outcome.UNCHANGED.value))
        .otherwise(F.lit(Outcome.UPDATE.value))
    )


def values_hash(columns: Sequence[str]) -> Column:
    """A hash of the values of ``columns`` (nulls included), equal for equal rows of equal types."""
    from pyspark.sql import functions as F

    return F.sha2(F.to_json(F.array(F.struct(*[col(c) for c in columns]))), 256)


def _newest(
    tombstones: DataFrame, key: Sequence[str], sequence: Sequence[str], keys: DataFrame | None, *, broadcast: bool
) -> DataFrame:
    """The newest tombstone sequence of each key of ``tombstones`` (key and sequence columns), as
    :data:`SEQ`; with ``keys`` (broadcast), only of those keys; with ``broadcast`` too, those few
    rows are aggregated in one partition (no shuffle) and marked for broadcasting."""
    from pyspark.sql import functions as F

    if keys is not None:
        tombstones = tombstones.join(F.broadcast(keys), on=list(key), how="left_semi")
    if broadcast:
        tombstones = tombstones.coalesce(1)
    newest = tombstones.groupBy(*[col(k) for k in key]).agg(F.max(F.struct(*[col(c) for c in sequence])).alias(SEQ))
    return F.broadcast(newest) if broadcast else newest


def _of_keys(frame: DataFrame, keys: DataFrame, key: Sequence[str], *, broadcast: bool) -> DataFrame:
    """The rows of ``frame`` whose key is among ``keys`` (broadcast), marked for broadcasting in
    turn with ``broadcast``."""
    from pyspark.sql import functions as F

    found = frame.join(F.broadcast(keys), on=list(key), how="left_semi")
    return F.broadcast(found) if broadcast else found


def _join_on_key(left: DataFrame, right: DataFrame, key: Sequence[str], prefix: str) -> DataFrame:
    """Left join ``right`` (which has the key columns under their names) on the key, dropping its copies."""
    from pyspark.sql import functions as F

    renamed = right
    for i, k in enumerate(key):
        renamed = renamed.withColumnRenamed(k, f"{prefix}_{i}")
    condition = None
    for i, k in enumerate(key):
        part = col(k) == F.col(f"{prefix}_{i}")
        condition = part if condition is None else condition & part
    return left.join(renamed, on=condition, how="left").drop(*[f"{prefix}_{i}" for i in range(len(key))])
