"""Debezium change events read into change rows, their values decoded by their semantic types.

An event is ``{"before", "after", "source", "op", "ts_ms"}``, bare or with its schema as
``{"schema": ..., "payload": {...}}`` (the JSON converter's ``schemas.enable``). A row's columns come
from ``after`` (from ``before`` for a delete, ``op = "d"``, so that its key is known), decoded by
:mod:`lakemerge.feeds.logical`, plus the event's metadata: ``__op``, ``__ts_ms`` (``__ts_us``,
``__ts_ns``) and ``__source_<field>`` (``__source_lsn``, ``__source_ts_ms``, ...), any of which can be
the table's sequence and none of which is stored otherwise (unless ``keep_columns`` names it).

Events that change no row are ignored records (docs/semantics.md §10 Operation codes), so that a
file holding only them is a batch that writes nothing: a tombstone (a null value, kept after a
delete for Kafka's log compaction) is ``tombstone``; an event without ``op`` is a heartbeat
(``{"ts_ms": ...}``), a schema change (``ddl``, ``tableChanges``) or a transaction's ``BEGIN`` /
``END`` marker (``status``); a logical decoding message is ``op = "m"``. A truncate (``op = "t"``)
applies as a truncate when ``truncate_codes`` lists ``t`` (docs/semantics.md §4 Truncate), is
skipped when ``ignore_codes`` does, and is otherwise a bad record naming ``truncate_codes``
(Debezium writes truncates only when asked to).

:func:`debezium_rows` reads events from any DataFrame holding their JSON text (a file's lines, or
Kafka message values); :func:`read_debezium` reads a feed's files, in JSON lines or, as Kafka
Connect's S3 and HDFS sinks write them with the Avro converter, in Avro or Parquet files
(:mod:`lakemerge.feeds.containers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col, file_metadata
from lakemerge.config.feed import FeedConfig
from lakemerge.config.records import RecordsConfig
from lakemerge.feeds import containers, utf8
from lakemerge.feeds.connect_schema import Logical, from_connect, sometimes_absent
from lakemerge.feeds.events import Envelope, envelope_rows
from lakemerge.feeds.files import literal
from lakemerge.feeds.formats import Read, position

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

_EVENT = "_lm_event"
_CORRUPT = "_lm_corrupt"


def debezium_rows(
    spark: SparkSession,
    events: DataFrame,
    feed: FeedConfig | RecordsConfig,
    *,
    value: str = "value",
    logical: Mapping[str, Logical] | None = None,
    messages: bool = False,
) -> Read:
    """Change rows from Debezium events held as JSON text.

    Args:
        events: one row per event: the column ``value`` holds the event's JSON text (null, or the
            text ``null``, for a tombstone; a Kafka message value read as a string); every other
            column is carried through unchanged, for the caller's provenance (a file's metadata
            and row position, or a topic's partition and offset).
        feed: the feed's settings: declared ``types``, ``debezium`` encodings, op codes.
        logical: the columns' semantic types when known beforehand (a schema registry's); else
            they come from the events' own schemas, when they carry them.
        messages: the texts are Kafka message values (not lines of files): a value that is not
            UTF-8 is named as such.

    Returns:
        The rows: the table's columns (decoded), ``__op``, ``__ts_ms`` and ``__source_…``, then
        ``_lm_raw`` (the event's text, for a bad row) and ``_lm_malformed`` (why the event or one
        of its values cannot be read), then the carried columns. ``columns`` lists the first two
        groups; ``row_data`` is false when no event holds a row (tombstones, truncates,
        heartbeats only); ``sometimes`` names the columns some events' schemas lack.

    Costs one Spark job to infer the events' structure (as Spark's JSON reader infers it) and,
    when they carry schemas and ``logical`` is not given, one to gather their distinct schemas.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    inferred = _inferred_schema(spark, events.select(col(value)))
    fields = [f for f in inferred.fields if f.name != "_corrupt_record"]
    if logical is None:
        schemas = _event_schemas(events, value) if any(f.name == "schema" for f in fields) else []
        logical, sometimes = from_connect(schemas), sometimes_absent(schemas)
    else:
        sometimes = ()
    parsing = StructType([f for f in fields if f.name != "schema"] + [StructField(_CORRUPT, StringType())])
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
    frame = events.withColumn(_EVENT, F.from_json(col(value), parsing, options))
    text = col(value)
    tombstone = text.isNull() | (F.trim(text) == "null")
    corrupt = F.col(f"{_EVENT}.{_CORRUPT}")
    undecodable = utf8.invalid(text, of="the message's value", hint="") if messages else utf8.invalid(text)
    envelope = Envelope(
        parts=_parts(parsing),
        tombstone=tombstone,
        malformed=F.coalesce(undecodable, F.when(corrupt.isNotNull() & ~tombstone, F.lit("malformed JSON event"))),
        raw=utf8.valid_text(text),
    )
    carried = [c for c in events.columns if c != value]
    return replace(envelope_rows(frame, envelope, feed, logical, carried=carried), sometimes=sometimes)


