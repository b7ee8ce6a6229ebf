"""What one streaming query reads and what it does with each micro-batch: a table's stream (each
micro-batch one batch of the table), or a group's (each micro-batch a transaction over its tables).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakemerge.batch.attempts import apply_table
from lakemerge.batch.frames import FrameBatch
from lakemerge.batch.transactions import Transaction, source_of
from lakemerge.config import PipelineConfig, TableConfig
from lakemerge.config.stream import StreamConfig
from lakemerge.feeds.files import literal
from lakemerge.results import BatchResult
from lakemerge.streams.sources import kafka_frame, stream_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Flow:
    """One streaming query: its name (also the source its batches are recorded under), what it
    reads, where it checkpoints, how often it triggers (``None``: everything available, then stop),
    and how a micro-batch is applied."""

    name: str
    read: Callable[[SparkSession], DataFrame]
    checkpoint: str
    interval: float | None
    apply: Callable[[DataFrame, int], list[BatchResult]]
    tables: tuple[TableConfig, ...] = ()
    #: The source its tables' commits record its batches under (``None``: a stream of files, whose
    #: batches are recorded by their files).
    source: str | None = None


def table_flow(table: TableConfig) -> Flow:
    """A table's stream: each micro-batch one batch of the table."""
    stream = table.stream
    assert stream is not None
    name = stream.name or f"stream:{table.name}"

    def apply(frame: DataFrame, epoch: int) -> list[BatchResult]:
        return _apply_table(table, stream, name, frame, epoch)

    return Flow(
        name,
        lambda spark: stream_frame(spark, table, stream),
        stream.checkpoint,
        stream.interval_seconds,
        apply,
        (table,),
        name if stream.source == "kafka" else None,
    )


def group_flow(pipeline: PipelineConfig, group: str) -> Flow:
    """A group's stream: one query over its tables' topics, each micro-batch a transaction over the
    tables (transaction id: the micro-batch's id plus one)."""
    config = pipeline.groups[group]
    assert config.stream is not None
    tables = [pipeline.table(name) for name in config.tables]
    streams = [t.stream for t in tables if t.stream is not None]
    topics = tuple(topic for s in streams for topic in s.topics)
    stream = streams[0].model_copy(
        update={"topics": topics, "max_records_per_batch": config.stream.max_records_per_batch}
    )

    def apply(frame: DataFrame, epoch: int) -> list[BatchResult]:
        from pyspark.sql import functions as F

        tx = Transaction(pipeline, group, epoch + 1, frame.sparkSession)
        for table in tables:
            assert table.stream is not None
            part = frame.filter(F.col("topic").isin(list(table.stream.topics)))
            if not part.isEmpty():
                tx.apply(table.name, part, records=table.stream)
        return list(tx.commit().batches)

    name = config.stream.name or f"stream:{group}"
    return Flow(
        name,
        lambda spark: kafka_frame(spark, stream),
        config.stream.checkpoint,
        config.stream.interval_seconds,
        apply,
        tuple(tables),
        source_of(group),
    )


def _apply_table(
    table: TableConfig, stream: StreamConfig, name: str, frame: DataFrame, epoch: int
) -> list[BatchResult]:
    """One micro-batch of a table's stream: its Kafka records as one batch; or its files, in as many
    batches as the table's limits make of them (every file is applied before the micro-batch ends)."""
    spark = frame.sparkSession
    if stream.source == "kafka":
        result = apply_table(table, spark=spark, frame=FrameBatch(frame, name, epoch, stream))
        return [result] if result.version is not None or result.applied_before else []
    # (file names only; each as a pattern that names that file alone, whatever characters it holds)
    inputs = sorted(literal(str(row[0])) for row in frame.select("path").collect())
    found: list[BatchResult] = []
    while inputs:
        result = apply_table(table, spark=spark, inputs=inputs)
        if result.version is None:
            break
        found.append(result)
    return found
