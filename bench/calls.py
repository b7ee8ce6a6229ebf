"""Which driver calls a lakemerge batch waits on:
``python -m bench.calls [LAYOUT] [BATCHES] [MODE] [CODEGEN_CACHE] [COUNT] [SF]``.

Creates the harness's table (``LAYOUT``: clustered, random or date) from ``/tmp/lakemerge-bench/sf1``
(run ``python -m bench`` once to generate it), applies the ``COUNT`` (default 3) batches named
``BATCHES`` (e.g. ``uniform-0.1``; ``python -m bench --batches COUNT`` makes that many) in ``MODE``
(copy_on_write, deletion_vectors or log), and after each prints every call into the JVM that took
over 50 ms (Spark jobs, Delta commits, snapshot updates) with the lakemerge lines that made it, and
how many classes Spark compiled for generated code during the batch. The sum is nearly the whole
batch: what is left is Python. ``CODEGEN_CACHE`` sets ``spark.sql.codegen.cache.maxEntries``
(lakemerge's sessions: 1000; Spark's default: 100). ``SF`` (default 1) picks the harness's data of that scale
factor (``/tmp/lakemerge-bench/sfSF``).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any

THRESHOLD_S = 0.05


def main(argv: list[str]) -> int:
    defaults = ["clustered", "uniform-0.1", "copy_on_write", "", "3", "1"]
    layout, kind, mode, cache, count, sf = (argv + defaults[len(argv) :])[:6]
    import py4j.java_gateway as gateway

    from bench import peers
    from lakemerge import api

    calls: list[tuple[float, str, str]] = []
    original = gateway.JavaMember.__call__

    def timed(self: Any, *args: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(self, *args)
        finally:
            took = time.perf_counter() - start
            if took > THRESHOLD_S:
                ours = [f for f in traceback.extract_stack()[:-1] if f"{os.sep}lakemerge{os.sep}" in f.filename]
                where = " < ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in reversed(ours[-3:]))
                calls.append((took, self.name, where))

    gateway.JavaMember.__call__ = timed  # type: ignore[method-assign]
    root = f"/tmp/lakemerge-bench/sf{float(sf):g}"
    batches = [f"{root}/batch-{kind}-{n}.parquet" for n in range(1, int(count) + 1)]
    spark = peers.session(extra={"spark.sql.codegen.cache.maxEntries": cache} if cache else None)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    compiled = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    path = "/tmp/lakemerge-bench/calls-table"
    peers.clean(path)
    peers._create_delta(spark, f"{root}/orders.parquet", path, layout, deletion_vectors=mode == "deletion_vectors")
    table = peers.lakemerge_table(path, layout, mode, batches[0])
    for number, batch in enumerate(batches, start=1):
        calls.clear()
        classes = int(compiled.getCount())
        start = time.perf_counter()
        result = api.apply_table(table, inputs=[batch], spark=spark)
        total = time.perf_counter() - start
        classes = int(compiled.getCount()) - classes
        print(
            f"batch {number}: {total:.2f} s, files removed {result.files_removed}, added {result.files_added}, "
            f"classes compiled {classes}"
        )
        print(f"  calls over {THRESHOLD_S * 1000:.0f} ms: {sum(c[0] for c in calls):.2f} s")
        for took, name, where in calls:
            print(f"  {took:6.2f} {name:22s} {where}")
    spark.stop()
    peers.clean(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
