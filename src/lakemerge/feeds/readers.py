"""Read change files of every supported format into one DataFrame with provenance columns.

Each reader returns rows holding the feed's data columns plus:

- ``_lm_file``: the file's index in file order,
- ``_lm_block`` and ``_lm_rowid``: together they order rows as they stand in their file, whatever
  way Spark splits big files or packs small ones into one task (a split's start offset, then an
  id increasing within the task),
- ``_lm_raw``: the raw record (delimited formats) for error messages,
- ``_lm_malformed``: why the reader could not parse the row, or null.

Delimited formats read every field as a string; typing happens later so that a value that does
not convert is reported with its file and row instead of silently becoming null.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.config.feed import FeedConfig
from lakemerge.errors import InputError
from lakemerge.feeds import debezium, dms, formats
from lakemerge.feeds.files import FeedFile, spark_file_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class RawFeed:
    """Rows read from a batch's files, before typing and validation.

    Attributes:
        frame: data columns plus the provenance columns described in the module docstring.
        columns: the data columns, in the feed's order.
        header_lines: lines before the first record in each file (for row numbers in errors).
        row_data: whether any record holds a row; false for a change feed's files of events that
            change no row (Debezium's tombstones, truncates, heartbeats, schema changes).
        sometimes: the columns some records lack (:class:`lakemerge.feeds.formats.Read`).
    """

    frame: DataFrame
    columns: tuple[str, ...]
    header_lines: int
    row_data: bool = True
    sometimes: tuple[str, ...] = ()

    def completed(self, names: Sequence[str]) -> RawFeed:
        """With a null column for each of ``names`` the records lack, when no record holds a row
        (the columns a batch needs exist then, and take the table's types); else unchanged."""
        from pyspark.sql import functions as F

        missing = [n for n in names if n not in self.columns]
        if self.row_data or not missing:
            return self
        frame = self.frame.select("*", *[F.lit(None).alias(n) for n in missing])
        return replace(self, frame=frame, columns=(*self.columns, *missing))


def read_feed(spark: SparkSession, feed: FeedConfig, files: Sequence[FeedFile], *, offset: int = 0) -> RawFeed:
    """Read ``files`` according to ``feed``; ``files`` must be in file order, and their indexes in
    the batch start at ``offset`` (a table with several feeds reads them one after another)."""
    if not files:
        raise InputError("no change file to read")
    paths = [f.path for f in files]
    if feed.envelope == "dms":
        raw = dms.read_dms(spark, feed, files)
    elif feed.format == "debezium":
        raw = debezium.read_debezium(spark, feed, paths)
    elif feed.format == "csv":
        raw = formats.read_csv(spark, feed, paths)
    elif feed.format == "text":
        raw = formats.read_text(spark, feed, paths)
    elif feed.format == "json":
        raw = formats.read_json(spark, feed, paths)
    else:
        raw = formats.read_columnar(spark, feed.format, paths)
    for name in raw.columns:
        if name.startswith(C.RESERVED_PREFIX):
            raise InputError(
                f"column '{name}' uses the prefix '{C.RESERVED_PREFIX}' reserved for lakemerge", path=paths[0]
            )
    formats.check_names(raw.columns, paths[0])
    return RawFeed(
        frame=_with_file_index(raw.frame, paths, offset),
        columns=raw.columns,
        header_lines=raw.header_lines,
        row_data=raw.row_data,
        sometimes=raw.sometimes,
    )


def _with_file_index(frame: DataFrame, paths: Sequence[str], offset: int = 0) -> DataFrame:
    from pyspark.sql import functions as F

    spark = frame.sparkSession
    index = F.create_map(
        *[x for i, p in enumerate(paths) for x in (F.lit(spark_file_path(spark, p)), F.lit(i + offset))]
    )
    return frame.withColumn(C.FILE, index[F.col(f"{C.FILE_META}.file_path")]).drop(C.FILE_META)
