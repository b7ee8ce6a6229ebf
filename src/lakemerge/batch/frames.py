"""Change records given as a DataFrame: a batch of the caller's, a transaction's, or a stream's
micro-batch (``lakemerge.apply_changes``).

Each record gets the provenance columns a file's rows get, so that every rule of a file batch
applies unchanged: where it came from (``_lm_place``) and its position there (``_lm_rowid``), which
order the changes of a key when the table has no sequence column, as file order does for files:

- a Kafka micro-batch (columns ``topic``, ``partition``, ``offset``, ``value``): its partition and
  offset (a key's messages are in one partition, in the order they were produced);
- any other DataFrame: its partition and the row's position in it (the order the caller gave).

Records arrive as rows (the table's columns, typed or cast by ``types``), as JSON objects (Kafka
message values, typed by the rules' ``schema``: read as text first, so that a value that does not
convert is a bad record naming its place), or as Debezium events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col
from lakemerge.config.feed import FeedConfig
from lakemerge.config.records import RecordsConfig
from lakemerge.errors import ConfigError, InputError
from lakemerge.feeds import utf8
from lakemerge.feeds.files import FeedFile
from lakemerge.feeds.readers import RawFeed
from lakemerge.table.offsets import Partition, Ranges, unapplied

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: The columns of a Kafka source's DataFrame that say where a message is.
KAFKA_COLUMNS = ("topic", "partition", "offset", "value")


@dataclass(frozen=True)
class FrameBatch:
    """One batch of change records given as a DataFrame.

    Attributes:
        frame: the records.
        source: who sends them (a stream's name, a job's): recorded with the commit.
        batch_id: the source's number for this batch; the source's batches are applied in the order
            of these numbers, each once: a batch whose number is not above the last one the table
            committed from the source commits nothing.
        rules: how the records say what they do (op column and codes, types, format).
        ranges: a Kafka stream's micro-batch: the offsets its records span, per topic and
            partition (:func:`kafka_ranges`). Then the offsets, not the number, say what is new:
            the records below the ends the table's commits from the source recorded were applied
            (:meth:`unapplied`), whatever number the batch has.
    """

    frame: DataFrame
    source: str
    batch_id: int
    rules: FeedConfig | RecordsConfig
    ranges: Ranges | None = None

    @property
    def name(self) -> str:
        """The batch as errors name it."""
        return f"{self.source}, batch {self.batch_id}"

    @property
    def files(self) -> list[FeedFile]:
        """The one pseudo-file the batch's rows come from, for the parts of the path that name files."""
        return [FeedFile(path=self.name, name=self.source, size=0, modified=0, name_number=None)]

    def unapplied(self, applied: Mapping[Partition, int]) -> FrameBatch | None:
        """The batch's records at or above the offsets ``applied`` (per partition, one past the last
        applied), with their ranges; ``None`` when none is (every record was applied)."""
        assert self.ranges is not None
        fresh = unapplied(self.ranges, applied)
        if not fresh:
            return None
        if fresh == self.ranges:
            return self
        return replace(self, frame=newer(self.frame, self.ranges, applied), ranges=fresh)


def newer(frame: DataFrame, ranges: Ranges, applied: Mapping[Partition, int]) -> DataFrame:
    """The Kafka records of ``frame`` (spanning ``ranges``) at or above the offsets ``applied``."""
    from pyspark.sql import functions as F

    fresh = unapplied(ranges, applied)
    # (only the partitions read in part or not at all change: a condition per such partition)
    older = [
        (F.col("topic") == topic) & (F.col("partition") == number) & (F.col("offset") < applied[(topic, number)])
        for (topic, number), whole in ranges.items()
        if fresh.get((topic, number)) != whole
    ]
    if not older:
        return frame
    seen = older[0]
    for each in older[1:]:
        seen = seen | each
    return frame.filter(~seen)


def kafka_ranges(frame: DataFrame) -> Ranges:
    """The offsets a micro-batch of Kafka records spans, per topic and partition: its first and
    one past its last (one Spark job, whose result is a row per partition)."""
    from pyspark.sql import functions as F

    rows = (
        frame.groupBy("topic", "partition").agg(F.min("offset").alias("first"), F.max("offset").alias("last")).collect()
    )
    return {(str(r["topic"]), int(r["partition"])): (int(r["first"]), int(r["last"]) + 1) for r in rows}


