"""Apache Hudi's upserts, copy-on-write and merge-on-read, as peers of the harness.

Hudi publishes no bundle for Spark 4.1 that this machine's Maven repository serves (apache/hudi
issue 17663), so these peers run on the newest Spark that Hudi does ship for here: PySpark
:data:`SPARK_VERSION` with :data:`HUDI_PACKAGE`, in a virtual environment of their own that the
harness makes under its data folder on first use (:data:`bench.envs.SPARK35`).
Everything else is the other peers': the same batches, the same session settings where they are not
Delta's (:func:`engine_conf`, computed by the harness from lakemerge's own), the same timing around
the write alone, the same checksum.

A batch is one Hudi upsert, as Hudi's streamer does it: the record key is the table's key, the
precombine field is ``seq`` (so the latest version of a key in a batch wins, and a batch never
replaces a newer stored row: event-time ordering, set rather than inferred), and a delete is a row
with ``_hoodie_is_deleted`` set, so that one commit applies the whole batch. The index is Hudi's
bloom index, whose key ranges per file prune as lakemerge's do (bench/RESULTS.md, "Hudi's settings",
has what the simple index and the record index measured). Files are compressed with snappy, as the Delta peers'
are (Hudi's default is gzip, which costs a copy-on-write rewrite much more CPU).

``iceberg_mor_spark35`` runs the ``iceberg_mor`` peer's MERGE INTO in the same environment (Iceberg
:data:`ICEBERG_PACKAGE`, the release the ``iceberg_mor`` peer uses): beside ``iceberg_mor`` in one run
of the harness, it tells how much of a difference is Spark's version rather than the table format.

The harness starts these peers' :mod:`bench.worker` with that environment's Python; there
:func:`prepare` imports nothing of lakemerge or Delta, only PySpark. :func:`engine_conf` runs in the
harness's own process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench import envs
from bench.data import KEY
from bench.tables import PARTITION, Prepared, checksum, initial

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The newest Spark minor version Hudi publishes a bundle for that resolves here, and its bundle.
SPARK_VERSION = envs.SPARK35.spark
HUDI_PACKAGE = "org.apache.hudi:hudi-spark3.5-bundle_2.12:1.0.2"
ICEBERG_PACKAGE = envs.ICEBERG["3.5"]
#: Hudi's table type per Hudi peer.
HUDI = {"hudi_cow": "COPY_ON_WRITE", "hudi_mor": "MERGE_ON_READ"}
CALIBRATION = "iceberg_mor_spark35"
#: The peers that run in this environment, with the package each adds to PySpark.
PACKAGES = {**dict.fromkeys(HUDI, HUDI_PACKAGE), CALIBRATION: ICEBERG_PACKAGE}
PEERS = tuple(PACKAGES)
DELETED = "_hoodie_is_deleted"

#: lakemerge's session settings that are Delta's or PySpark 4's own, left out of a Hudi session.
_NOT_FOR_HUDI = (
    "spark.sql.extensions",
    "spark.sql.catalog.spark_catalog",
    "spark.jars.packages",
    "spark.databricks.",
    "spark.python.sql.dataFrameDebugging.",
)

_HUDI_SESSION = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
    "spark.jars.packages": HUDI_PACKAGE,
}


def engine_conf(base: dict[str, str]) -> dict[str, str]:
    """The settings of a lakemerge session built from ``base`` (the harness's settings for every
    peer) that are not Delta's: the UI off, shuffle partitions, the time zone, the code cache, the
    driver's memory and JVM options (collector, compiler thresholds), and Hadoop's ``FileContext``
    without side files (which only Delta's log writes through)."""
    from lakemerge.config.spark import SparkSettings
    from lakemerge.spark.session import session_conf

    conf = session_conf(SparkSettings(master="local[2]", conf=base))
    return {k: v for k, v in conf.items() if not k.startswith(_NOT_FOR_HUDI)}


def _iceberg_session(warehouse: str) -> dict[str, str]:
    return {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.bench": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.bench.type": "hadoop",
        "spark.sql.catalog.bench.warehouse": warehouse,
        "spark.jars.packages": ICEBERG_PACKAGE,
    }


def session(conf: dict[str, str], own: dict[str, str]) -> SparkSession:
    """A local session with this peer's settings ``own`` and the harness's ``conf`` (which win, as a
    diagnostic ``--conf`` does for the other peers)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("bench")
    for key, value in {**own, **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def options(table_type: str, layout: str) -> dict[str, str]:
    """Hudi's write options for the table (the same for its creation and every batch)."""
    found = {
        "hoodie.table.name": "orders",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": KEY,
        "hoodie.datasource.write.precombine.field": "seq",
        "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
        "hoodie.index.type": "BLOOM",
        "hoodie.parquet.compression.codec": "snappy",
    }
    if layout == "date":
        found["hoodie.datasource.write.partitionpath.field"] = PARTITION
        found["hoodie.datasource.write.hive_style_partitioning"] = "true"
        found["hoodie.datasource.write.keygenerator.class"] = "org.apache.hudi.keygen.SimpleKeyGenerator"
    else:
        found["hoodie.datasource.write.partitionpath.field"] = ""
        found["hoodie.datasource.write.keygenerator.class"] = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    return found


def _hudi(spark: SparkSession, table_type: str, source: str, path: str, layout: str) -> Prepared:
    """Create the table with a bulk insert that keeps the layout's files (untimed); each batch is
    one upsert."""
    from pyspark.sql import functions as F

    written = options(table_type, layout)
    (
        initial(spark, source, layout)
        .withColumn(DELETED, F.lit(False))
        .write.format("hudi")
        .options(**written)
        .option("hoodie.datasource.write.operation", "bulk_insert")
        .option("hoodie.bulkinsert.sort.mode", "NONE")
        .mode("overwrite")
        .save(path)
    )

    def apply(batch: str) -> None:
        changes = spark.read.parquet(batch).withColumn(DELETED, F.col("op") == "D").drop("op")
        (
            changes.write.format("hudi")
            .options(**written)
            .option("hoodie.datasource.write.operation", "upsert")
            .mode("append")
            .save(path)
        )

    def final() -> dict[str, int]:
        # A snapshot read: the log files of a merge-on-read table merged.
        return checksum(spark, spark.read.format("hudi").load(path))

    return Prepared(apply=apply, checksum=final, stop=spark.stop)


def prepare(peer: str, source: str, path: str, layout: str, warehouse: str, conf: dict[str, str]) -> Prepared:
    """A peer of :data:`PEERS` in a session of its own (the calibration's Iceberg catalog in
    ``warehouse``), its table created; ``conf``: the harness's settings (:func:`engine_conf`)."""
    if peer in HUDI:
        return _hudi(session(conf, _HUDI_SESSION), HUDI[peer], source, path, layout)
    from bench import peers

    spark = session(conf, _iceberg_session(warehouse))
    apply = peers.SPARK_PEERS["iceberg_mor"](spark, source, path, layout, path)

    def final() -> dict[str, int]:
        # The iceberg_mor peer's table, in this peer's own warehouse.
        return peers.spark_checksum(spark, "iceberg_mor", path)

    return Prepared(apply=apply, checksum=final, stop=spark.stop)
