"""Whether a batch reads the table within key ranges, and which: only where the ranges pay.

A batch that can touch only its own keys (no truncate, no snapshot, no SCD2 history) restricts its
reads of the table, and its MERGE, to a handful of key ranges covering its keys
(:mod:`lakemerge.table.prune`), when the stored files' key statistics say that the ranges leave out
enough of the stored bytes; a table smaller than :data:`lakemerge.table.prune.MIN_PRUNED_BYTES` is
read whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakemerge.config import TableConfig
from lakemerge.table import prune, stats, store
from lakemerge.table.prune import KeyRanges

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def small_table(spark: SparkSession, table: TableConfig) -> bool:
    """Whether the table (with its log, in ``log`` mode) holds fewer than
    :data:`prune.MIN_PRUNED_BYTES`, by Delta's commit checksums: such a table is read whole."""
    paths = [table.path, table.log_table] if table.log_mode else [table.path]
    sizes = [stats.table_bytes(spark, path) for path in paths]
    return all(size is not None for size in sizes) and sum(s or 0 for s in sizes) < prune.MIN_PRUNED_BYTES


def stored_files(spark: SparkSession, table: TableConfig) -> list[tuple[Any, Any, int]] | None:
    """Each data file of the Delta tables that hold ``table``'s rows (the table, and in ``log`` mode
    its log where they exist) with its smallest and largest key and its size, from Delta's log
    (:func:`lakemerge.table.stats.file_key_bounds`); ``None`` when a table's statistics cannot tell,
    or the key has several columns."""
    if len(table.key) != 1:
        return None
    paths = (
        [table.path]
        if not table.log_mode
        else [p for p in (table.path, table.log_table) if store.table_exists(spark, p)]
    )
    files: list[tuple[Any, Any, int]] = []
    for path in paths:
        found = stats.file_key_bounds(spark, path, table.key[0])
        if found is None:
            return None
        files.extend(found)
    return files


def paying(files: Sequence[tuple[Any, Any, int]] | None, ranges: KeyRanges | None) -> KeyRanges | None:
    """``ranges`` when they leave out at least :data:`prune.MIN_SKIPPED_SHARE` of the bytes of the
    stored ``files`` (:func:`stored_files`), or when the statistics cannot tell (``files`` is
    ``None``); else ``None``: a predicate that skips nothing only costs the batch."""
    if ranges is None:
        return None
    if files is None:
        return ranges
    share = prune.skipped_share(files, ranges)
    return ranges if share is not None and share >= prune.MIN_SKIPPED_SHARE else None
