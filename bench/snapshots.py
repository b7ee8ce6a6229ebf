"""What Delta's ``snapshotPartitions`` costs the first read of each new table version:
``python -m bench.snapshots [--files N] [PARTITIONS ...]`` (default: 1 2 4, each run twice,
alternating; the table starts with ``N`` data files, default 1).

Every batch reads at least one Delta table at a version nobody has read before (its own last
commit, its tombstones' last append); Delta rebuilds that version's file list with one Spark job
whose shuffle has ``spark.databricks.delta.snapshotPartitions`` partitions. For each setting, in a
fresh process and ``local[2]`` session: a table of 1,000 rows in ``N`` files, then 15 rounds of a 10-row append
followed by a filtered count (the first read of the new version); prints the median and minimum
seconds of the append and of the read.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROUNDS = 15


def measure(partitions: str, files: int) -> None:
    from lakemerge.config.spark import SparkSettings
    from lakemerge.spark import get_spark

    conf = {"spark.databricks.delta.snapshotPartitions": partitions}
    spark = get_spark(SparkSettings(master="local[2]", app_name="bench-snapshots", conf=conf))
    folder = tempfile.mkdtemp(prefix="lakemerge-snapshots-")
    path = f"{folder}/t"
    try:
        spark.range(1000).repartition(files).write.format("delta").save(path)
        for _ in range(3):  # warm the JVM
            spark.range(10).write.format("delta").mode("append").save(path)
            spark.read.format("delta").load(path).where("id > 5").count()
        appends, reads = [], []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            spark.range(10).write.format("delta").mode("append").save(path)
            middle = time.perf_counter()
            spark.read.format("delta").load(path).where("id > 5").count()
            appends.append(middle - start)
            reads.append(time.perf_counter() - middle)
        print(
            f"{files} files, snapshotPartitions={partitions}: append median {statistics.median(appends):.3f} s "
            f"(min {min(appends):.3f}), first read of the new version median {statistics.median(reads):.3f} s "
            f"(min {min(reads):.3f})",
            flush=True,
        )
    finally:
        spark.stop()
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        measure(argv[1], int(argv[2]))
        return 0
    files = "1"
    if argv[:1] == ["--files"]:
        files, argv = argv[1], argv[2:]
    settings = argv or ["1", "2", "4"]
    for _ in range(2):
        for partitions in settings:
            subprocess.run([sys.executable, "-m", "bench.snapshots", "--one", partitions, files], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