def raw_records(spark: SparkSession, batch: FrameBatch, *, key: Sequence[str] = ()) -> RawFeed:
    """The batch's records as a feed's rows are read, with their provenance. ``key``: the table's
    key columns (filled from a JSON message key with ``message_key = "json"``).

    Raises:
        ConfigError: the rules' format does not fit the DataFrame (JSON or Debezium records without a
            ``value`` column, JSON records without a schema).
        InputError: a column name lakemerge reserves.
    """
    from pyspark.sql import functions as F

    frame = batch.frame
    kafka = all(c in frame.columns for c in KAFKA_COLUMNS)
    fmt = batch.rules.format
    if fmt in ("json", "debezium") and "value" not in frame.columns:
        raise ConfigError(f"{batch.name}: {fmt} records come in a string column 'value' (as Kafka's source gives them)")
    placed = _placed(frame, batch, kafka=kafka)
    row_data = True
    sometimes: tuple[str, ...] = ()
    if fmt == "json":
        rows, columns = _json_rows(placed, batch, key=key)
    elif fmt == "debezium":
        from lakemerge.feeds.debezium import debezium_rows

        read = debezium_rows(
            spark, placed.withColumn("value", F.col("value").cast("string")), batch.rules, messages=True
        )
        rows, columns, row_data, sometimes = read.frame, read.columns, read.row_data, read.sometimes
    else:
        columns = tuple(
            c for c in frame.columns if not (kafka and c in (*KAFKA_COLUMNS, "key", "timestamp", "timestampType"))
        )
        rows = _plain_rows(placed, columns)
    for name in columns:
        if name.startswith(C.RESERVED_PREFIX):
            raise InputError(
                f"column '{name}' uses the prefix '{C.RESERVED_PREFIX}' reserved for lakemerge", path=batch.name
            )
    return RawFeed(frame=rows, columns=columns, header_lines=0, row_data=row_data, sometimes=sometimes)


def _placed(frame: DataFrame, batch: FrameBatch, *, kafka: bool) -> DataFrame:
    """``frame`` with where each record came from: ``_lm_file`` (0: one batch), ``_lm_block`` (its
    partition), ``_lm_rowid`` (its offset, or its 1-based position in its DataFrame partition) and
    ``_lm_place``, naming the place for errors and the quarantine up to the number of the row id
    (``..., topic orders, partition 3, offset`` then ``1234``)."""
    from pyspark.sql import functions as F

    if kafka:
        block = F.col("partition").cast("long")
        row = F.col("offset").cast("long")
        place = F.format_string(f"{batch.name}, topic %s, partition %d, offset", F.col("topic"), F.col("partition"))
    else:
        block = F.spark_partition_id().cast("long")
        row = F.monotonically_increasing_id() - F.shiftleft(block, 33) + 1
        place = F.format_string(f"{batch.name}, DataFrame partition %d, row", block)
    return frame.select("*", F.lit(0).alias(C.FILE), block.alias(C.BLOCK), row.alias(C.ROW_ID), place.alias(C.PLACE))


def _plain_rows(frame: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    """Rows given as the table's columns: nothing to parse (the raw record, for errors, is the row)."""
    from pyspark.sql import functions as F

    return frame.select(
        *[col(c) for c in columns],
        F.lit(None).cast("string").alias(C.RAW),
        F.lit(None).cast("string").alias(C.MALFORMED),
        C.FILE,
        C.BLOCK,
        C.ROW_ID,
        C.PLACE,
    )


def _json_rows(frame: DataFrame, batch: FrameBatch, *, key: Sequence[str]) -> tuple[DataFrame, tuple[str, ...]]:
    """JSON objects in ``value`` as rows of the rules' schema, every field read as text (so that a
    value of the wrong type is a bad record, not a silent null); the schema's types are cast later."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    ddl = batch.rules.schema_ddl
    if not ddl:
        raise ConfigError(f"{batch.name}: json records need the rules' schema (their columns and types)")
    typed = StructType.fromDDL(ddl)
    assert isinstance(typed, StructType)
    text = StructType([StructField(f.name, StringType()) for f in typed.fields])
    value = F.col("value").cast("string")
    parsed = F.from_json(value, text, {"mode": "PERMISSIVE"})
    undecodable = utf8.invalid(value, of="the message's value", hint="")
    malformed: Column = (
        F.when(value.isNull(), F.lit("record has no value"))
        .when(undecodable.isNotNull(), undecodable)
        .when(parsed.isNull() | ~F.trim(value).startswith("{"), F.lit("malformed JSON record"))
    )
    names = tuple(f.name for f in typed.fields)
    fields = {n: parsed.getField(n) for n in names}
    if isinstance(batch.rules, RecordsConfig) and batch.rules.message_key == "json" and "key" in frame.columns:
        keyed = [k for k in key if k in fields]
        message = F.from_json(F.col("key").cast("string"), StructType([StructField(k, StringType()) for k in keyed]))
        fields.update({k: F.coalesce(fields[k], message.getField(k)) for k in keyed})
    rows = frame.select(
        *[value.alias(n) for n, value in fields.items()],
        utf8.valid_text(value).alias(C.RAW),
        malformed.alias(C.MALFORMED),
        C.FILE,
        C.BLOCK,
        C.ROW_ID,
        C.PLACE,
    )
    return rows, names
