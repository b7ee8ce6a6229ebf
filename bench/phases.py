"""Where lakemerge's time goes in one batch: ``python -m bench.phases SOURCE LAYOUT BATCH...``.

Creates the table like the harness (``BENCH_WRITE_MODE=deletion_vectors`` for a table with
deletion vectors), then for each batch times file selection, planning (read,
collapse, classify, counts) and the commit (tombstones, MERGE, record lookup), and prints the
MERGE's Delta operation metrics (files scanned/skipped/rewritten, time per phase).
"""

from __future__ import annotations

import json
import os
import sys
import time

from bench import peers


def main(argv: list[str]) -> int:
    source, layout, *batches = argv
    mode = os.environ.get("BENCH_WRITE_MODE", "copy_on_write")
    from lakemerge.batch import attempts as lm
    from lakemerge.config.feed import FeedConfig
    from lakemerge.config.table import TableConfig

    spark = peers.session()
    path = os.path.join(os.path.dirname(source), "phases-table")
    peers.clean(path)
    peers._create_delta(spark, source, path, layout)
    if mode == "deletion_vectors":
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    table = TableConfig(
        name="orders",
        path=path,
        key=(peers.KEY,),
        sequence=("seq",),
        write_mode=mode,
        partition_by=(peers.PARTITION,) if layout == "date" else (),
        feed=FeedConfig(location=(batches[0],), format="parquet", op_column="op"),
    )
    for b in batches:
        t0 = time.perf_counter()
        lm.select_files(spark, table, [b])
        t1 = time.perf_counter()
        plan = lm.plan_batch(table, spark=spark, inputs=[b])
        t2 = time.perf_counter()
        assert not isinstance(plan, lm.NothingPending)
        result = lm.commit_batch(plan, spark=spark)
        plan.release()
        t3 = time.perf_counter()
        found = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]
        metrics = {k: v for k, v in found["operationMetrics"].items() if "Time" in k or "File" in k or "Rows" in k}
        print(
            json.dumps(
                {
                    "batch": os.path.basename(b),
                    "select_s": round(t1 - t0, 2),
                    "plan_s(incl. select)": round(t2 - t1, 2),
                    "commit_s": round(t3 - t2, 2),
                    "result_s": result.seconds,
                    "merge": metrics,
                }
            ),
            flush=True,
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
