"""What one streaming query reads and what it does with each micro-batch: a table's stream (each
micro-batch one batch of the table), or a group's (each micro-batch a transaction over its tables).

A Kafka micro-batch is known by its records' offsets, never by its id: the table's commits (a
group's: its point) record the offsets they applied, a micro-batch applies only its records above
them, and a query started without a checkpoint starts where they end (:mod:`lakemerge.streams.resume`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakemerge.batch.attempts import apply_table
from lakemerge.batch.frames import FrameBatch, kafka_ranges
from lakemerge.batch.groups import applied_offsets
from lakemerge.batch.transactions import Transaction, source_of
from lakemerge.config import PipelineConfig, TableConfig
from lakemerge.config.stream import StreamConfig
from lakemerge.feeds.files import literal
from lakemerge.results import BatchResult
from lakemerge.streams import resume
from lakemerge.streams.sources import kafka_frame, stream_frame
from lakemerge.table.offsets import unapplied

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
    #: Where the tables are not known up front (a source's, created by their first events): the
    #: tables as they are now (:meth:`tables_now`).
    current: Callable[[SparkSession], tuple[TableConfig, ...]] | None = None

    def tables_now(self, spark: SparkSession) -> tuple[TableConfig, ...]:
        """The query's tables now: those whose commits record its batches."""
        return self.current(spark) if self.current is not None else self.tables


def table_flow(table: TableConfig) -> Flow:
    """A table's stream: each micro-batch one batch of the table."""
    stream = table.stream
    assert stream is not None
    name = stream.name or f"stream:{table.name}"

    def apply(frame: DataFrame, epoch: int) -> list[BatchResult]:
        return _apply_table(table, stream, name, frame, epoch)

    def read(spark: SparkSession) -> DataFrame:
        if stream.source != "kafka":
            return stream_frame(spark, table, stream)
        applied = resume.table_offsets(spark, table, name)
        return kafka_frame(spark, stream, starting=resume.starting(spark, stream, applied))

    return Flow(
        name,
        read,
        stream.checkpoint,
        stream.interval_seconds,
        apply,
        (table,),
        name if stream.source == "kafka" else None,
    )


def group_flow(pipeline: PipelineConfig, group: str) -> Flow:
    """A group's stream: one query over its tables' topics, each micro-batch a transaction over the
    tables (its id one more than the group's last): its records that the group's point does not
    say were applied (by their offsets), each table applying those its own commits did not."""
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

        ranges = kafka_ranges(frame)
        last, applied = applied_offsets(frame.sparkSession, config)
        if not unapplied(ranges, applied):
            return []  # (every record was applied: by a transaction before a lost checkpoint, say)
        tx = Transaction(pipeline, group, (last or 0) + 1, frame.sparkSession)
        for table in tables:
            assert table.stream is not None
            topics = set(table.stream.topics)
            part = {p: r for p, r in ranges.items() if p[0] in topics}
            if part:
                records = frame.filter(F.col("topic").isin(sorted(topics)))
                tx.apply(table.name, records, records=table.stream, ranges=part)
        return list(tx.commit().batches)

    def read(spark: SparkSession) -> DataFrame:
        return kafka_frame(spark, stream, starting=resume.starting(spark, stream, applied_offsets(spark, config)[1]))

    name = config.stream.name or f"stream:{group}"
    return Flow(
        name,
        read,
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
        batch = FrameBatch(frame, name, epoch, stream, ranges=kafka_ranges(frame))
        result = apply_table(table, spark=spark, frame=batch)
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
