"""What Delta's log says about a table's files, read without reading the data: the table's size,
each file's bounds of a key column, and reads of the files a version's checksum lists (left out
where their bounds miss a batch's key ranges)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lakemerge.spark.jvm import jclass, scala_seq
from lakemerge.table.store import latest_snapshot, properties_of, read_version

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructField


def table_bytes(spark: SparkSession, path: str) -> int | None:
    """The bytes of the data files of the table's latest version, from the checksum Delta writes
    with each commit (no Spark job): 0 when there is no table, ``None`` when that version has no
    checksum."""
    snapshot = latest_snapshot(spark, path)
    if snapshot.version() < 0:
        return 0
    found = snapshot.checksumOpt()
    return int(found.get().tableSizeBytes()) if found.isDefined() else None


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
        return _statistics_bounds(spark, snapshot, column) if job else None
    return _bounds_of([(size, stats) for _, size, stats in listed], bounded.name, bounded.dataType)


def _bounded_field(snapshot: Any, column: str) -> StructField | None:
    """The field of ``column`` in ``snapshot``'s schema when the statistics of its files bound its
    values (see :func:`file_key_bounds`), else ``None``."""
    from pyspark.sql import types as T

    if properties_of(snapshot).get("delta.columnMapping.mode", "none") != "none":
        return None
    partitions = snapshot.metadata().partitionColumns().iterator()
    while partitions.hasNext():
        if str(partitions.next()).lower() == column.lower():
            return None
    schema = T.StructType.fromJson(json.loads(str(snapshot.schema().json())))
    fields = [f for f in schema.fields if f.name.lower() == column.lower()]
    if not fields or not isinstance(fields[0].dataType, (T.IntegralType, T.DecimalType, T.DateType)):
        return None
    return fields[0]


def _checksum_files(snapshot: Any) -> list[tuple[Any, int, str | None]] | None:
    """Each data file of ``snapshot`` (Delta's ``AddFile``), with its size and statistics (JSON),
    from the version's checksum; ``None`` when the checksum does not list the files (none written,
    or more files than Delta lists there)."""
    files = listed_files(snapshot)
    if files is None:
        return None
    listed: list[tuple[Any, int, str | None]] = []
    each = files.iterator()
    while each.hasNext():
        add = each.next()
        stats = add.stats()
        listed.append((add, int(add.size()), str(stats) if stats is not None else None))
        if len(listed) > MAX_BOUNDED_FILES:
            return None
    return listed


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


def _statistics_bounds(spark: SparkSession, snapshot: Any, column: str) -> list[tuple[Any, Any, int]] | None:
    """:func:`file_key_bounds` by one Spark job over the snapshot's file list."""
    from pyspark.sql import functions as F
    from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame

    stats = ClassicFrame(snapshot.withStats(), spark)
    bounds = {}
    for side in ("minValues", "maxValues"):
        found = [f for f in stats.schema["stats"].dataType.fields if f.name == side]  # type: ignore[attr-defined]
        fields = [f for f in found[0].dataType.fields if f.name.lower() == column.lower()] if found else []
        if not fields:
            return None
        bounds[side] = F.col(f"stats.{side}").getField(fields[0].name)
    rows = stats.select(bounds["minValues"], bounds["maxValues"], F.col("size")).limit(MAX_BOUNDED_FILES + 1).collect()
    if len(rows) > MAX_BOUNDED_FILES:
        return None
    return [(row[0], row[1], int(row[2])) for row in rows]


#: :func:`file_key_bounds` gives up on tables of more files than this (a few MB of statistics).
MAX_BOUNDED_FILES = 100_000


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
        return read_version(spark, path, int(snapshot.version())), snapshot, False
    return found, snapshot, True


def _read_files(
    spark: SparkSession, snapshot: Any, within: tuple[str, Callable[[Any, Any], bool]] | None
) -> DataFrame | None:
    """``snapshot``'s files as its checksum lists them (see :func:`read_listed`), or ``None``."""
    from pyspark.sql import DataFrame

    files = listed_files(snapshot) if snapshot.version() >= 0 else None
    if files is None:
        return None
    if within is not None:
        files = _files_within(spark, snapshot, files, *within)
    none = jclass(spark, "scala.Option").empty()
    return DataFrame(snapshot.deltaLog().createDataFrame(snapshot, files, False, none), spark)


def lists_no_files(spark: SparkSession, path: str) -> bool:
    """Whether the checksum of the table's latest version lists no data file (a ``log`` table's
    table before its first compaction)."""
    snapshot = latest_snapshot(spark, path)
    files = listed_files(snapshot) if snapshot.version() >= 0 else None
    return files is not None and int(files.size()) == 0


def read_if_empty(spark: SparkSession, path: str) -> tuple[DataFrame | None, int]:
    """The table at ``path`` as :func:`read_listed` reads it when its latest version's checksum lists
    no data file (a ``log`` table's table before its first compaction: an empty table read through
    Delta costs a Spark job for Delta's file skipping on every read), else ``None``; and that
    version, for the caller to read it by (:func:`lakemerge.table.store.read_version`)."""
    from pyspark.sql import DataFrame

    snapshot = latest_snapshot(spark, path)
    version = int(snapshot.version())
    files = listed_files(snapshot) if version >= 0 else None
    if files is None or int(files.size()) != 0:
        return None, version
    none = jclass(spark, "scala.Option").empty()
    return DataFrame(snapshot.deltaLog().createDataFrame(snapshot, files, False, none), spark), version


def _files_within(
    spark: SparkSession, snapshot: Any, files: Any, column: str, overlaps: Callable[[Any, Any], bool]
) -> Any:
    """``files`` (a Scala sequence of ``snapshot``'s ``AddFile``) but those whose statistics bound
    ``column`` to values that ``overlaps`` refuses (see :func:`read_listed`); ``files`` itself when
    the statistics cannot bound the column or leave out no file."""
    bounded = _bounded_field(snapshot, column)
    listed = _checksum_files(snapshot) if bounded is not None else None
    if bounded is None or listed is None:
        return files
    bounds = _bounds_of([(size, stats) for _, size, stats in listed], bounded.name, bounded.dataType)
    if bounds is None:
        return files
    kept = [
        add
        for (add, _, _), (low, high, _) in zip(listed, bounds, strict=True)
        if low is None or high is None or overlaps(low, high)
    ]
    return files if len(kept) == len(listed) else scala_seq(spark, kept)


def listed_rows(snapshot: Any) -> int | None:
    """The rows of ``snapshot``'s version, from the statistics of the files its checksum lists (no
    Spark job); ``None`` when it lists none or a file's statistics do not count its rows."""
    listed = _checksum_files(snapshot) if snapshot.version() >= 0 else None
    if listed is None:
        return None
    counted = [json.loads(stats).get("numRecords") if stats is not None else None for _, _, stats in listed]
    rows = [n for n in counted if isinstance(n, int)]
    return sum(rows) if len(rows) == len(counted) else None


def listed_files(snapshot: Any) -> Any | None:
    """The data files (a Scala sequence of Delta's ``AddFile``) of ``snapshot``'s version as its
    checksum lists them; ``None`` when it lists none (no checksum, more files than Delta lists, a
    schema change in that commit) or a list that disagrees with its own file count (Delta drops
    such a list; a checksum from another writer may not)."""
    found = snapshot.checksumOpt()
    if not found.isDefined():
        return None
    checksum = found.get()
    files = checksum.allFiles()
    if not files.isDefined() or int(files.get().size()) != int(checksum.numFiles()):
        return None
    return files.get()
