"""What caching a batch's collapsed changes costs, with and without Spark's column compression:
``python -m bench.cached [SF] [BATCH] [ROUNDS]``.

Reads ``BATCH`` (default ``uniform-10-3``) of ``/tmp/lakemerge-bench/sfSF`` (``SF`` default 10; ``python -m
bench`` makes it), gives each record the columns a batch's normalised records carry (its file, its row, an
error and the raw line, null here), collapses the records to the latest change of each key as lakemerge does (a
window over the key), and persists the result as a batch persists its classification
(:func:`lakemerge.spark.cache.persisted`), compressed and not, alternating ``ROUNDS`` times (default 2) in one
session. Prints, for each, the seconds of the first query (which computes and caches the rows) and the bytes
cached, in memory and on disk. The first round also warms the JVM.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def main(argv: list[str]) -> int:
    defaults = ["10", "uniform-10-3", "2"]
    sf, batch, rounds = (argv + defaults[len(argv) :])[:3]
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from bench import peers
    from bench.data import ROOT
    from lakemerge.spark.cache import persisted

    spark = peers.session()
    path = f"{ROOT}/sf{float(sf):g}/batch-{batch}.parquet"

    def collapsed() -> DataFrame:
        records = spark.read.parquet(path).select(
            "*",
            F.lit(0).alias("_lm_file"),
            F.col("_metadata.row_index").alias("_lm_rowid"),
            F.lit(None).cast("string").alias("_lm_error"),
            F.lit(None).cast("string").alias("_lm_raw"),
        )
        order = [F.col("seq").desc(), F.col("_lm_file").desc(), F.col("_lm_rowid").desc()]
        ranked = records.withColumn("_lm_rank", F.row_number().over(Window.partitionBy("o_orderkey").orderBy(*order)))
        return ranked.filter("_lm_rank = 1").drop("_lm_rank")

    storage = spark.sparkContext._jsc.sc()
    for number in range(1, int(rounds) + 1):
        for compressed in (True, False):
            kept, leaf = persisted(collapsed(), compressed=compressed)
            began = time.perf_counter()
            leaf.agg(F.count_if(F.col("op") == "U")).collect()
            took = time.perf_counter() - began
            cached = sum(int(i.memSize()) + int(i.diskSize()) for i in storage.getRDDStorageInfo())
            label = "compressed" if compressed else "uncompressed"
            print(f"round {number} {label:>12}: {took:.2f} s, {cached / 1e6:.0f} MB cached", flush=True)
            kept.unpersist(blocking=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
