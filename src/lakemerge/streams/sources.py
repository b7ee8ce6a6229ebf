"""The streaming DataFrame a table's stream reads: Spark's Kafka source, or its feeds' landing zones.

A landing zone is read as a stream of file names (Spark's ``binaryFile`` source, whose file
contents are never read here): each micro-batch is the files that arrived, applied as a batch of
files, so that they are read, ordered and recorded exactly as ``lakemerge run`` reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakemerge.config import PipelineConfig, SparkSettings, TableConfig
from lakemerge.config.stream import StreamConfig
from lakemerge.spark import versions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The artifact name of Spark's Kafka source, whatever its version.
KAFKA_ARTIFACT = "org.apache.spark:spark-sql-kafka-0-10_"

#: The schema of Spark's ``binaryFile`` source (only ``path`` is read).
_FILES = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"


def with_kafka(pipeline: PipelineConfig, matching: versions.Pairing | None = None) -> SparkSettings:
    """The pipeline's Spark settings, with the Kafka source of ``matching`` (default: the installed
    Spark's) among the packages when a table or a source streams from Kafka (unless the pipeline names a Kafka
    source of its own)."""
    kafka = bool(pipeline.sources) or any(
        t.stream is not None and t.stream.source == "kafka" for t in pipeline.tables.values()
    )
    if not kafka or any(p.startswith(KAFKA_ARTIFACT) for p in pipeline.spark.packages):
        return pipeline.spark
    package = (matching or versions.installed_pairing()).kafka
    return pipeline.spark.model_copy(update={"packages": (*pipeline.spark.packages, package)})


def stream_frame(spark: SparkSession, table: TableConfig, stream: StreamConfig) -> DataFrame:
    """The streaming DataFrame of ``table``'s ``stream``: Kafka's records (``key``, ``value``,
    ``topic``, ``partition``, ``offset``, ...), or the paths of the files that arrive."""
    if stream.source == "kafka":
        return kafka_frame(spark, stream)
    return _files(spark, table, stream)


def kafka_frame(spark: SparkSession, stream: StreamConfig, *, starting: str | None = None) -> DataFrame:
    """Spark's Kafka source subscribed as ``stream`` says, starting (without a checkpoint) at
    ``starting`` (default: the stream's ``starting_offsets``)."""
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", stream.bootstrap_servers)
    if stream.topics:
        reader = reader.option("subscribe", ",".join(stream.topics))
    else:
        reader = reader.option("subscribePattern", stream.topic_pattern)
    reader = reader.option("startingOffsets", starting or stream.starting_offsets)
    if stream.max_records_per_batch is not None:
        reader = reader.option("maxOffsetsPerTrigger", stream.max_records_per_batch)
    return reader.options(**stream.options).load()


def _files(spark: SparkSession, table: TableConfig, stream: StreamConfig) -> DataFrame:
    assert table.feed is not None  # (checked when the table is configured)
    parts = []
    for location in table.feed.location:
        reader = spark.readStream.format("binaryFile").schema(_FILES).option("recursiveFileLookup", "true")
        if stream.max_records_per_batch is not None:
            reader = reader.option("maxFilesPerTrigger", stream.max_records_per_batch)
        parts.append(reader.options(**stream.options).load(location).select("path"))
    frame = parts[0]
    for part in parts[1:]:
        frame = frame.union(part)
    return frame
