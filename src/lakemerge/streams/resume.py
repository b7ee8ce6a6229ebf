"""Where a Kafka stream's query starts when it has no checkpoint: where its tables say.

The offsets a stream applied are recorded in its tables' commits (a group's stream: in the group's
points), so a query started with a new or lost checkpoint resumes there, whatever its
``starting_offsets`` say: each partition at one past the last offset applied, and a partition none
of its records were applied from at its earliest offset (as Spark reads a partition that appears
while a query runs). Only a stream whose tables record none of its offsets starts at its
``starting_offsets``. (Spark reads ``startingOffsets`` only for a query without a checkpoint: a
checkpoint's own offsets come first.)

Spark's option needs every partition of the topics subscribed: they are asked of the cluster where
the session can ask (a classic session's JVM); where it cannot (Spark Connect), the query starts
at the earliest offsets, and its micro-batches skip the records applied (by their offsets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakemerge.config import TableConfig
from lakemerge.config.stream import StreamConfig
from lakemerge.spark.backends import backend
from lakemerge.table import ledger
from lakemerge.table.offsets import Ends, starting_offsets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def table_offsets(spark: SparkSession, table: TableConfig, source: str) -> Ends:
    """The offsets the table's commits (or its change log's) from ``source`` applied."""
    _, found = ledger.state(spark, table.path, log_path=table.log_table if table.log_mode else None)
    return found.offsets.get(source, {})


def starting(spark: SparkSession, stream: StreamConfig, applied: Ends) -> str:
    """The ``startingOffsets`` of ``stream``'s query, given the offsets its tables applied."""
    if not applied:
        return stream.starting_offsets
    assert stream.bootstrap_servers is not None
    partitions = backend(spark).kafka_partitions(
        stream.bootstrap_servers, stream.options, stream.topics, stream.topic_pattern
    )
    if not partitions:
        return "earliest"
    return starting_offsets(partitions, applied)
