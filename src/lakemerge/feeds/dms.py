"""AWS DMS's S3 target files read into change rows (``envelope = "dms"``, ``csv`` or ``parquet``).

DMS writes a table's folder as full-load files, ``LOAD00000001.csv`` … (hexadecimal counters), and
change files named by time, ``20240301-101010123.csv``. A change file's first column, ``Op``, is
``I``, ``U`` or ``D`` (a delete repeats the row's last values); a full-load file holds inserts.
The endpoint's settings change that shape (``feed.dms``, :class:`lakemerge.config.feed.DmsSettings`):
``IncludeOpForFullLoad`` puts the ``Op`` column in full-load files too, ``CdcInsertsOnly`` and
``CdcInsertsAndUpdates`` leave it out of CSV change files (unless ``IncludeOpForFullLoad``),
``TimestampColumnName`` adds a time column, and ``PreserveTransactions`` writes every table's
changes into ``CDC_TXN-…`` files, which lakemerge refuses.

A full load precedes every change of its table, whatever the file names say (digits sort before
``LOAD``): :func:`is_full_load` tells :mod:`lakemerge.changes.normalize` which files are, and it
orders them first (docs/semantics.md §10 Operation codes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col
from lakemerge.config.feed import FeedConfig, ddl_names
from lakemerge.config.records import RecordsConfig
from lakemerge.errors import InputError
from lakemerge.feeds.files import FeedFile
from lakemerge.feeds.formats import Read, declared_types, read_columnar, read_csv

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The prefix of the files DMS writes with ``PreserveTransactions = true``.
TRANSACTION_FILES = "CDC_TXN-"


def is_full_load(feed: FeedConfig | RecordsConfig, file: FeedFile) -> bool:
    """Whether ``file`` is a full-load file of a DMS feed (``LOAD00000001.csv``, ``.parquet``)."""
    return isinstance(feed, FeedConfig) and feed.envelope == "dms" and file.name.upper().startswith("LOAD")


def read_dms(spark: SparkSession, feed: FeedConfig, files: Sequence[FeedFile]) -> Read:
    """DMS output: change files and full-load files (see the module docstring), the ``Op`` column
    first; full-load files without it are inserts (``I``).

    Raises:
        InputError: a file was written with ``PreserveTransactions``, a headerless CSV feed names
            no columns, or the ``TimestampColumnName`` column is not among the feed's columns.
    """
    for f in files:
        if f.name.startswith(TRANSACTION_FILES):
            raise InputError(
                "a DMS transaction file (PreserveTransactions = true, under CdcPath) holds every table's "
                "changes; lakemerge reads the table's own LOAD and change files: write them without "
                "PreserveTransactions and leave CdcPath out of the feed's location",
                path=f.path,
            )
    load = [f for f in files if is_full_load(feed, f)]
    changes = [f for f in files if not is_full_load(feed, f)]
    read = _read_csv(spark, feed, load, changes) if feed.format == "csv" else _read_parquet(spark, feed, load, changes)
    stamp = feed.dms.timestamp_column_name
    if stamp is None:
        return read
    if stamp not in read.columns:
        raise InputError(
            f"the DMS timestamp column '{stamp}' (feed.dms.timestamp_column_name, DMS's TimestampColumnName) is "
            f"not among the feed's columns ({', '.join(read.columns)}); name it in 'schema' where DMS writes it",
            path=files[0].path,
        )
    return _typed_timestamp(read, feed, stamp)


def _typed_timestamp(read: Read, feed: FeedConfig, stamp: str) -> Read:
    """DMS writes its timestamp column as text (``yyyy-MM-dd HH:mm:ss.SSSSSS``): read it as a
    timestamp unless the feed declares its type."""
    from pyspark.sql import functions as F

    if stamp in declared_types(feed):
        return read
    text = col(stamp).cast("string")
    typed = text.try_cast("timestamp")
    bad = F.when(
        text.isNotNull() & typed.isNull(),
        F.format_string(f"cannot convert column '{stamp}' value '%s' to timestamp", text),
    )
    frame = read.frame.withColumn(stamp, typed).withColumn(C.MALFORMED, F.coalesce(F.col(C.MALFORMED), bad))
    return Read(frame, read.columns, read.header_lines)


def _read_csv(spark: SparkSession, feed: FeedConfig, load: Sequence[FeedFile], changes: Sequence[FeedFile]) -> Read:
    from pyspark.sql import functions as F

    op = feed.op_column or "Op"
    settings = feed.dms
    base = list(ddl_names(feed.schema_ddl)) if feed.schema_ddl else list(feed.columns)
    if not base and not feed.header:
        raise InputError(
            "a DMS csv feed needs 'schema' (or 'columns') naming the table's columns, in DMS's order",
            path=(load or changes)[0].path,
        )
    parts: list[DataFrame] = []
    names: list[str] = []
    header_lines = 0
    for group, has_op, hint in (
        (load, settings.load_op, _load_hint(settings.load_op)),
        (changes, settings.changes_op, _changes_hint(settings.changes_op)),
    ):
        if not group:
            continue
        paths = [f.path for f in group]
        read = (
            read_csv(spark, feed, paths, names=[op, *base] if has_op else base)
            if base
            else read_csv(spark, feed, paths)
        )
        frame = read.frame if op in read.columns else read.frame.withColumn(op, F.lit("I"))
        reason = F.concat(F.col(C.MALFORMED), F.lit(hint))
        parts.append(frame.withColumn(C.MALFORMED, F.when(F.col(C.MALFORMED).isNotNull(), reason)))
        names += [c for c in read.columns if c != op and c not in names]
        header_lines = read.header_lines
    return Read(_union(parts), (op, *names), header_lines)


def _load_hint(has_op: bool) -> str:
    if has_op:
        return (
            " (with feed.dms.include_op_for_full_load = true a DMS full-load file starts with the Op column, "
            "then the columns of 'schema')"
        )
    return (
        " (a DMS full-load file holds the columns of 'schema'; one written with IncludeOpForFullLoad starts "
        "with the Op column: set feed.dms.include_op_for_full_load = true)"
    )


def _changes_hint(has_op: bool) -> str:
    if has_op:
        return (
            " (a DMS change file starts with the Op column, then the columns of 'schema'; with CdcInsertsOnly "
            "or CdcInsertsAndUpdates and without IncludeOpForFullLoad it has no Op column: set "
            "feed.dms.cdc_inserts_only or feed.dms.cdc_inserts_and_updates)"
        )
    return (
        " (with feed.dms.cdc_inserts_only or cdc_inserts_and_updates a DMS change file has no Op column, "
        "unless DMS also had IncludeOpForFullLoad: then set feed.dms.include_op_for_full_load = true)"
    )


def _read_parquet(spark: SparkSession, feed: FeedConfig, load: Sequence[FeedFile], changes: Sequence[FeedFile]) -> Read:
    """Parquet files name their columns: the ``Op`` column is found by name (DMS writes it in
    change files, and in full-load files with ``IncludeOpForFullLoad``)."""
    from pyspark.sql import functions as F

    op = feed.op_column or "Op"
    parts: list[DataFrame] = []
    names: list[str] = []
    for group in (load, changes):
        if group:
            read = read_columnar(spark, "parquet", [f.path for f in group])
            parts.append(read.frame if op in read.columns else read.frame.withColumn(op, F.lit("I")))
            names += [c for c in read.columns if c != op and c not in names]
    return Read(_union(parts), (op, *names), 0)


def _union(parts: Sequence[DataFrame]) -> DataFrame:
    frame = parts[0]
    for other in parts[1:]:
        frame = frame.unionByName(other, allowMissingColumns=True)
    return frame
