"""Where a source's waiting events are kept between micro-batches: its staging table.

A Delta table of Kafka records as the source read them (topic, partition, offset, key, value,
timestamp...), rewritten whole by each micro-batch that changes what waits. The source's point
records the staging version that goes with it, so that a micro-batch reads the records that
waited at the last point, whatever a micro-batch that failed after it wrote: the staging table
and the point move together, as the tables and the point do (:mod:`lakemerge.streams.whole`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakemerge.spark import localfs
from lakemerge.table.snapshots import latest_snapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def staged(spark: SparkSession, path: str, version: int | None) -> DataFrame | None:
    """The records that waited at the staging table's ``version`` (``None``: none ever waited)."""
    if version is None:
        return None
    return spark.read.format("delta").option("versionAsOf", version).load(path)


def stage(spark: SparkSession, path: str, records: DataFrame) -> int:
    """Replace what waits with ``records`` (one Delta commit); the staging table's new version."""
    with localfs.writing(spark, (path,)):
        records.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    return latest_snapshot(spark, path).version
