"""Full-snapshot feeds (docs/semantics.md §5 Full snapshots, docs/history.md).

A snapshot feed's files hold every row of the table (or of the partitions they cover), not changes.
This module decides which pending files form the next snapshot, checks that snapshots arrive in
order, and turns the keys a snapshot lacks into deletes as of the snapshot's greatest sequence.

Snapshot positions (what orders snapshots) are kept in each batch's commit record as
``{"snapshots": {"<feed index>": {"<scope>": position}}}``, where the scope is ``*`` for a
whole-table snapshot and the partition's values as JSON for a partitioned one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakemerge import columns as C
from lakemerge.columns import col, quoted
from lakemerge.config.feed import FeedConfig
from lakemerge.config.table import TableConfig
from lakemerge.errors import InputError
from lakemerge.feeds.files import FeedFile

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The scope key of a whole-table snapshot's position.
WHOLE = "*"


@dataclass(frozen=True)
class Pending:
    """The next snapshot of a feed: its files and its position (``None`` for ``column`` order
    until the files are read)."""

    files: tuple[FeedFile, ...]
    position: Any


def next_snapshot(spark: SparkSession, table: TableConfig, feed: FeedConfig, pending: Sequence[FeedFile]) -> Pending:
    """The oldest snapshot among ``pending`` (files in file order): the files sharing the smallest
    name number, or the oldest file by modification time, or the file whose ``snapshot_column``
    holds the smallest maximum (one aggregate over the pending files).

    Raises:
        InputError: a file's name carries no number (``name_number`` order).
    """
    if feed.snapshot_order == "name_number":
        for f in pending:
            if f.name_number is None:
                raise InputError(
                    "snapshot file name has no number after its last '_' (e.g. products_1428415316.csv), "
                    "which orders snapshots (snapshot_order = 'name_number')",
                    path=f.path,
                )
        first = min(f.name_number for f in pending if f.name_number is not None)
        return Pending(tuple(f for f in pending if f.name_number == first), first)
    if feed.snapshot_order == "mtime":
        oldest = min(pending, key=lambda f: (f.modified, f.path))
        return Pending((oldest,), oldest.modified)
    maxima = column_maxima(spark, table, feed, pending)
    oldest = min(pending, key=lambda f: (maxima[f.path] is None, _sortable(maxima[f.path]), f.path))
    return Pending((oldest,), maxima[oldest.path])


def column_maxima(
    spark: SparkSession, table: TableConfig, feed: FeedConfig, files: Sequence[FeedFile]
) -> dict[str, Any]:
    """The greatest value of ``feed.snapshot_column`` in each file (typed as the feed types it)."""
    from pyspark.sql import functions as F

    from lakemerge.changes.normalize import normalize
    from lakemerge.feeds.readers import read_feed

    column = feed.snapshot_column
    assert column is not None
    raw = read_feed(spark, feed, files)
    if column not in raw.columns:
        names = ", ".join(raw.columns)
        raise InputError(f"snapshot_column '{column}' is not in the feed ({names})", path=files[0].path)
    changes = normalize(spark, table, raw, files, feed=feed)
    rows = changes.frame.filter(F.col(C.ERROR).isNull()).groupBy(C.FILE).agg(F.max(col(column)).alias("m")).collect()
    found = {int(r[C.FILE]): _plain(r["m"]) for r in rows}
    return {f.path: found.get(i) for i, f in enumerate(files)}


def check_order(
    feed_index: int, snapshot: Pending, positions: dict[str, Any], applied: dict[str, Any] | None, feed: FeedConfig
) -> None:
    """Fail unless each scope's new position is newer than the last one applied.

    Raises:
        InputError: naming the snapshot's file, the scope and both positions; nothing is applied.
    """
    for scope, position in positions.items():
        last = (applied or {}).get(scope)
        if last is None or position is None:
            continue
        if _sortable(position) <= _sortable(last):
            where = "" if scope == WHOLE else f" of partition {scope}"
            raise InputError(
                f"full snapshot{where} at position {position!r} ({feed.snapshot_order}) is not newer than the "
                f"snapshot applied last, at {last!r}: snapshots must be applied in order, and a snapshot's files "
                f"must arrive together; nothing was applied (feed {feed_index})",
                path=snapshot.files[0].path,
            )


def scope_positions(
    table: TableConfig, feed: FeedConfig, snapshot: Pending, rows: DataFrame, position: Any
) -> dict[str, Any]:
    """The position of the snapshot per scope it covers: ``{"*": position}``, or one entry per
    partition its rows fall in (a small action)."""
    from pyspark.sql import functions as F

    if feed.snapshot_scope == "table":
        return {WHOLE: position}
    partition = F.to_json(F.struct(*[col(c) for c in table.partition_by]))
    return {str(r[0]): position for r in rows.select(partition).distinct().collect()}


def absent_deletes(
    table: TableConfig,
    feed: FeedConfig,
    valid: DataFrame,
    stored: DataFrame | None,
    *,
    data_columns: Sequence[str],
) -> DataFrame:
    """A delete, as of the snapshot, for each key in the snapshot's scope that the table holds (in
    SCD2 tables: with a current version) or that another feed of the batch changes, and that the
    snapshot lacks. The deletes sort before every real change of the same sequence (file index -1),
    so a real change wins an exact tie.

    Raises:
        InputError: the snapshot has no valid row, so its as-of sequence is unknown.
    """
    from pyspark.sql import functions as F

    from lakemerge.config.table import CURRENT

    keys = list(table.key)
    scope = list(table.partition_by) if feed.snapshot_scope == "partitions" else []
    sequence = table.sequence_columns
    snap = valid.filter(F.coalesce(F.col(C.SNAPSHOT), F.lit(False)))
    seq_struct = F.struct(*[col(c) for c in sequence])
    as_of = snap.groupBy(*[col(c) for c in scope]).agg(F.max(seq_struct).alias("_lm_as_of"))
    carried = list(dict.fromkeys([*keys, *table.partition_by]))
    candidates = valid.filter(~F.coalesce(F.col(C.SNAPSHOT), F.lit(False))).select(*[col(c) for c in carried])
    if stored is not None:
        held = stored.filter(F.col(CURRENT)) if table.scd2 else stored
        candidates = candidates.unionByName(held.select(*[col(c) for c in carried]))
    candidates = candidates.dropDuplicates(keys)
    if scope:
        condition = None
        for c in scope:
            part = candidates[c].eqNullSafe(as_of[c])
            condition = part if condition is None else condition & part
        scoped = candidates.join(as_of, on=condition, how="inner").select(
            *[candidates[quoted(c)] for c in carried], as_of["_lm_as_of"]
        )
    else:
        scoped = candidates.crossJoin(as_of)
    lacking = scoped.join(snap.select(*[col(k) for k in keys]).distinct(), on=keys, how="left_anti")
    others = [c for c in data_columns if c not in carried and c not in sequence]
    types = {f.name: f.dataType for f in valid.schema.fields}
    return lacking.select(
        *[col(c) for c in carried],
        *[F.col("_lm_as_of")[c].alias(c) for c in sequence],
        *[F.lit(None).cast(types[c]).alias(c) for c in others],
        F.lit("D").alias(C.OP),
        F.lit(None).cast("string").alias(C.ERROR),
        F.lit(-1).cast(types[C.FILE]).alias(C.FILE),
        F.lit(0).cast(types[C.BLOCK]).alias(C.BLOCK),
        F.lit(0).cast(types[C.ROW_ID]).alias(C.ROW_ID),
        F.lit(False).alias(C.SNAPSHOT),
        F.lit(True).alias(C.SNAPSHOT_ABSENT),
    )


def _plain(value: Any) -> Any:
    """A JSON-ready form of a position value (dates and times as ISO strings)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return json.loads(json.dumps(value, default=str))


def _sortable(value: Any) -> tuple[int, Any]:
    """Numbers before strings, so positions of one feed (always one kind) compare naturally."""
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))