def _inferred_schema(spark: SparkSession, texts: DataFrame) -> StructType:
    """The structure Spark's JSON reader infers for a column of JSON texts (one job)."""
    from lakemerge.spark.backends import backend

    return backend(spark).json_schema(texts)


def _event_schemas(events: DataFrame, value: str) -> list[str]:
    """The events' distinct schemas, as JSON texts (one job; schemas are few)."""
    from pyspark.sql import functions as F

    schema = F.get_json_object(col(value), "$.schema").alias("schema")
    return [str(row[0]) for row in events.select(schema).where(F.col("schema").isNotNull()).distinct().collect()]


def _parts(parsing: StructType) -> dict[str, tuple[Column, DataType]]:
    """The event's parts, from its payload (with a schema) or from the top (without one)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    top = {f.name: f.dataType for f in parsing.fields}
    payload = top.get("payload")
    inner = {f.name: f.dataType for f in payload.fields} if isinstance(payload, StructType) else {}
    parts: dict[str, tuple[Column, DataType]] = {}
    for name in dict.fromkeys([*inner, *top]):
        if name in ("payload", _CORRUPT):
            continue
        sources = [(col(name, f"{_EVENT}.payload"), inner[name])] if name in inner else []
        sources += [(col(name, _EVENT), top[name])] if name in top else []
        structs = [s for s in sources if isinstance(s[1], StructType)]
        if structs and len(structs) < len(sources):
            sources = structs  # (the other was null in every event: Spark reads it as a string)
        if len(sources) == 1:
            parts[name] = sources[0]
        elif structs and sources[0][1] != sources[1][1]:
            parts[name] = (_merged_struct(sources), _union_type([k for _, k in sources]))
        else:
            parts[name] = (F.coalesce(*[c for c, _ in sources]), sources[0][1])
    return parts


def _union_type(kinds: Sequence[DataType]) -> DataType:
    from pyspark.sql.types import StructField, StructType

    merged: dict[str, StructField] = {}
    for kind in kinds:
        assert isinstance(kind, StructType)
        for f in kind.fields:
            merged.setdefault(f.name, f)
    return StructType(list(merged.values()))


def _merged_struct(sources: Sequence[tuple[Column, DataType]]) -> Column:
    """A struct of the union of the fields of ``sources`` (events with and without a payload)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    kind = _union_type([k for _, k in sources])
    assert isinstance(kind, StructType)
    fields = []
    for f in kind.fields:
        options = [c.getField(f.name) for c, k in sources if isinstance(k, StructType) and f.name in k.names]
        fields.append((options[0] if len(options) == 1 else F.coalesce(*options)).alias(f.name))
    present = F.coalesce(*[c.isNotNull() for c, _ in sources])
    return F.when(present, F.struct(*fields))


def read_debezium(spark: SparkSession, feed: FeedConfig, paths: Sequence[str]) -> Read:
    """A Debezium feed's files: JSON lines (``container = "json"``; with ``multiline = true``, each
    file one pretty-printed event or a JSON array of them), or Avro or Parquet files of events."""
    from pyspark.sql import functions as F

    if feed.container != "json":
        return containers.read_container(spark, feed, paths)
    if feed.multiline:
        files = spark.read.text([literal(p) for p in paths], wholetext=True)
        whole = files.select("value", file_metadata(files))
        text = F.trim(F.col("value"))
        array = F.coalesce(F.from_json(text, "array<string>"), F.array(text))  # (a malformed array: a bad event)
        items = F.when(text.startswith("["), array).otherwise(F.array(text))
        lines = whole.select(F.posexplode(items).alias(C.ROW_ID, "value"), C.FILE_META)
        lines = lines.withColumn(C.BLOCK, F.lit(0).cast("long"))
    else:
        read = spark.read.text([literal(p) for p in paths])
        lines = position(read.select("value", file_metadata(read)))
        lines = lines.where(F.length(F.trim(F.col("value"))) > 0)
    return debezium_rows(spark, lines, feed)
