"""Read change files of each plain format (csv, text, json, parquet, orc, avro) into rows with their
position in the file; :mod:`lakemerge.feeds.readers` gives each row its file's index.

Delimited formats read every field as a string; typing happens later so that a value that does
not convert is reported with its file and row instead of silently becoming null.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakemerge import columns as C
from lakemerge.columns import col, file_metadata, quoted
from lakemerge.config.feed import FeedConfig
from lakemerge.config.records import RecordsConfig
from lakemerge.errors import ConfigError, InputError, first_line
from lakemerge.feeds import utf8
from lakemerge.feeds.files import literal
from lakemerge.storage.filesystems import filesystem

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

_CORRUPT = "_lm_corrupt"


def check_names(names: Sequence[str], path: str) -> None:
    lowered = [n.lower() for n in names]
    dupes = sorted({n for n in names if lowered.count(n.lower()) > 1})
    if dupes:
        raise InputError(f"duplicate column names {dupes} (names are compared ignoring case)", path=path)


def position(frame: DataFrame, *, row_index: bool = False) -> DataFrame:
    from pyspark.sql import functions as F

    if row_index:
        return frame.withColumn(C.BLOCK, F.lit(0).cast("long")).withColumn(C.ROW_ID, F.col(f"{C.FILE_META}.row_index"))
    return frame.withColumn(C.BLOCK, F.col(f"{C.FILE_META}.file_block_start")).withColumn(
        C.ROW_ID, F.monotonically_increasing_id()
    )


def _first_line(spark: SparkSession, path: str) -> str | None:
    """The first non-empty line of one file (a one-row action, used to name columns), bytes that
    are not UTF-8 decoded as U+FFFD (as Spark's JVM decodes them; its bytes reach a Spark Connect
    client as they are, which Python's decoding would refuse)."""
    from pyspark.sql import functions as F

    lines = spark.read.text(literal(path)).filter(F.length("value") > 0).limit(1)
    rows = lines.select(F.col("value").cast("binary")).collect()
    return bytes(rows[0][0]).decode("utf-8", "replace") if rows else None


def _data_columns(spark: SparkSession, feed: FeedConfig, paths: Sequence[str], count_fields: object) -> list[str]:
    if feed.schema_ddl:
        return [f.name for f in ddl_schema(feed.schema_ddl).fields]  # (Spark's reason for a bad type)
    if feed.columns:
        return list(feed.columns)
    if feed.format == "csv" and feed.header and feed.encoding.upper().replace("-", "") != "UTF8":
        # Another encoding: the CSV reader itself decodes the header.
        for path in paths:
            names = list(_csv_reader(spark, feed).option("header", True).csv(literal(path)).columns)
            if names and names != ["_c0"]:
                return [n.lstrip("\ufeff").strip() for n in names]
        return []
    line = None
    for path in paths:
        line = _first_line(spark, path)
        if line is not None:
            break
    if line is None:
        return []
    assert callable(count_fields)
    fields: list[str] = count_fields(line)
    if feed.header:
        return [f.lstrip("\ufeff").strip() for f in fields]
    return [f"c{i}" for i in range(len(fields))]


def declared_types(feed: FeedConfig | RecordsConfig) -> dict[str, str]:
    """The Spark SQL type the feed declares for each column: its ``schema``'s, then ``types``."""
    declared = ddl_schema(feed.schema_ddl).fields if feed.schema_ddl else []
    return {**{f.name: f.dataType.simpleString() for f in declared}, **feed.types}


def ddl_schema(ddl: str) -> StructType:
    """The schema a Spark DDL string declares.

    Raises:
        ConfigError: naming Spark's reason (an unknown type, a syntax error and where)."""
    from pyspark.sql.types import StructType

    try:
        schema = StructType.fromDDL(ddl)
        assert isinstance(schema, StructType)
    except Exception as exc:
        raise ConfigError(f"not a valid Spark DDL schema: {first_line(exc)}", key="feed.schema") from None
    return schema


@dataclass(frozen=True)
class Read:
    """Rows of a batch's files in one format: the frame, its data columns, the lines before the
    first record of each file, whether any record holds a row (change feeds' files may hold
    only events that change no row: Debezium's tombstones, truncates, heartbeats), and the columns
    some records lack (Debezium events whose schemas differ: the table changed between them)."""

    frame: DataFrame
    columns: tuple[str, ...]
    header_lines: int
    row_data: bool = True
    sometimes: tuple[str, ...] = ()


def _csv_reader(spark: SparkSession, feed: FeedConfig) -> Any:
    reader = (
        spark.read.option("sep", feed.delimiter)
        .option("quote", feed.quote)
        .option("escape", feed.escape)
        .option("multiLine", feed.multiline)
        .option("encoding", feed.encoding)
    )
    if feed.null_value is not None:
        reader = reader.option("nullValue", feed.null_value)
    return reader


def read_csv(
    spark: SparkSession, feed: FeedConfig, paths: Sequence[str], *, names: Sequence[str] | None = None
) -> Read:
    """Delimited files with quoting (RFC 4180 doubled quotes by default), null markers, any
    encoding, gzip/bzip2 by extension, and multi-line records when configured."""
    import csv

    from pyspark.sql import functions as F

    def split(line: str) -> list[str]:
        return next(csv.reader([line], delimiter=feed.delimiter))

    names = list(names) if names is not None else _data_columns(spark, feed, paths, split)
    if not names:
        return _empty(spark, paths)
    check_names(names, paths[0])
    if feed.header and utf8.checks(feed) and any("\ufffd" in n for n in names):
        raise InputError(
            "the header line is not valid UTF-8 (its names would hold U+FFFD); set the feed's encoding if the "
            "files use another character set; nothing was applied",
            path=paths[0],
        )
    schema = ", ".join(f"{quoted(n)} STRING" for n in names) + f", {quoted(_CORRUPT)} STRING"
    reader = (
        _csv_reader(spark, feed)
        .schema(schema)
        .option("header", feed.header)
        .option("enforceSchema", True)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
    )
    frame = reader.csv([literal(p) for p in paths])
    frame = frame.select(
        *[col(n) for n in names],
        F.col(_CORRUPT).alias(C.RAW),
        F.when(F.col(_CORRUPT).isNotNull(), F.lit("malformed record: wrong number of fields or bad quoting")).alias(
            C.MALFORMED
        ),
        file_metadata(frame),
    )
    frame = position(frame)
    return Read(frame, tuple(names), 1 if feed.header else 0)


def read_text(spark: SparkSession, feed: FeedConfig, paths: Sequence[str]) -> Read:
    import re

    from pyspark.sql import functions as F

    pattern = re.compile(feed.delimiter_regex)
    names = _data_columns(spark, feed, paths, lambda line: pattern.split(line))
    if not names:
        return _empty(spark, paths)
    lines = spark.read.text([literal(p) for p in paths])
    text = position(lines.select("value", file_metadata(lines))).filter(F.length("value") > 0)
    header = _first_line(spark, paths[0]) if feed.header else None
    if header is not None:
        # Each file's header line (at the start of its first split) is not a record: files of one
        # feed share their header.
        text = text.filter(~((F.col(C.BLOCK) == 0) & (F.col("value") == F.lit(header))))
    fields = F.split(F.col("value"), feed.delimiter_regex, -1)
    width = len(names)
    null = F.lit(feed.null_value) if feed.null_value is not None else None
    cols: list[Column] = []
    for i, name in enumerate(names):
        value = fields.getItem(i)
        if null is not None:
            value = F.when(value == null, F.lit(None).cast("string")).otherwise(value)
        cols.append(F.when(F.size(fields) > i, value).alias(name))
    malformed = F.when(utf8.invalid(F.col("value")).isNotNull(), utf8.invalid(F.col("value"))).when(
        F.size(fields) != width,
        F.format_string(f"wrong number of fields: expected {width}, found %d", F.size(fields)),
    )
    frame = text.select(
        *cols,
        utf8.valid_text(F.col("value")).alias(C.RAW),
        malformed.alias(C.MALFORMED),
        C.BLOCK,
        C.ROW_ID,
        C.FILE_META,
    )
    return Read(frame, tuple(names), 1 if feed.header else 0)


def read_json(spark: SparkSession, feed: FeedConfig, paths: Sequence[str]) -> Read:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    readable = [literal(p) for p in paths]
    if feed.schema_ddl:
        schema = ddl_schema(feed.schema_ddl)
    else:
        schema = spark.read.option("mode", "PERMISSIVE").option("encoding", feed.encoding).json(readable).schema
    data_fields = [f for f in schema.fields if f.name != "_corrupt_record"]
    full = StructType([*data_fields, StructField(_CORRUPT, StringType())])
    frame = (
        spark.read.schema(full)
        .option("mode", "PERMISSIVE")
        .option("encoding", feed.encoding)
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .json(readable)
    )
    names = [f.name for f in data_fields]
    frame = frame.select(
        *[col(n) for n in names],
        F.col(_CORRUPT).alias(C.RAW),
        F.when(F.col(_CORRUPT).isNotNull(), F.lit("malformed JSON record")).alias(C.MALFORMED),
        file_metadata(frame),
    )
    return Read(position(frame), tuple(names), 0)


def read_columnar(spark: SparkSession, fmt: str, paths: Sequence[str]) -> Read:
    """Parquet, ORC or Avro files (typed; row positions from Parquet's row index where it has one)."""
    from pyspark.sql import functions as F

    reader = spark.read.format(fmt)
    schema = parquet_schema(spark, paths) if fmt == "parquet" else None
    frame = (reader.schema(schema) if schema is not None else reader).load([literal(p) for p in paths])
    names = list(frame.columns)
    frame = frame.select(
        *[col(n) for n in names],
        F.lit(None).cast("string").alias(C.RAW),
        F.lit(None).cast("string").alias(C.MALFORMED),
        file_metadata(frame),
    )
    return Read(position(frame, row_index=fmt == "parquet"), tuple(names), 0)


def parquet_schema(spark: SparkSession, paths: Sequence[str]) -> StructType | None:
    """The schema Spark infers for the Parquet files ``paths`` (qualified Hadoop path strings, as
    :func:`lakemerge.feeds.files.list_feed_files` lists them, so that they sort as Spark sorts them),
    read from the footer of the file it would read it from by Spark's own rules, without its
    Spark job (:meth:`lakemerge.storage.filesystem.FileSystem.parquet_schema`); ``None`` where
    Spark must infer it itself: schemas merged across files (``spark.sql.parquet.mergeSchema``),
    a footer that cannot be read (Spark's inference then reports the file), or files only a
    Spark Connect server reaches.

    Spark infers a Parquet schema from the first file in path order (without summary files) and
    runs a Spark job for it even for one file: 57-73 ms of every warm read (bench/RESULTS.md,
    "Parquet feed schema")."""
    if str(spark.conf.get("spark.sql.parquet.mergeSchema", "false")).strip().lower() == "true":
        return None
    first = min(paths)
    if first.rsplit("/", 1)[-1].startswith(("_", ".")):
        return None
    return filesystem(spark, first).parquet_schema(first)


def _empty(spark: SparkSession, paths: Sequence[str]) -> Read:
    raise InputError("no record in any change file of the batch (files are empty)", path=paths[0])
