"""What Delta's log says about a table's files, read without reading the data: the table's size,
each file's bounds of a key column, and reads of the files a version's checksum lists (left out
where their bounds miss a batch's key ranges)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lakemerge.table.snapshot import MAX_BOUNDED_FILES, ListedFile, Snapshot
from lakemerge.table.snapshots import latest_snapshot
from lakemerge.table.store import read_version

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructField


def table_bytes(spark: SparkSession, path: str) -> int | None:
    """The bytes of the data files of the table's latest version, from the checksum Delta writes
    with each commit (no Spark job): 0 when there is no table, ``None`` when that version has no
    checksum."""
    return latest_snapshot(spark, path).table_bytes()


def file_key_bounds(
    spark: SparkSession, path: str, column: str, *, job: bool = True
) -> list[tuple[Any, Any, int]] | None:
    """Each data file of the table's latest version: the smallest and largest value of ``column``
    in its statistics (``None`` when it has none) and its size; read from Delta's log, never from
    the data. A table of few files (Delta keeps the list of a version's files, with their
    statistics, in the checksum it writes beside the commit: up to 50 files by default) is read from
    that checksum without a Spark job; else one small job over the snapshot's file list, whose
    parsed statistics Delta's own file skipping reuses. ``None`` when statistics cannot be trusted
    to bound the column: a type whose statistics Delta truncates or rounds (only integers,
    decimals and dates are kept), a column without statistics, a partition column, column mapping
    (statistics under physical names), or more than :data:`MAX_BOUNDED_FILES` files; without
    ``job``, also where the checksum does not list the files."""
    snapshot = latest_snapshot(spark, path)
    bounded = _bounded_field(snapshot, column)
    if bounded is None:
        return None
    listed = _checksum_files(snapshot)
    if listed is None:
        return snapshot.file_bounds(column, limit=MAX_BOUNDED_FILES) if job else None
    return _bounds_of([(f.size, f.stats) for f in listed], bounded.name, bounded.dataType)


def _bounded_field(snapshot: Snapshot, column: str) -> StructField | None:
    """The field of ``column`` in ``snapshot``'s schema when the statistics of its files bound its
    values (see :func:`file_key_bounds`), else ``None``."""
    from pyspark.sql import types as T

    if snapshot.properties().get("delta.columnMapping.mode", "none") != "none":
        return None
    if column.lower() in (c.lower() for c in snapshot.partition_columns()):
        return None
    schema = snapshot.schema()
    fields = [f for f in schema.fields if f.name.lower() == column.lower()]
    if not fields or not isinstance(fields[0].dataType, (T.IntegralType, T.DecimalType, T.DateType)):
        return None
    return fields[0]


def _checksum_files(snapshot: Snapshot) -> Sequence[ListedFile] | None:
    """Each data file of ``snapshot`` with its size and statistics, from the version's checksum;
    ``None`` when the checksum does not list the files (none written, or more files than Delta
    lists there, or more than :data:`MAX_BOUNDED_FILES`)."""
    files = snapshot.listed()
    if files is None or len(files) > MAX_BOUNDED_FILES:
        return None
    return files


def _bounds_of(listed: Sequence[tuple[int, str | None]], name: str, kind: Any) -> list[tuple[Any, Any, int]] | None:
    """Each file's bounds of column ``name`` (of type ``kind``) from its statistics as Delta writes
    them (JSON: numbers, and dates as ISO strings); ``None`` when no file has statistics of the
    column (it is not among the columns Delta collects them for, or there are no files to tell)."""
    import datetime
    import decimal

    from pyspark.sql import types as T

    def value(found: Any) -> Any:
        if found is None:
            return None
        if isinstance(kind, T.DateType):
            return datetime.date.fromisoformat(str(found))
        return found

    bounds: list[tuple[Any, Any, int]] = []
    known = False
    for size, stats in listed:
        parsed = json.loads(stats, parse_float=decimal.Decimal) if stats else {}
        low = value((parsed.get("minValues") or {}).get(name))
        high = value((parsed.get("maxValues") or {}).get(name))
        known = known or (low is not None and high is not None)
        bounds.append((low, high, size))
    if not known and any(stats for _, stats in listed):
        # Files have statistics, none of them of this column: Delta does not collect them for it.
        return None
    return bounds


def read_listed(
    spark: SparkSession, path: str, *, within: tuple[str, Callable[[Any, Any], bool]] | None = None
) -> DataFrame | None:
    """The table as of its latest version now, read from the list of that version's files in the
    checksum Delta writes beside each commit (Delta lists them there for tables of fewer than 50
    files); ``None`` when the checksum does not list them: read the version with
    :func:`read_pinned` then.

    ``within``: (column, overlaps): leave out the files whose statistics bound ``column`` to values
    from ``low`` to ``high`` for which ``overlaps(low, high)`` is false, as Delta's file skipping
    would for a predicate that only such values can meet (a batch's key ranges), but without its
    Spark job over the file list. Files without such statistics are read.

    Reading a version through Delta reconstructs the version's state from its log first (a Spark
    job over the commits since the last checkpoint, and a cached frame of the result) when that
    version was not read before: a table that gains a version with every batch paid it on every
    batch, 0.1-0.25 s of a 1.3 s batch (bench/RESULTS.md). These files are read by Delta's own
    reader, through the file index Delta's MERGE uses for the files it touches. Like
    :func:`read_pinned`, a read of fixed files, which the batch's writes to ``path`` leave alone."""
    return _read_files(spark, latest_snapshot(spark, path), within)


