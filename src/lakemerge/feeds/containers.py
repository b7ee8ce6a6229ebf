"""Debezium events in Avro or Parquet files, as Kafka Connect's S3 and HDFS sinks write them with
the Avro converter (``format = "debezium"``, ``container = "avro"`` or ``"parquet"``).

Each record is the event's envelope (``before``, ``after``, ``source``, ``op``, ``ts_ms``, ...).
The Avro schema the converter made from the event's Connect schema names each column's semantic
type (``connect.name``, ``connect.parameters``): Avro files keep it in their header, Parquet files
written through Avro in their footer (``parquet.avro.schema``). Spark's readers decode Avro's own
logical types (``decimal``, ``date``, ``timestamp-millis``); the others (Debezium's
``MicroTimestamp``, ``Date`` as an ``int``, ...) are decoded from that schema like those of JSON
events (:mod:`lakemerge.feeds.logical`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakemerge import columns as C
from lakemerge.columns import col, file_metadata
from lakemerge.config.feed import FeedConfig
from lakemerge.errors import InputError
from lakemerge.feeds.connect_schema import from_avro
from lakemerge.feeds.events import Envelope, envelope_rows
from lakemerge.feeds.files import literal
from lakemerge.feeds.formats import Read, position, read_columnar
from lakemerge.storage.filesystems import filesystem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_PARTS = ("before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns")
#: Spark's decimals hold 38 digits; an Avro decimal wider than that is read as its bytes.
_MAX_PRECISION = 38


def read_container(spark: SparkSession, feed: FeedConfig, paths: Sequence[str]) -> Read:
    """The events of Avro or Parquet files, as change rows (:func:`lakemerge.feeds.events.envelope_rows`).

    Raises:
        InputError: the files' records are not Debezium envelopes, or a file cannot be read.
    """
    from pyspark.sql import functions as F

    newest = max(paths)
    if feed.container == "avro":
        schema = avro_schema(spark, newest)
        frame = _read_avro(spark, paths, schema)
    else:
        schema = parquet_avro_schema(spark, newest)
        frame = read_columnar(spark, "parquet", paths).frame
    kinds = {f.name: f.dataType for f in frame.schema.fields}
    parts = {name: (col(name), kinds[name]) for name in _PARTS if name in kinds}
    if "op" not in parts or not {"before", "after"} & set(parts):
        raise InputError(
            f"not Debezium change events: the {feed.container} records have no 'op' and 'before'/'after' "
            f"fields (they have {', '.join(kinds)})",
            path=newest,
        )
    envelope = Envelope(
        parts=parts,
        tombstone=F.lit(False),
        malformed=F.lit(None).cast("string"),
        raw=F.lit(None).cast("string"),
    )
    logical = from_avro(schema) if schema else {}
    return envelope_rows(frame, envelope, feed, logical, carried=[C.BLOCK, C.ROW_ID, C.FILE_META])


def _read_avro(spark: SparkSession, paths: Sequence[str], schema: str | None) -> DataFrame:

    reader = spark.read.format("avro")
    if schema:
        reader = reader.option("avroSchema", json.dumps(_without_wide_decimals(json.loads(schema))))
    frame = reader.load([literal(p) for p in paths])
    return position(frame.select(*[col(c) for c in frame.columns], file_metadata(frame)))


def _without_wide_decimals(node: Any) -> Any:
    """The Avro schema ``node`` with decimals wider than Spark's read as plain bytes."""
    if isinstance(node, list):
        return [_without_wide_decimals(n) for n in node]
    if not isinstance(node, dict):
        return node
    if node.get("logicalType") == "decimal" and int(node.get("precision", 0)) > _MAX_PRECISION:
        return {k: v for k, v in node.items() if k not in ("logicalType", "precision", "scale")}
    return {k: _without_wide_decimals(v) for k, v in node.items()}


def avro_schema(spark: SparkSession, path: str) -> str | None:
    """The writer schema in the header of the Avro file ``path`` (as JSON), or ``None`` when the
    file cannot be read (Spark's reader then names the problem)."""
    return filesystem(spark, path).avro_schema(path)


def parquet_avro_schema(spark: SparkSession, path: str) -> str | None:
    """The Avro schema a Parquet file written through Avro keeps in its footer, or ``None``."""
    return filesystem(spark, path).parquet_metadata(path, "parquet.avro.schema")
