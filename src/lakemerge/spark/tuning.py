"""Spark settings that lakemerge chooses for a batch, from the batch's size, while it plans and writes it.

A batch small enough to broadcast (``lakemerge.batch.BROADCAST_ROWS``) never shuffles the table:
the table's rows are first reduced to the batch's keys. Its shuffles move the batch's rows only,
and adaptive query execution has nothing left to decide for them; what it does cost is the
driver's time, re-planning each query after every stage (bench/RESULTS.md, ninth session: a
batch of 1,500 changes in ``log`` mode about a tenth faster without it). For such a batch,
lakemerge turns it off and sizes the shuffles itself: one partition per
:data:`ROWS_PER_PARTITION` rows, at most two per core and at least one (the classified changes keep
their partitions into the copy-on-write MERGE, whose rewrite of the touched files would otherwise
run in one task). The MERGE itself, which reads the table, keeps the session's settings, and so
does a larger batch. The session's values come back when the batch is done, whatever happens.

``spark.lakemerge.smallBatchTuning=false`` in the session's settings turns this off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Rows of a small batch per shuffle partition.
ROWS_PER_PARTITION = 25_000

#: The session setting that turns small-batch tuning off (``false``).
SWITCH = "spark.lakemerge.smallBatchTuning"

_ADAPTIVE = "spark.sql.adaptive.enabled"
_PARTITIONS = "spark.sql.shuffle.partitions"


def shuffle_partitions(rows: int, cores: int) -> int:
    """Shuffle partitions for a batch of ``rows`` rows on ``cores`` cores: one per core at least."""
    cores = max(1, cores)
    return max(cores, min(2 * cores, -(-rows // ROWS_PER_PARTITION)))


def small_batch_settings(spark: SparkSession, rows: int) -> dict[str, str]:
    """The settings a small batch of ``rows`` rows is planned and written with (none when the
    session turned tuning off)."""
    if str(spark.conf.get(SWITCH, "true")).strip().lower() == "false":
        return {}
    partitions = shuffle_partitions(rows, spark.sparkContext.defaultParallelism)
    return {_ADAPTIVE: "false", _PARTITIONS: str(partitions)}