def read_snapshot(
    spark: SparkSession, path: str, *, within: tuple[str, Callable[[Any, Any], bool]] | None = None
) -> tuple[DataFrame, Any, bool]:
    """The table as of its latest version now, that version's snapshot (a JVM object, for a write
    that commits on it), and whether it was read as :func:`read_listed` reads it (``within``
    applied), as it is where the checksum lists the version's files; else it is read through Delta
    at that version (filter it by the ranges of ``within`` for Delta's file skipping then)."""
    snapshot = latest_snapshot(spark, path)
    found = _read_files(spark, snapshot, within)
    if found is None:
        return read_version(spark, path, snapshot.version), snapshot, False
    return found, snapshot, True


def _read_files(
    spark: SparkSession, snapshot: Snapshot, within: tuple[str, Callable[[Any, Any], bool]] | None
) -> DataFrame | None:
    """``snapshot``'s files as its checksum lists them (see :func:`read_listed`), or ``None``."""
    files = snapshot.listed()
    if files is None:
        return None
    if within is not None:
        files = _files_within(snapshot, files, *within)
    return snapshot.read_files(files)


def lists_no_files(spark: SparkSession, path: str) -> bool:
    """Whether the checksum of the table's latest version lists no data file (a ``log`` table's
    table before its first compaction)."""
    files = latest_snapshot(spark, path).listed()
    return files is not None and len(files) == 0


def read_if_empty(spark: SparkSession, path: str) -> tuple[DataFrame | None, int]:
    """The table at ``path`` as :func:`read_listed` reads it when its latest version's checksum lists
    no data file (a ``log`` table's table before its first compaction: an empty table read through
    Delta costs a Spark job for Delta's file skipping on every read), else ``None``; and that
    version, for the caller to read it by (:func:`lakemerge.table.store.read_version`)."""
    snapshot = latest_snapshot(spark, path)
    files = snapshot.listed()
    if files is None or len(files) != 0:
        return None, snapshot.version
    return snapshot.read_files(files), snapshot.version


def _files_within(
    snapshot: Snapshot, files: Sequence[ListedFile], column: str, overlaps: Callable[[Any, Any], bool]
) -> Sequence[ListedFile]:
    """``files`` (``snapshot``'s listed files) but those whose statistics bound ``column`` to
    values that ``overlaps`` refuses (see :func:`read_listed`); ``files`` itself when the
    statistics cannot bound the column or leave out no file."""
    bounded = _bounded_field(snapshot, column)
    if bounded is None or len(files) > MAX_BOUNDED_FILES:
        return files
    bounds = _bounds_of([(f.size, f.stats) for f in files], bounded.name, bounded.dataType)
    if bounds is None:
        return files
    kept = [
        f for f, (low, high, _) in zip(files, bounds, strict=True) if low is None or high is None or overlaps(low, high)
    ]
    return files if len(kept) == len(files) else kept


def listed_rows(snapshot: Snapshot) -> int | None:
    """The rows of ``snapshot``'s version, from the statistics of the files its checksum lists (no
    Spark job); ``None`` when it lists none or a file's statistics do not count its rows."""
    listed = _checksum_files(snapshot)
    if listed is None:
        return None
    counted = [json.loads(f.stats).get("numRecords") if f.stats is not None else None for f in listed]
    rows = [n for n in counted if isinstance(n, int)]
    return sum(rows) if len(rows) == len(counted) else None
