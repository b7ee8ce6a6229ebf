"""Persisted frames that later queries plan as a leaf.

Spark analyses a DataFrame's whole plan again with every transformation built on it, and each
query's plan is compared fragment by fragment with every cached plan to find the cached data. A
batch's change records are parsed, checked and typed in projections of hundreds of expressions,
then cached, and a few dozen transformations and two or three queries build on them: each paid
for that plan again. :func:`persisted` gives back, besides the persisted frame, a frame whose plan
is the cached data alone (Spark's in-memory relation): one leaf to analyse and match.
``log`` micro-batches of Kafka-shaped records applied in one process took about 5 % less time
(bench/RESULTS.md, "Planning on cached records").

Spark compresses each column it caches (its setting ``spark.sql.inMemoryColumnarStorage.compressed``)
and, in a PySpark session, the serialized blocks those columns are stored in too
(``spark.rdd.compress``, which PySpark turns on). A frame persisted with ``compressed=False`` skips
the first: computing and caching 1.5 M collapsed changes of TPC-H orders took 4.0-4.1 s without it
against 5.9-6.3 s with it, and 70 MB of memory against 63 MB (bench/RESULTS.md, "The classification
cached without column compression")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakemerge.spark.backends import backend
from lakemerge.spark.scoped import scoped_conf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Spark's setting: compress the columns of cached data.
COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"


def persisted(frame: DataFrame, *, compressed: bool = True) -> tuple[DataFrame, DataFrame]:
    """``frame`` persisted (memory, then disk), and the frame to build on: one that reads the
    cached data as a leaf of its plan (the same columns, the same rows, computed once when a query
    first reads them), or the persisted frame itself where Spark does not offer that. With
    ``compressed=False``, its columns are cached without compression (otherwise as the session's
    setting says).

    Unpersist the first; build nothing on the second after that (a query on it would cache its
    rows again, outside Spark's list of cached data)."""
    from pyspark import StorageLevel

    spark = frame.sparkSession
    # (Spark takes the setting when the frame is persisted, not when its rows are computed.)
    with scoped_conf(spark, {} if compressed else {COMPRESSED: "false"}):
        kept = frame.persist(StorageLevel.MEMORY_AND_DISK)
    return kept, backend(spark).leaf(kept)
