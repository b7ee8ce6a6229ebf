"""The peers: one way each of applying a change batch to a table, all given the same batches.

Every Spark peer gets a session from :func:`session` (same master, memory and shuffle settings) and
is *prepared*: its table is created from the TPC-H Parquet (untimed), and what applies one batch is
returned, for :mod:`bench.worker` to call once per batch the harness sends and to time around the
write alone. :func:`spark_checksum` reads the final table back so that the harness can check that
every peer ends with the same rows. The Hudi peers, on Spark 3.5, are :mod:`bench.hudi`'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from bench import envs
from bench.data import KEY
from bench.tables import COLUMNS, LAYOUTS, PARTITION, Prepared, checksum, clean, deduped, initial

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakemerge.config.table import TableConfig

__all__ = ["LAYOUTS", "PARTITION", "clean"]

#: What prepares a Spark peer: ``(spark, source, path, layout, feed)`` to the function applying one
#: batch (``feed``: the first batch's file, the location lakemerge's feed is configured with).
Prepare = Callable[["SparkSession", str, str, str, str], Callable[[str], None]]

#: The settings every peer's session starts with, on top of lakemerge's defaults.
BASE_CONF = {
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
}


def session(*, iceberg: bool = False, driver_memory: str = "2g", extra: dict[str, str] | None = None) -> SparkSession:
    """A fresh local session with Delta (and Iceberg when asked: its runtime for this Spark line,
    its catalog ``bench`` in ``$BENCH_WAREHOUSE``), the same for every peer (``extra``: settings of a
    diagnostic run, never of the harness)."""
    import pyspark

    from lakemerge.config.spark import SparkSettings
    from lakemerge.spark import get_spark

    conf = {**BASE_CONF, "spark.driver.memory": driver_memory}
    packages: tuple[str, ...] = ()
    if iceberg:
        packages = (envs.iceberg_package(pyspark.__version__),)
        conf.update(
            {
                "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension,"
                "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
                "spark.sql.catalog.bench": "org.apache.iceberg.spark.SparkCatalog",
                "spark.sql.catalog.bench.type": "hadoop",
                "spark.sql.catalog.bench.warehouse": os.environ["BENCH_WAREHOUSE"],
            }
        )
    conf.update(extra or {})
    return get_spark(SparkSettings(master="local[2]", app_name="bench", conf=conf, packages=packages))


def _create_delta(spark: SparkSession, source: str, path: str, layout: str, *, deletion_vectors: bool = False) -> None:
    writer = initial(spark, source, layout).write.format("delta").mode("overwrite")
    if deletion_vectors:
        writer = writer.option("delta.enableDeletionVectors", "true")
    if layout == "date":
        writer = writer.partitionBy(PARTITION)
    writer.save(path)


def _timed(batches: Sequence[str], apply: Callable[[str], Any]) -> list[float]:
    """Apply ``batches`` in a row, the seconds of each (the diagnostic commands' loop)."""
    times = []
    for batch in batches:
        start = time.perf_counter()
        apply(batch)
        times.append(round(time.perf_counter() - start, 3))
    return times


def lakemerge_table(path: str, layout: str, mode: str, feed: str, *, tombstones: bool = True) -> TableConfig:
    """The table as every lakemerge peer configures it (``tombstones=False``: keeping none, for
    :mod:`bench.floor`'s measure of what they cost)."""
    from lakemerge.config.feed import FeedConfig
    from lakemerge.config.table import TableConfig

    return TableConfig(
        name="orders",
        path=path,
        key=(KEY,),
        sequence=("seq",),
        write_mode=mode,
        partition_by=(PARTITION,) if layout == "date" else (),
        feed=FeedConfig(location=(feed,), format="parquet", op_column="op"),
        tombstones=tombstones,
    )


def lakemerge_batch(
    spark: SparkSession, path: str, layout: str, mode: str, feed: str, *, tombstones: bool = True
) -> Callable[[str], None]:
    """What applies one batch (a file like ``feed``) with lakemerge to the table at ``path``."""
    from lakemerge import api

    table = lakemerge_table(path, layout, mode, feed, tombstones=tombstones)

    def apply(batch: str) -> None:
        api.apply_table(table, inputs=[batch], spark=spark)

    return apply


def _lakemerge(mode: str) -> Prepare:
    def prepare(spark: SparkSession, source: str, path: str, layout: str, feed: str) -> Callable[[str], None]:
        _create_delta(spark, source, path, layout, deletion_vectors=mode == "deletion_vectors")
        return lakemerge_batch(spark, path, layout, mode, feed)

    prepare.__doc__ = f"lakemerge's apply_table on each batch (a Parquet feed with an op column), write_mode {mode}."
    return prepare


def hand_merge_batch(spark: SparkSession, path: str) -> Callable[[str], None]:
    """What most teams write, for the Delta table at ``path``: dedupe a batch, then one Delta MERGE
    on the key."""
    from delta.tables import DeltaTable

    def apply(batch: str) -> None:
        changes = deduped(spark, batch)
        columns = [c for c in changes.columns if c != "op"]
        values = {c: f"s.{c}" for c in columns}
        (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(changes.alias("s"), f"t.{KEY} = s.{KEY}")
            .whenMatchedDelete(condition="s.op = 'D'")
            .whenMatchedUpdate(condition="s.op = 'U'", set=values)
            .whenNotMatchedInsert(condition="s.op = 'U'", values=values)
            .execute()
        )

    return apply


def _hand_merge(deletion_vectors: bool) -> Prepare:
    def prepare(spark: SparkSession, source: str, path: str, layout: str, feed: str) -> Callable[[str], None]:
        """What most teams write: dedupe the batch, then one Delta MERGE on the key."""
        _create_delta(spark, source, path, layout, deletion_vectors=deletion_vectors)
        return hand_merge_batch(spark, path)

    return prepare


def full_rewrite_batch(spark: SparkSession, path: str, layout: str) -> Callable[[str], None]:
    """The full rewrite, for the Delta table at ``path``: union table and batch, keep the latest row per
    key, overwrite the table (what a job without MERGE does)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def apply(batch: str) -> None:
        stored = spark.read.format("delta").load(path).withColumn("op", F.lit("U"))
        changes = spark.read.parquet(batch).select(*stored.columns)
        latest = Window.partitionBy(KEY).orderBy(F.col("seq").desc())
        merged = (
            stored.unionByName(changes)
            .withColumn("_rn", F.row_number().over(latest))
            .filter("_rn = 1 AND op = 'U'")
            .drop("_rn", "op")
        )
        writer = merged.write.format("delta").mode("overwrite")
        if layout == "date":
            writer = writer.partitionBy(PARTITION)
        writer.save(path)

    return apply


def full_rewrite(spark: SparkSession, source: str, path: str, layout: str, feed: str) -> Callable[[str], None]:
    """The full rewrite: union table and batch, keep the latest row per key, overwrite the table."""
    _create_delta(spark, source, path, layout)
    return full_rewrite_batch(spark, path, layout)


def iceberg_table(peer: str) -> str:
    """The catalog name of an Iceberg peer's table."""
    return f"bench.db.orders_{peer.split('_')[1]}"


def _iceberg(short: str, mode: str) -> Prepare:
    def prepare(spark: SparkSession, source: str, path: str, layout: str, feed: str) -> Callable[[str], None]:
        name = iceberg_table(f"iceberg_{short}")
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        initial(spark, source, layout).createOrReplaceTempView("initial")
        partitioned = f"PARTITIONED BY ({PARTITION})" if layout == "date" else ""
        spark.sql(
            f"CREATE TABLE {name} USING iceberg {partitioned} TBLPROPERTIES ("
            f"'write.merge.mode'='{mode}', 'write.update.mode'='{mode}', 'write.delete.mode'='{mode}', "
            "'format-version'='2', 'write.distribution-mode'='none') AS SELECT * FROM initial"
        )

        def apply(batch: str) -> None:
            deduped(spark, batch).createOrReplaceTempView("changes")
            spark.sql(
                f"MERGE INTO {name} t USING changes s ON t.{KEY} = s.{KEY} "
                "WHEN MATCHED AND s.op = 'D' THEN DELETE "
                f"WHEN MATCHED AND s.op = 'U' THEN UPDATE SET {_set()} "
                f"WHEN NOT MATCHED AND s.op = 'U' THEN INSERT ({_names()}) VALUES ({_names('s.')})"
            )

        return apply

    return prepare


def _set() -> str:
    return ", ".join(f"t.{c} = s.{c}" for c in COLUMNS)


def _names(prefix: str = "") -> str:
    return ", ".join(prefix + c for c in COLUMNS)


def delta_rs(source: str, path: str, layout: str) -> Prepared:
    """delta-rs' merge (no Spark): dedupe with pyarrow, then TableMerger on the key."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    table = pq.read_table(source)
    if layout == "random":
        table = table.take(np.random.default_rng(7).permutation(table.num_rows))
    write_deltalake(path, table, mode="overwrite", partition_by=[PARTITION] if layout == "date" else None)
    del table

    def apply(batch: str) -> None:
        changes = pq.read_table(batch)
        order = pc.sort_indices(changes, [(KEY, "ascending"), ("seq", "descending")])
        changes = changes.take(order)
        keys = changes.column(KEY).to_numpy()
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        changes = changes.filter(first)
        values = {c: f"s.{c}" for c in COLUMNS}
        (
            DeltaTable(path)
            .merge(changes, predicate=f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t")
            .when_matched_delete(predicate="s.op = 'D'")
            .when_matched_update(updates=values, predicate="s.op = 'U'")
            .when_not_matched_insert(updates=values, predicate="s.op = 'U'")
            .execute()
        )

    return Prepared(apply=apply, checksum=lambda: rs_checksum(path))


SPARK_PEERS: dict[str, Prepare] = {
    "lakemerge": _lakemerge("copy_on_write"),
    "lakemerge_dv": _lakemerge("deletion_vectors"),
    "lakemerge_log": _lakemerge("log"),
    "hand_merge": _hand_merge(deletion_vectors=False),
    "hand_merge_dv": _hand_merge(deletion_vectors=True),
    "full_rewrite": full_rewrite,
    "iceberg_cow": _iceberg("cow", "copy-on-write"),
    "iceberg_mor": _iceberg("mor", "merge-on-read"),
}
ICEBERG_PEERS = ("iceberg_cow", "iceberg_mor")
#: The peers of this module (the Hudi peers, on Spark 3.5, are :data:`bench.hudi.PEERS`).
PEERS = (*SPARK_PEERS, "delta_rs")


def prepare_spark(
    peer: str, source: str, path: str, layout: str, feed: str, warehouse: str, conf: dict[str, str]
) -> Prepared:
    """A Spark peer of :data:`SPARK_PEERS` in a session of its own (Iceberg's catalog in
    ``warehouse``), its table created."""
    os.environ["BENCH_WAREHOUSE"] = warehouse
    spark = session(iceberg=peer in ICEBERG_PEERS, extra=conf or None)
    apply = SPARK_PEERS[peer](spark, source, path, layout, feed)
    return Prepared(apply=apply, checksum=lambda: spark_checksum(spark, peer, path), stop=spark.stop)


def spark_checksum(spark: SparkSession, peer: str, path: str) -> dict[str, int]:
    """Row count and sums over the final table of a peer of :data:`SPARK_PEERS` (a log table's
    through lakemerge's merged view)."""
    if peer in ICEBERG_PEERS:
        frame = spark.table(iceberg_table(peer))
    elif peer == "lakemerge_log":
        from lakemerge.table import logview as log

        merged = log.read_merged(spark, lakemerge_table(path, "clustered", "log", path))
        assert merged is not None
        frame = merged
    else:
        frame = spark.read.format("delta").load(path)
    return checksum(spark, frame)


def rs_checksum(path: str) -> dict[str, int]:
    """The same checksum through delta-rs and DuckDB."""
    import duckdb
    from deltalake import DeltaTable

    from bench.tables import CHECKSUM_NAMES, CHECKSUM_SQL

    final = DeltaTable(path).to_pyarrow_dataset()  # noqa: F841 (read by DuckDB by name)
    row = duckdb.sql(CHECKSUM_SQL).fetchone()
    assert row is not None
    return {k: int(v or 0) for k, v in zip(CHECKSUM_NAMES, row, strict=True)}
