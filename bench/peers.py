"""The peers: one way each of applying a change batch to a table, all given the same batches.

Every Spark peer gets a session from :func:`session` (same master, memory and shuffle settings),
creates its table from the TPC-H Parquet (untimed), then applies the batches in order; each
batch's wall time is measured around the write alone. :func:`checksum` reads the final table back
so that the harness can check that every peer ends with the same rows.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from bench import hudi
from bench.data import DATE, KEY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakemerge.config.table import TableConfig

ICEBERG_PACKAGE = "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"
#: Layouts: rows in random order (files span every key), sorted by key (tight key ranges per
#: file), or partitioned by order year with keys sorted within each partition.
LAYOUTS = ("random", "clustered", "date")
PARTITION = "o_year"
FILES = 16

Peer = Callable[..., list[float]]

#: The settings every peer's session starts with, on top of lakemerge's defaults.
BASE_CONF = {
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
}


def session(*, iceberg: bool = False, driver_memory: str = "2g", extra: dict[str, str] | None = None) -> SparkSession:
    """A fresh local session with Delta (and Iceberg when asked), the same for every peer (``extra``:
    settings of a diagnostic run, never of the harness)."""
    from lakemerge.config.spark import SparkSettings
    from lakemerge.spark import get_spark

    conf = {**BASE_CONF, "spark.driver.memory": driver_memory}
    packages: tuple[str, ...] = ()
    if iceberg:
        packages = (ICEBERG_PACKAGE,)
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


def _initial(spark: SparkSession, source: str, layout: str) -> DataFrame:
    frame = spark.read.parquet(source)
    if layout == "random":
        return frame.repartition(FILES)
    if layout == "clustered":
        return frame.repartitionByRange(FILES, KEY).sortWithinPartitions(KEY)
    return frame.repartition(PARTITION).sortWithinPartitions(KEY)


def _create_delta(spark: SparkSession, source: str, path: str, layout: str, *, deletion_vectors: bool = False) -> None:
    writer = _initial(spark, source, layout).write.format("delta").mode("overwrite")
    if deletion_vectors:
        writer = writer.option("delta.enableDeletionVectors", "true")
    if layout == "date":
        writer = writer.partitionBy(PARTITION)
    writer.save(path)


def _deduped(spark: SparkSession, batch: str) -> DataFrame:
    """The batch with one row per key, the latest sequence's (what every hand-written MERGE does)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = spark.read.parquet(batch)
    latest = Window.partitionBy(KEY).orderBy(F.col("seq").desc())
    return frame.withColumn("_rn", F.row_number().over(latest)).filter("_rn = 1").drop("_rn")


def _timed(batches: Sequence[str], apply: Callable[[str], Any]) -> list[float]:
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


def _lakemerge(mode: str) -> Peer:
    def run(spark: SparkSession, source: str, path: str, layout: str, batches: Sequence[str]) -> list[float]:
        _create_delta(spark, source, path, layout, deletion_vectors=mode == "deletion_vectors")
        return _timed(batches, lakemerge_batch(spark, path, layout, mode, batches[0]))

    run.__doc__ = f"lakemerge's apply_table on each batch (a Parquet feed with an op column), write_mode {mode}."
    return run


def hand_merge_batch(spark: SparkSession, path: str) -> Callable[[str], None]:
    """What most teams write, for the Delta table at ``path``: dedupe a batch, then one Delta MERGE
    on the key."""
    from delta.tables import DeltaTable

    def apply(batch: str) -> None:
        changes = _deduped(spark, batch)
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


def _hand_merge(deletion_vectors: bool) -> Peer:
    def run(spark: SparkSession, source: str, path: str, layout: str, batches: Sequence[str]) -> list[float]:
        """What most teams write: dedupe the batch, then one Delta MERGE on the key."""
        _create_delta(spark, source, path, layout, deletion_vectors=deletion_vectors)
        return _timed(batches, hand_merge_batch(spark, path))

    return run


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


def full_rewrite(spark: SparkSession, source: str, path: str, layout: str, batches: Sequence[str]) -> list[float]:
    """The full rewrite: union table and batch, keep the latest row per key, overwrite the table."""
    _create_delta(spark, source, path, layout)
    return _timed(batches, full_rewrite_batch(spark, path, layout))


def _iceberg(short: str, mode: str) -> Peer:
    def run(spark: SparkSession, source: str, path: str, layout: str, batches: Sequence[str]) -> list[float]:
        name = f"bench.db.orders_{short}"
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        _initial(spark, source, layout).createOrReplaceTempView("initial")
        partitioned = f"PARTITIONED BY ({PARTITION})" if layout == "date" else ""
        spark.sql(
            f"CREATE TABLE {name} USING iceberg {partitioned} TBLPROPERTIES ("
            f"'write.merge.mode'='{mode}', 'write.update.mode'='{mode}', 'write.delete.mode'='{mode}', "
            "'format-version'='2', 'write.distribution-mode'='none') AS SELECT * FROM initial"
        )

        def apply(batch: str) -> None:
            _deduped(spark, batch).createOrReplaceTempView("changes")
            spark.sql(
                f"MERGE INTO {name} t USING changes s ON t.{KEY} = s.{KEY} "
                "WHEN MATCHED AND s.op = 'D' THEN DELETE "
                f"WHEN MATCHED AND s.op = 'U' THEN UPDATE SET {_set()} "
                f"WHEN NOT MATCHED AND s.op = 'U' THEN INSERT ({_names()}) VALUES ({_names('s.')})"
            )

        return _timed(batches, apply)

    return run


