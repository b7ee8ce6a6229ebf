"""Would a key index pay? ``python -m bench.index [--sf 1] [--batches 5] [CELL ...]``.

A key index (a bloom filter per file, or a key → file map) tells which files hold a batch's keys
without reading them. Its best case is a perfect index: a batch reads exactly the files that hold
one of its keys. This applies a cell's batches in ``log`` mode (``CELL`` as the harness names them,
``layout:keys:percent``, at ``--sf``) and, before each batch, counts the files and rows of the table
and its log three ways:

- ``all``: every file the table and its log hold now;
- ``read``: the files the batch reads (lakemerge's key ranges against the files' statistics; taken
  from the batch's own reads of its sides);
- ``indexed``: the files that hold at least one of the batch's keys, what a perfect index would read
  (found by DuckDB joining each file's keys with the batch's, outside Spark).

What a perfect index could save a batch is the rows of ``read`` minus those of ``indexed``; a real
index adds its own reads and upkeep to every batch. The figures are per batch and summed per cell.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from dataclasses import dataclass
from typing import Any

DEFAULT_CELLS = (
    "clustered:uniform:0.1",
    "clustered:uniform:1",
    "clustered:uniform:10",
    "clustered:recent:1",
    "random:uniform:1",
    "date:recent:1",
)


@dataclass
class Count:
    files: int = 0
    rows: int = 0

    def add(self, other: Count) -> None:
        self.files += other.files
        self.rows += other.rows

    def __str__(self) -> str:
        return f"{self.files} files, {self.rows:,} rows"


def _active_files(path: str) -> list[str]:
    """The files of the Delta table at ``path`` now (delta-rs, not the Spark session under test)."""
    from deltalake import DeltaTable

    return [uri.removeprefix("file://") for uri in DeltaTable(path).file_uris()]


def _measure(con: Any, files: list[str], read: set[str], batch: str, key: str) -> tuple[Count, Count, Count]:
    everything, reading, indexed = Count(), Count(), Count()
    keys = f"(SELECT DISTINCT {key} FROM read_parquet('{batch}'))"
    for file in files:
        rows, hits = con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE {key} IN {keys}) FROM read_parquet('{file}')"
        ).fetchone()
        one = Count(1, rows)
        everything.add(one)
        if file in read:
            reading.add(one)
        if hits:
            indexed.add(one)
    return everything, reading, indexed


def run_cell(spark: Any, cell: str, sf: float, batches: int) -> list[tuple[Count, Count, Count]]:
    """Apply the cell's batches, measuring before each; one row of counts per batch."""
    import duckdb

    from bench import peers
    from bench.data import KEY
    from lakemerge.table import delta

    layout, kind, percent = cell.split(":")
    root = f"/tmp/lakemerge-bench/sf{sf:g}"
    feeds = [f"{root}/batch-{kind}-{percent}-{n}.parquet" for n in range(1, batches + 1)]
    path = "/tmp/lakemerge-bench/index-table"
    peers.clean(path)
    peers._create_delta(spark, f"{root}/orders.parquet", path, layout)
    apply = peers.lakemerge_batch(spark, path, layout, "log", feeds[0])
    read: set[str] = set()
    listed = delta.read_listed

    @functools.wraps(listed)
    def recording(*args: Any, **kwargs: Any) -> Any:
        frame = listed(*args, **kwargs)
        if frame is not None:
            read.update(f.removeprefix("file://").removeprefix("file:") for f in frame.inputFiles())
        return frame

    con = duckdb.connect()
    counts = []
    delta.read_listed = recording  # type: ignore[assignment]
    try:
        for feed in feeds:
            files = _active_files(path)
            if os.path.isdir(f"{path}__log"):  # (no log before the first batch)
                files += _active_files(f"{path}__log")
            read.clear()
            apply(feed)
            counts.append(_measure(con, files, set(read), feed, KEY))
    finally:
        delta.read_listed = listed  # type: ignore[assignment]
        peers.clean(path)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cells", nargs="*", default=list(DEFAULT_CELLS))
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()
    from bench import peers

    spark = peers.session()
    started = time.perf_counter()
    print("| cell | batch | all | read (key ranges) | holding a batch key (perfect index) |")
    print("|---|---|---|---|---|")
    for cell in args.cells:
        total = [Count(), Count(), Count()]
        for number, counts in enumerate(run_cell(spark, cell, args.sf, args.batches), start=1):
            print(f"| {cell} | {number} | {counts[0]} | {counts[1]} | {counts[2]} |", flush=True)
            for sum_, one in zip(total, counts, strict=True):
                sum_.add(one)
        print(f"| {cell} | all | {total[0]} | {total[1]} | {total[2]} |", flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")
    spark.stop()


if __name__ == "__main__":
    main()
