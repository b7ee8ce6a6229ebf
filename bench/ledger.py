"""What the ledger walk costs as a table ages: ``python -m bench.ledger [--commits 100 300 1000]``.

Every batch reads the table's history for its ledger (the files and batches already applied). For
each count of commits, a one-row table gets that many small commits, each carrying a batch record
like a real batch's (a metadata-only commit: the history walk reads commit metadata, not data);
then the ledger is read with neither a kept nor a saved walk (the whole history), with the walk
saved beside the table (what the first batch of a process does), and after one more commit with
the walk kept (every later batch). Prints the median of 3 of each, in seconds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from lakemerge.table import ledger, saved_walks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, nargs="+", default=[100, 300, 1000])
    args = parser.parse_args()
    from lakemerge.config.spark import SparkSettings
    from lakemerge.spark import get_spark

    spark = get_spark(SparkSettings(master="local[2]", app_name="bench-ledger"))
    root = Path(tempfile.mkdtemp(prefix="lm_ledger_"))
    columns = [
        "commits",
        "ledger, walked from the start",
        "a process's first walk (saved walk)",
        "kept walk + 1 new commit",
    ]
    print(f"| {' | '.join(columns)} |")
    print("|---|---|---|---|")
    for count in args.commits:
        path = str(root / f"t{count}")
        spark.range(1).write.format("delta").save(path)

        def commit(number: int, quoted: str = path.replace("`", "``")) -> None:
            record = {
                "batch_id": uuid.uuid4().hex,
                "txn_version": number,
                "files": [{"path": f"/landing/f{number:06d}.csv", "size": 100, "modified": number}],
            }
            with ledger.commit_record(spark, record, txn_version=None):
                spark.sql(f"ALTER TABLE delta.`{quoted}` SET TBLPROPERTIES ('bench.n' = '{number}')")

        for number in range(1, count + 1):
            commit(number)
        full, first, kept = [], [], []
        ledger.ledger(spark, path)  # (the walk saved beside the table, as a batch's walk saves it)
        for _ in range(3):
            ledger._WALKS.clear()
            load, saved_walks.load = saved_walks.load, lambda *args: None
            try:
                started = time.perf_counter()
                ledger.ledger(spark, path)
                full.append(time.perf_counter() - started)
            finally:
                saved_walks.load = load
        for _ in range(3):
            ledger._WALKS.clear()
            started = time.perf_counter()
            ledger.ledger(spark, path)
            first.append(time.perf_counter() - started)
        for extra in range(3):
            commit(count + 1 + extra)
            started = time.perf_counter()
            ledger.ledger(spark, path)
            kept.append(time.perf_counter() - started)
        medians = " | ".join(f"{statistics.median(times):.2f} s" for times in (full, first, kept))
        print(f"| {count} | {medians} |", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