_COLUMNS = (
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


def _set() -> str:
    return ", ".join(f"t.{c} = s.{c}" for c in _COLUMNS)


def _names(prefix: str = "") -> str:
    return ", ".join(prefix + c for c in _COLUMNS)


def delta_rs(source: str, path: str, layout: str, batches: Sequence[str]) -> list[float]:
    """delta-rs' merge (no Spark): dedupe with pyarrow, then TableMerger on the key."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    table = pq.read_table(source)
    if layout == "random":
        import numpy as np

        table = table.take(np.random.default_rng(7).permutation(table.num_rows))
    write_deltalake(path, table, mode="overwrite", partition_by=[PARTITION] if layout == "date" else None)
    del table

    def apply(batch: str) -> None:
        changes = pq.read_table(batch)
        order = pc.sort_indices(changes, [(KEY, "ascending"), ("seq", "descending")])
        changes = changes.take(order)
        keys = changes.column(KEY).to_numpy()
        import numpy as np

        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        changes = changes.filter(first)
        values = {c: f"s.{c}" for c in _COLUMNS}
        (
            DeltaTable(path)
            .merge(changes, predicate=f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t")
            .when_matched_delete(predicate="s.op = 'D'")
            .when_matched_update(updates=values, predicate="s.op = 'U'")
            .when_not_matched_insert(updates=values, predicate="s.op = 'U'")
            .execute()
        )

    return _timed(batches, apply)


SPARK_PEERS: dict[str, Peer] = {
    "lakemerge": _lakemerge("copy_on_write"),
    "lakemerge_dv": _lakemerge("deletion_vectors"),
    "lakemerge_log": _lakemerge("log"),
    "hand_merge": _hand_merge(deletion_vectors=False),
    "hand_merge_dv": _hand_merge(deletion_vectors=True),
    "full_rewrite": full_rewrite,
    "iceberg_cow": _iceberg("cow", "copy-on-write"),
    "iceberg_mor": _iceberg("mor", "merge-on-read"),
}
#: The Hudi peers run on Spark 3.5 in an environment of their own (:mod:`bench.hudi`).
PEERS = (*SPARK_PEERS, "delta_rs", *hudi.PEERS)


def spark_checksum(spark: SparkSession, peer: str, path: str) -> dict[str, int]:
    """Row count and sums over the final table (integers, so equal across engines); a Hudi table's
    through a snapshot read (its log files merged)."""
    if peer in hudi.HUDI:
        frame = spark.read.format("hudi").load(path)
    elif peer.startswith("iceberg"):
        frame = spark.table(f"bench.db.orders_{peer.split('_')[1]}")
    elif peer == "lakemerge_log":
        from lakemerge.table import logview as log

        merged = log.read_merged(spark, lakemerge_table(path, "clustered", "log", path))
        assert merged is not None
        frame = merged
    else:
        frame = spark.read.format("delta").load(path)
    frame.createOrReplaceTempView("final")
    row = spark.sql(_CHECKSUM_SQL).collect()[0]
    return {k: int(row[k] or 0) for k in row.asDict()}


_CHECKSUM_SQL = (
    f"SELECT count(*) AS rows, sum({KEY}) AS keys, sum(CAST(round(o_totalprice * 100) AS BIGINT)) AS cents, "
    f"sum(seq) AS seqs, sum(length(o_comment)) AS comment_chars FROM final"
)


def rs_checksum(path: str) -> dict[str, int]:
    """The same checksum through delta-rs and DuckDB."""
    import duckdb
    from deltalake import DeltaTable

    final = DeltaTable(path).to_pyarrow_dataset()  # noqa: F841 (read by DuckDB by name)
    row = duckdb.sql(_CHECKSUM_SQL).fetchone()
    assert row is not None
    return {k: int(v or 0) for k, v in zip(("rows", "keys", "cents", "seqs", "comment_chars"), row, strict=True)}


def emit(path: str, times: list[float], checksum: dict[str, int]) -> None:
    """End a worker's job: remove its table at ``path`` and print the line the harness reads."""
    clean(path)
    print("BENCH " + json.dumps({"times": times, "checksum": checksum}), flush=True)


def clean(path: str) -> None:
    """Remove a table directory (and lakemerge's side tables)."""
    for p in (path, path + "__tombstones", path + "__quarantine", path + "__log"):
        shutil.rmtree(p, ignore_errors=True)
