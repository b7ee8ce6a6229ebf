"""What every peer of the harness shares, whatever its engine and its Spark: the table a layout
starts from, a batch with one row per key, the checksum of a final table, and the contract of a
peer that :mod:`bench.worker` steps (:class:`Prepared`).

Nothing here imports lakemerge or Delta, and PySpark only inside the functions that take a session:
the peers that run on another Spark line, in an environment of their own (:mod:`bench.envs`), import
this module too.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.data import DATE, KEY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Layouts: rows in random order (files span every key), sorted by key (tight key ranges per
#: file), or partitioned by order year with keys sorted within each partition.
LAYOUTS = ("random", "clustered", "date")
PARTITION = "o_year"
FILES = 16

#: The stored columns, in order (the batches' columns but ``op``).
COLUMNS = (
    KEY,
    "o_custkey",
    "o_orderstatus",
    "o_totalprice",
    DATE,
    "o_orderpriority",
    "o_clerk",
    "o_shippriority",
    "o_comment",
    "seq",
    PARTITION,
)


def _stop() -> None:
    return None


@dataclass
class Prepared:
    """A peer whose table is created (untimed), ready to be stepped.

    Attributes:
        apply: applies one batch (a Parquet file) to the table; only this call is timed.
        checksum: the final table's row count and sums (:data:`CHECKSUM_SQL`).
        stop: ends what the peer started (its Spark session), after the checksum.
    """

    apply: Callable[[str], None]
    checksum: Callable[[], dict[str, int]]
    stop: Callable[[], None] = field(default=_stop)


def initial(spark: SparkSession, source: str, layout: str) -> DataFrame:
    """The TPC-H Parquet at ``source`` laid out as ``layout`` lays it (:data:`LAYOUTS`)."""
    frame = spark.read.parquet(source)
    if layout == "random":
        return frame.repartition(FILES)
    if layout == "clustered":
        return frame.repartitionByRange(FILES, KEY).sortWithinPartitions(KEY)
    return frame.repartition(PARTITION).sortWithinPartitions(KEY)


def deduped(spark: SparkSession, batch: str) -> DataFrame:
    """The batch with one row per key, the latest sequence's (what every hand-written MERGE does)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = spark.read.parquet(batch)
    latest = Window.partitionBy(KEY).orderBy(F.col("seq").desc())
    return frame.withColumn("_rn", F.row_number().over(latest)).filter("_rn = 1").drop("_rn")


#: Row count and sums over the final table (integers, so equal across engines), of a view ``final``.
CHECKSUM_SQL = (
    f"SELECT count(*) AS rows, sum({KEY}) AS keys, sum(CAST(round(o_totalprice * 100) AS BIGINT)) AS cents, "
    f"sum(seq) AS seqs, sum(length(o_comment)) AS comment_chars FROM final"
)
CHECKSUM_NAMES = ("rows", "keys", "cents", "seqs", "comment_chars")


def checksum(spark: SparkSession, frame: DataFrame) -> dict[str, int]:
    """:data:`CHECKSUM_SQL` over ``frame`` (one row to the driver)."""
    frame.createOrReplaceTempView("final")
    row = spark.sql(CHECKSUM_SQL).collect()[0]
    return {k: int(row[k] or 0) for k in row.asDict()}


def timed(apply: Callable[[str], None], batch: str) -> float:
    """The seconds ``apply(batch)`` took, to the millisecond: the write alone."""
    start = time.perf_counter()
    apply(batch)
    return round(time.perf_counter() - start, 3)


def clean(path: str) -> None:
    """Remove a table directory (and lakemerge's side tables)."""
    for p in (path, path + "__tombstones", path + "__quarantine", path + "__log"):
        shutil.rmtree(p, ignore_errors=True)
