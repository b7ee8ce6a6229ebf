"""A small table's batches, one after another:
``python -m bench.small [--batches 12] [--keys 50] [--mode copy_on_write] [--history latest]``.

What most tables in a pipeline look like (a dimension, a lookup): a few KB, a few dozen changes per
batch. Every batch is fixed cost: the ledger, the batch's read and statistics, the classification,
the MERGE, the tombstone append and the commit lookup. Each batch updates every key and deletes a
seventh of them (the same keys come back in the next batch). Prints each batch's seconds and the
mean of batches 5 on (the first ones compile Spark's planner), and which lakemerge it imported, so
that two checkouts can be compared by running it with ``PYTHONPATH=CHECKOUT/src``, alternating.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--keys", type=int, default=50)
    parser.add_argument("--mode", default="copy_on_write")
    parser.add_argument("--history", default="latest", choices=("latest", "scd2"))
    args = parser.parse_args()
    import lakemerge

    spark = lakemerge.get_spark(
        lakemerge.SparkSettings(
            master="local[2]",
            app_name="bench-small",
            conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
        )
    )
    root = Path(tempfile.mkdtemp(prefix="lm_small_"))
    (root / "in").mkdir()
    table = lakemerge.TableConfig(
        name="t",
        path=str(root / "table"),
        key=("id",),
        sequence=("seq",),
        write_mode=args.mode,
        history=args.history,
        feed=lakemerge.FeedConfig(
            location=(str(root / "in"),),
            format="csv",
            header=True,
            schema="id INT, seq BIGINT, op STRING, v STRING",
            op_column="op",
            upsert_codes=("I", "U"),
            delete_codes=("D",),
        ),
    )
    seconds = []
    for number in range(args.batches):
        rows = [f"{k},{number},{'D' if (k + number) % 7 == 0 else 'U'},v{number}" for k in range(args.keys)]
        (root / "in" / f"f{number:04d}.csv").write_text("\n".join(["id,seq,op,v", *rows]) + "\n")
        started = time.monotonic()
        lakemerge.apply_table(table, spark=spark)
        seconds.append(time.monotonic() - started)
    warm = seconds[4:] or seconds
    print(f"lakemerge from {Path(lakemerge.__file__).parent}")
    print("batches:", " ".join(f"{s:.2f}" for s in seconds))
    print(f"mean of batches 5-{len(seconds)}: {statistics.mean(warm):.2f} s")
    spark.stop()


if __name__ == "__main__":
    main()
