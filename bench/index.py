"""Would a key index pay? ``python -m bench.index [--sf 1] [--batches 5] [CELL ...]``.

A key index (a bloom filter per file, or a key → file map) tells which files hold a batch's keys
without reading them. Its best case is a perfect index: a batch reads exactly the files that hold
one of its keys. This applies a cell's batches in ``log`` mode (``CELL`` as the harness names them,
``layout:keys:percent``, at ``--sf``) and, before each batch, counts the files and rows of the table
and its log three ways:

- ``all``: every file the table and its log hold now;
- ``read``: the files the batch reads (lakemerge's key ranges against the files' statistics; taken
  from the batch's own reads of its sides, ``lakemerge.table.logview.read_sides``; "not measured" where a
  side was read through Delta's own file skipping, whose files are not known before the read, as on
  a table of 50 files or more);
- ``indexed``: the files that hold at least one of the batch's keys, what a perfect index would read
  (found by DuckDB joining each file's keys with the batch's, outside Spark).

What a perfect index could save a batch is the rows of ``read`` minus those of ``indexed``; a real
index adds its own reads and upkeep to every batch. The figures are per batch and summed per cell.
Rows are the files' rows (a ``log`` table has no deletion vectors).
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from dataclasses import dataclass
from typing import Any

from bench.__main__ import DEFAULT_CELLS as HARNESS_CELLS

#: The harness's default cells at SF1 (its SF0.1 cell is the same batch size on a smaller table).
DEFAULT_CELLS = tuple(cell for cell in HARNESS_CELLS if "@" not in cell)


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

    return [_local(uri) for uri in DeltaTable(path).file_uris()]


def _local(uri: str) -> str:
    """A local file's URI or path as one spelling of its path (no scheme, unquoted, links resolved)."""
    from urllib.parse import unquote

    return os.path.realpath(unquote(uri.removeprefix("file://").removeprefix("file:")))


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


#: One batch's counts: all files, those it read (``None``: not known), those holding one of its keys.
Counts = tuple[Count, Count | None, Count]


def _measure(con: Any, files: list[str], read: set[str] | None, batch: str, key: str) -> Counts:
    everything, reading, indexed = Count(), Count(), Count()
    keys = f"SELECT DISTINCT {key} FROM read_parquet({_sql_string(batch)})"
    con.execute(f"CREATE OR REPLACE TEMP TABLE batch_keys AS {keys}")
    for file in files:
        rows, hits = con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE {key} IN (SELECT {key} FROM batch_keys)) "
            f"FROM read_parquet({_sql_string(file)})"
        ).fetchone()
        one = Count(1, rows)
        everything.add(one)
        if read is not None and file in read:
            reading.add(one)
        if hits:
            indexed.add(one)
    return everything, reading if read is not None else None, indexed


def run_cell(spark: Any, cell: str, sf: float, batches: int) -> list[Counts]:
    """Apply the cell's batches, measuring before each; one row of counts per batch (``None``:
    what the batch read is not known)."""
    import duckdb

    from bench import peers
    from bench.data import KEY
    from lakemerge.table import logview as log
    from lakemerge.table import stats

    layout, kind, percent = cell.split("@", 1)[0].split(":")
    root = f"/tmp/lakemerge-bench/sf{sf:g}"
    feeds = [f"{root}/batch-{kind}-{float(percent):g}-{n}.parquet" for n in range(1, batches + 1)]
    path = "/tmp/lakemerge-bench/index-table"
    peers.clean(path)
    peers._create_delta(spark, f"{root}/orders.parquet", path, layout)
    apply = peers.lakemerge_batch(spark, path, layout, "log", feeds[0])
    read: set[str] = set()
    unknown: list[str] = []
    listed, sides = stats.read_listed, log.read_sides
    reading_sides = False

    @functools.wraps(listed)
    def recording(*args: Any, **kwargs: Any) -> Any:
        frame = listed(*args, **kwargs)
        if reading_sides:
            if frame is None:
                unknown.append(args[1])
            else:
                read.update(_local(f) for f in frame.inputFiles())
        return frame

    @functools.wraps(sides)
    def side_reads(*args: Any, **kwargs: Any) -> Any:
        nonlocal reading_sides
        reading_sides = True
        try:
            return sides(*args, **kwargs)
        finally:
            reading_sides = False

    con = duckdb.connect()
    counts = []
    stats.read_listed, log.read_sides = recording, side_reads
    try:
        for feed in feeds:
            files = _active_files(path)
            if os.path.isdir(f"{path}__log"):  # (no log before the first batch)
                files += _active_files(f"{path}__log")
            read.clear()
            unknown.clear()
            apply(feed)
            strays = read - set(files)
            if strays:
                raise RuntimeError(f"the batch read files that were not the table's before it: {sorted(strays)[:3]}")
            counts.append(_measure(con, files, None if unknown else set(read), feed, KEY))
    finally:
        stats.read_listed, log.read_sides = listed, sides
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
        total: list[Count | None] = [Count(), Count(), Count()]
        for number, counts in enumerate(run_cell(spark, cell, args.sf, args.batches), start=1):
            shown = [str(c) if c is not None else "not measured" for c in counts]
            print(f"| {cell} | {number} | {' | '.join(shown)} |", flush=True)
            for i, one in enumerate(counts):
                sum_ = total[i]
                if sum_ is not None and one is not None:
                    sum_.add(one)
                else:
                    total[i] = None
        shown = [str(c) if c is not None else "not measured" for c in total]
        print(f"| {cell} | all | {' | '.join(shown)} |", flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")
    spark.stop()


if __name__ == "__main__":
    main()
