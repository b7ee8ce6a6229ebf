"""Ingest and read times of the write modes (docs/modes.md); not part of the test suite.

    PYTHONPATH=src python -m bench.modes [--rows 200000] [--batch 20000] [--batches 3]

Each mode gets a table of ``--rows`` rows, then ``--batches`` batches of ``--batch`` changes (80% updates of
existing keys, 10% inserts, 10% deletes) timed one by one; the floor is a plain Parquet append of the same batch
file. Then the merged view of the log table is read (all rows, to Spark's no-op sink) before and after compaction.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

import lakemerge

SCHEMA = "k BIGINT, seq BIGINT, op STRING, a STRING, b DOUBLE"


def write_csv(path: Path, rows: list[tuple[int, int, str, str, float]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        out.write("k,seq,op,a,b\n")
        for k, seq, op, a, b in rows:
            out.write(f"{k},{seq},{op},{a},{b}\n")


def table(root: Path, mode: str) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name=f"t_{mode}",
        path=str(root / mode),
        key=("k",),
        sequence=("seq",),
        write_mode=mode,  # type: ignore[arg-type]
        feed=lakemerge.FeedConfig(location=(str(root / "in"),), header=True, schema=SCHEMA, op_column="op"),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--batches", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)
    spark = lakemerge.get_spark(lakemerge.SparkSettings(master="local[2]", conf={"spark.sql.shuffle.partitions": "4"}))
    root = Path(tempfile.mkdtemp(prefix="lm_modes_"))
    write_csv(root / "initial" / "f.csv", [(k, 0, "U", f"v{k}", k * 0.5) for k in range(args.rows)])
    batches = []
    for n in range(args.batches):
        rows = []
        for _ in range(args.batch):
            r = rng.random()
            if r < 0.8:
                rows.append((rng.randrange(args.rows), n + 1, "U", f"u{n}", rng.random()))
            elif r < 0.9:
                rows.append((args.rows + rng.randrange(10 * args.rows), n + 1, "U", f"i{n}", rng.random()))
            else:
                rows.append((rng.randrange(args.rows), n + 1, "D", "", 0.0))
        folder = root / f"batch_{n}"
        write_csv(folder / "f.csv", rows)
        batches.append(folder)
    times: dict[str, list[float]] = {}
    for mode in ("copy_on_write", "deletion_vectors", "log"):
        config = table(root, mode)
        lakemerge.apply_table(config, inputs=[str(root / "initial")], spark=spark)
        for folder in batches:
            started = time.perf_counter()
            lakemerge.apply_table(config, inputs=[str(folder)], spark=spark)
            times.setdefault(mode, []).append(time.perf_counter() - started)
    for folder in batches:
        started = time.perf_counter()
        frame = spark.read.csv(str(folder), header=True, schema=SCHEMA)
        frame.write.mode("append").parquet(str(root / "floor"))
        times.setdefault("parquet append (floor)", []).append(time.perf_counter() - started)

    log = table(root, "log")

    def read_view() -> float:
        started = time.perf_counter()
        frame = lakemerge.read_merged(spark, log)
        assert frame is not None
        frame.write.format("noop").mode("overwrite").save()
        return time.perf_counter() - started

    view = [read_view() for _ in range(3)]
    compact_started = time.perf_counter()
    lakemerge.compact(lakemerge.PipelineConfig(tables={"log": log}), spark=spark)
    compact_seconds = time.perf_counter() - compact_started
    compacted = [read_view() for _ in range(3)]
    cow = []
    for _ in range(3):
        started = time.perf_counter()
        spark.read.format("delta").load(str(root / "copy_on_write")).write.format("noop").mode("overwrite").save()
        cow.append(time.perf_counter() - started)

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"rows={args.rows} batch={args.batch} batches={args.batches}")
    print("| ingest of one batch | median s | each s |")
    print("|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.2f} | {', '.join(f'{v:.2f}' for v in values)} |")
    print("| read (all rows to no-op sink) | median s |")
    print("|---|---|")
    print(f"| log: merged view, {args.batches} batches in the log | {statistics.median(view):.2f} |")
    print(f"| log: after compaction ({compact_seconds:.1f} s) | {statistics.median(compacted):.2f} |")
    print(f"| copy_on_write table | {statistics.median(cow):.2f} |")


if __name__ == "__main__":
    main()
