"""CDC envelopes: Debezium change events and AWS DMS files, read into plain change rows.

Debezium (``format = "debezium"``): JSON lines, each an event ``{"before", "after", "source",
"op", "ts_ms"}``, bare or wrapped with its schema as ``{"schema": ..., "payload": {...}}``. The
row's columns come from ``after`` (from ``before`` for a delete, so its key is known), plus the
event's metadata: ``__op``, ``__ts_ms`` and ``__source_<field>`` (``__source_lsn``,
``__source_ts_ms``, ...), any of which can be the table's sequence. A tombstone (a ``null`` line)
becomes an ignored record, counted.

DMS (``envelope = "dms"``): change files carry the ``Op`` column (I/U/D) first, then the columns
the schema names; full-load files (named ``LOAD…``) have no ``Op`` and hold inserts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col
from lakemerge.config.feed import FeedConfig
from lakemerge.errors import InputError
from lakemerge.feeds.files import FeedFile
from lakemerge.feeds.formats import Read, position, read_columnar, read_csv

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_CORRUPT = "_lm_corrupt"
TOMBSTONE = "tombstone"


def read_debezium(spark: SparkSession, feed: FeedConfig, paths: Sequence[str]) -> Read:
    """Debezium events as change rows (see the module docstring)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    inferred = spark.read.option("encoding", feed.encoding).json(list(paths)).schema
    fields = [f for f in inferred.fields if f.name != "_corrupt_record"]
    top = {f.name: f.dataType for f in fields}
    payload = top.get("payload")
    inner = {f.name: f.dataType for f in payload.fields} if isinstance(payload, StructType) else {}
    frame = (
        spark.read.schema(StructType([*fields, StructField(_CORRUPT, StringType())]))
        .option("mode", "PERMISSIVE")
        .option("encoding", feed.encoding)
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .json(list(paths))
    )

    def part(name: str) -> Column | None:
        sources = [col(name, "payload")] if name in inner else []
        sources += [col(name)] if name in top else []
        if not sources:
            return None
        return sources[0] if len(sources) == 1 else F.coalesce(*sources)

    def struct_fields(name: str) -> list[str]:
        names: list[str] = []
        for kind in (inner.get(name), top.get(name)):
            if isinstance(kind, StructType):
                names += [f.name for f in kind.fields if f.name not in names]
        return names

    after, before, op, source = part("after"), part("before"), part("op"), part("source")
    if op is None or (after is None and before is None):
        raise InputError("not Debezium change events: no 'op' and 'before'/'after' fields", path=paths[0])
    columns = [c for c in struct_fields("after") + struct_fields("before")]
    columns = list(dict.fromkeys(columns))
    deleted = op == "d"
    selected = []
    for name in columns:
        new = after.getField(name) if after is not None and name in struct_fields("after") else F.lit(None)
        old = before.getField(name) if before is not None and name in struct_fields("before") else F.lit(None)
        selected.append(F.when(deleted, old).otherwise(new).alias(name))
    everything_null = F.lit(True)
    for f in fields:
        everything_null = everything_null & col(f.name).isNull()
    # A tombstone is a null value: the JSON reader sees the line "null" as a non-object record.
    tombstone = F.coalesce(F.trim(F.col(_CORRUPT)) == "null", everything_null)
    meta = [F.when(tombstone, F.lit(TOMBSTONE)).otherwise(op).alias("__op")]
    ts = part("ts_ms")
    if ts is not None:
        meta.append(ts.alias("__ts_ms"))
    if source is not None:
        meta += [source.getField(n).alias(f"__source_{n}") for n in struct_fields("source")]
    frame = frame.select(
        *selected,
        *meta,
        F.col(_CORRUPT).alias(C.RAW),
        F.when(F.col(_CORRUPT).isNotNull() & ~tombstone, F.lit("malformed JSON event")).alias(C.MALFORMED),
        "_metadata",
    )
    names = (
        *columns,
        *[m for m in ("__op", "__ts_ms") if m == "__op" or ts is not None],
        *[f"__source_{n}" for n in (struct_fields("source") if source is not None else [])],
    )
    return Read(position(frame), tuple(names), 0)


def is_full_load(file: FeedFile) -> bool:
    """DMS names full-load files ``LOAD00000001.csv`` (or ``.parquet``)."""
    return file.name.upper().startswith("LOAD")


def read_dms(spark: SparkSession, feed: FeedConfig, files: Sequence[FeedFile]) -> Read:
    """DMS output: change files with ``Op`` first, full-load files without it (inserts)."""
    from pyspark.sql import functions as F

    load = [f.path for f in files if is_full_load(f)]
    changes = [f.path for f in files if not is_full_load(f)]
    op = feed.op_column or "Op"
    parts: list[DataFrame] = []
    names: tuple[str, ...] = ()
    if feed.format == "csv":
        if not feed.schema_ddl and not feed.columns:
            raise InputError(
                "a DMS csv feed needs 'schema' (or 'columns') naming the columns after Op", path=files[0].path
            )
        if load:
            read = read_csv(spark, feed, load)
            parts.append(read.frame.withColumn(op, F.lit("I")))
            names = read.columns
        if changes:
            base = names or read_csv(spark, feed, changes[:1]).columns
            read = read_csv(spark, feed, changes, names=[op, *base])
            parts.append(read.frame)
            names = tuple(base)
    else:
        for group, is_load in ((load, True), (changes, False)):
            if group:
                read = read_columnar(spark, feed.format, group)
                frame = read.frame.withColumn(op, F.lit("I")) if is_load and op not in read.columns else read.frame
                parts.append(frame)
                names = names or tuple(c for c in read.columns if c != op)
    frame = parts[0]
    for other in parts[1:]:
        frame = frame.unionByName(other, allowMissingColumns=True)
    return Read(frame, (op, *[n for n in names if n != op]), 0)
