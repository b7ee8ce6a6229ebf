"""Spark settings that lakemerge chooses for a batch while it plans and writes it.

A batch runs without adaptive query execution: its many small queries (the batch's statistics,
the ledger's reads, Delta's own reads of the table's new versions and the snapshot each commit
checks against) have little for it to decide, and its re-planning after every stage costs the
driver's time (bench/RESULTS.md, "Adaptive execution for small batches": batches of 1,500 changes 7-22 %
faster in ``log`` and 7 % in ``copy_on_write`` mode against the hand-written MERGE of the same runs;
neutral at 150,000). The parts that read the whole table keep the session's own settings: the MERGE, the
history of an SCD2 table, compaction, and the classification of a batch too large to broadcast
(``lakemerge.batch.plan.BROADCAST_ROWS``; for a ``log`` table, whose larger batches still read only
their keys' rows, ``KEY_BROADCAST_ROWS``) or of a table with history or snapshots. A batch small
enough to broadcast never shuffles the table (its rows are first reduced to the batch's keys), so
it is classified and logged in shuffle partitions sized from its rows: one per
:data:`ROWS_PER_PARTITION`, at most two per core and at least one per core. The copy-on-write
MERGE deals such changes round-robin first (``lakemerge.write.merge.write_changes``, ``regroup``):
hashed on the key into those few partitions, they would make Spark shuffle the table into as few
for the join and rewrite it from as many tasks (bench/RESULTS.md, "Adaptive execution for small
batches": a MERGE at SF10 of 35 s instead of 31 s). The session's values come back when the batch is
done, whatever happens; a session is meant to apply one batch at a time.

``spark.lakemerge.smallBatchTuning=false`` in the session's settings turns all of this off.
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
_CONSTRAINTS = "spark.sql.constraintPropagation.enabled"


def shuffle_partitions(rows: int, cores: int) -> int:
    """Shuffle partitions for a batch of ``rows`` rows on ``cores`` cores: one per core at least."""
    cores = max(1, cores)
    return max(cores, min(2 * cores, -(-rows // ROWS_PER_PARTITION)))


def enabled(spark: SparkSession) -> bool:
    """Whether the session lets lakemerge choose these settings."""
    return str(spark.conf.get(SWITCH, "true")).strip().lower() != "false"


def batch_settings(spark: SparkSession) -> dict[str, str | None]:
    """What a batch starts with, before its size is known (none when tuning is off)."""
    return {_ADAPTIVE: "false"} if enabled(spark) else {}


def frame_settings(spark: SparkSession) -> dict[str, str | None]:
    """What a DataFrame's batch (a stream's micro-batch) is planned with besides: no constraint
    propagation, unless the session sets it. Its records are parsed, checked and typed in
    projections of many aliased expressions, whose constraints Spark's optimizer infers and compares
    pair by pair: most of a micro-batch's time went to planning (bench/RESULTS.md, "Streaming from
    Kafka"). File batches gained nothing measurable from it."""
    return {} if spark.conf.get(_CONSTRAINTS, None) is not None else {_CONSTRAINTS: "false"}


def session_settings(spark: SparkSession) -> dict[str, str | None]:
    """The session's own values of the settings lakemerge changes (``None``: not set), to put back
    for the parts of a batch that read the whole table (none when tuning is off)."""
    return {key: spark.conf.get(key, None) for key in (_ADAPTIVE, _PARTITIONS)} if enabled(spark) else {}


def small_batch_settings(spark: SparkSession, rows: int) -> dict[str, str | None]:
    """The settings a small batch of ``rows`` rows is classified and logged with (none when the
    session turned tuning off)."""
    if not enabled(spark):
        return {}
    from lakemerge.spark.backends import backend

    partitions = shuffle_partitions(rows, backend(spark).parallelism())
    return {_ADAPTIVE: "false", _PARTITIONS: str(partitions)}
