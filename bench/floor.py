"""How close a `log` batch is to the least a Spark batch that classifies its changes does:
``python -m bench.floor [--rounds R] [--count N] [--batches KIND] [--sf SF] [--layout L] [--prune] [MODE ...]``.

Each round runs every mode once, in the order given, each in a fresh process and session
(:func:`bench.peers.session`, as the harness's peers get): the harness's table of layout ``L``
(default ``clustered``; ``date`` partitions it by year, ``random`` spreads every key range over every
file) is created from ``/tmp/lakemerge-bench/sfSF`` (``python -m bench`` makes it; untimed) and ``N``
batches named ``KIND`` (default ``uniform-0.1``, 5 batches as the harness applies) are applied one by
one and timed.
The modes:

- ``append``: the batch's feed appended as it is to a Delta table beside the table, one commit.
  Nothing is read of the table and nothing is checked: the least a batch could write to Delta, and
  what a merge-on-read design that resolves every key only when it is read would do.
- ``bound``: ``append`` plus each change's stored sequence in the table as it was created (its key
  and sequence columns reduced to the batch's keys by a broadcast semi-join). Not correct after the
  first batch, which it never reads back: a lower bound, the one read of stored state a batch that
  classifies its changes when it writes them cannot skip, from a table that never changes.
- ``lookup``: the same over the table and every batch appended beside it before, newest sequence
  per key: such a batch done correctly, written plainly with Spark and Delta's own reader. Nothing
  is deduplicated, validated or counted, and no history of applied files is kept.
- ``kept``: ``lookup`` with the stored keys and sequences kept in the session's memory between
  batches: the table's cached at the first batch, each batch's rows as its write reads them. What
  a process that keeps its table's keys (and is its only writer) would read instead of Delta.
- ``touched``: the least a correct copy-on-write batch does with Spark and Delta, lakemerge's own write without
  its rules: the batch deduplicated (newest row per key), the data files holding its keys found by one broadcast
  semi-join of the batch's keys with the table's key column (their ``_metadata.file_path``), only those files
  read, their rows of the batch's keys replaced by the batch's upserts (deletes dropped), the inserts written
  beside them, and the files swapped in one Delta transaction on the version read (:mod:`lakemerge.table.direct`).
  No sequence check against the stored row (a late change is applied), no tombstones, no ledger, no counts.
- ``rules``: ``touched`` with every rule lakemerge's default mode keeps, written plainly with Spark and Delta, each
  the cheapest way lakemerge's measurements found: each change classified against its key's stored sequence
  (older ones are late: skipped and counted), and against its key's newest tombstone when the batch holds a change
  older than the newest one (a Delta table beside the table; the newest sequence is kept in the process, the
  batch's oldest read from its Parquet footer, so a batch newer than every tombstone reads none); the outcomes
  counted and the touched files found in the job that caches the classification; the batch's deletes appended to
  the tombstones (with a transaction identifier of their own) in a thread beside the write, committed before the
  table's commit; the rows the rewrite drops counted as it runs and checked against the counts before the commit;
  one commit with the batch number as its transaction identifier; the settings lakemerge gives a small batch (no
  adaptive execution, shuffle partitions sized from its rows; a batch of over a million changes keeps the
  session's and joins its keys' stored rows by a shuffle, as lakemerge does). No validation of the records, no
  history of applied files (the transaction identifier alone makes it exactly once, for this one writer) and no
  key ranges: the least correct copy-on-write batch we know how to write by hand.
- ``touched_dv``: the same on a table with deletion vectors: the new rows written, the old rows marked in
  deletion vectors from their row indexes; nothing of the table read but its key column.
- ``rules_dv``: ``rules`` on a table with deletion vectors, written as ``touched_dv`` writes.
- ``log``, ``cow`` and ``dv``: lakemerge's ``apply_table`` in ``write_mode = "log"``, ``"copy_on_write"`` and
  ``"deletion_vectors"``, as the harness's ``lakemerge_log``, ``lakemerge`` and ``lakemerge_dv``.
- ``cow_nt`` and ``dv_nt``: ``cow`` and ``dv`` on a table configured with ``tombstones = false``: no tombstone
  read, joined to the changes or appended beside the table (a change older than a delete of its key then inserts
  the key again). What the tombstones cost a batch.
- ``hand``, ``hand_dv`` and ``rewrite``: the harness's hand-written MERGE (on a plain table, on one with
  deletion vectors) and full rewrite.

With ``--prune``, ``bound`` and ``lookup`` read only the files whose key statistics meet the batch's
smallest to largest key (from the feed's Parquet footer): on ``recent`` batches the table's newest
file or two. The bounds are literals in the plan, new code for Spark to compile every batch: on
``recent`` batches that cost both modes more than the files it skips saved (bench/RESULTS.md, "The
floor of a Spark batch at SF1").

Prints each run's seconds per batch, then per mode the median of each run's batches (what the
harness reports), the mean of batches 3 to ``N`` ("warm"), and each round's ratio of ``hand`` and of
``rewrite`` to every mode (above 1, the mode is faster). Only ratios within one round compare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from bench.data import KEY, ROOT

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MODES = (
    "append",
    "bound",
    "lookup",
    "kept",
    "touched",
    "rules",
    "touched_dv",
    "rules_dv",
    "log",
    "cow",
    "cow_nt",
    "dv",
    "dv_nt",
    "hand",
    "hand_dv",
    "rewrite",
)
#: The harness's table layouts (bench/RESULTS.md, "Data and batches").
LAYOUTS = ("clustered", "date", "random")
#: The modes whose table is created with deletion vectors.
VECTORS = ("touched_dv", "rules_dv", "dv", "dv_nt", "hand_dv")
#: The modes each mode is compared with, when they ran.
REFERENCES = ("hand", "hand_dv", "rewrite")
HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Seconds one run (a session, the table's creation and its batches) may take.
TIMEOUT = 1800
#: The harness's data folder (``python -m bench --data``'s default), where the tables go too.
DATA = ROOT


def append_batch(spark: SparkSession, target: str) -> Callable[[str], None]:
    """The ``append`` mode: each batch's rows appended as they are to the Delta table at ``target``."""

    def apply(batch: str) -> None:
        spark.read.parquet(batch).write.format("delta").mode("append").save(target)

    return apply


def append_with_newest(changes: DataFrame, stored: DataFrame, target: str) -> None:
    """Append ``changes`` to the Delta table at ``target`` with a ``stored_seq`` column: the greatest
    ``seq`` of their key in ``stored`` (key and sequence columns), null where it holds none; both
    joins broadcast the batch's side."""
    from pyspark.sql import functions as F

    newest = (
        stored.join(F.broadcast(changes.select(KEY)), KEY, "left_semi")
        .groupBy(KEY)
        .agg(F.max("seq").alias("stored_seq"))
    )
    changes.join(F.broadcast(newest), KEY, "left").write.format("delta").mode("append").save(target)


def lookup_batch(
    spark: SparkSession, path: str, target: str, *, prune: bool = False, earlier: bool = True
) -> Callable[[str], None]:
    """The ``lookup`` mode: each batch's rows with the newest sequence of their key (null where none is
    stored) in the table at ``path`` and the rows appended before to the Delta table at ``target``,
    appended to ``target``; without ``earlier`` (the ``bound`` mode), in the table at ``path`` alone.
    ``prune``: read only the files that may hold a key from the batch's smallest to its largest
    (Delta skips the others by their statistics)."""
    from pyspark.sql import functions as F

    def apply(batch: str) -> None:
        changes = spark.read.parquet(batch)
        stored = spark.read.format("delta").load(path).select(KEY, "seq")
        if earlier and os.path.isdir(os.path.join(target, "_delta_log")):
            stored = stored.unionByName(spark.read.format("delta").load(target).select(KEY, "seq"))
        bounds = key_bounds(batch) if prune else None
        if bounds is not None:
            stored = stored.filter(F.col(KEY).between(*bounds))
        append_with_newest(changes, stored, target)

    return apply


def kept_batch(
    spark: SparkSession, path: str, target: str, kept: list[DataFrame] | None = None
) -> Callable[[str], None]:
    """The ``kept`` mode: ``lookup`` reading the stored keys and sequences from the session's memory
    instead of from Delta: the table's key and sequence columns, cached as the first batch reads
    them (that batch pays for the fill), and each batch's rows, cached as its own write reads them.
    What a process applying batch after batch to a table no one else writes could keep between
    batches (``MEMORY_ONLY``: a partition evicted would be read again from its files). ``kept``:
    where the cached frames are listed, the table's first (the caller may unpersist them)."""
    from pyspark import StorageLevel

    cached: list[DataFrame] = [] if kept is None else kept

    def apply(batch: str) -> None:
        if not cached:
            table = spark.read.format("delta").load(path).select(KEY, "seq")
            cached.append(table.persist(StorageLevel.MEMORY_ONLY))
        changes = spark.read.parquet(batch).persist(StorageLevel.MEMORY_ONLY)
        stored = cached[0]
        for more in cached[1:]:
            stored = stored.unionByName(more.select(KEY, "seq"))
        append_with_newest(changes, stored, target)
        cached.append(changes)

    return apply


def touched_batch(spark: SparkSession, path: str, *, vectors: bool = False) -> Callable[[str], None]:
    """The ``touched`` (``vectors``: ``touched_dv``) mode: see the module."""
    from pyspark.sql import functions as F

    from lakemerge.table import direct, ledger, stats

    def apply(batch: str) -> None:
        from bench.tables import deduped

        changes = deduped(spark, batch)
        columns = [c for c in changes.columns if c != "op"]
        stored, snapshot, _ = stats.read_snapshot(spark, path)
        # A table without deletion vectors has no row index among its metadata columns.
        row = [F.col("_metadata.row_index").alias("_row")] if vectors else []
        keyed = stored.select(KEY, F.col("_metadata.file_path").alias("_file"), *row)
        found = keyed.join(F.broadcast(changes.select(KEY)), KEY, "left_semi")
        if not vectors:
            files = [r[0] for r in found.select("_file").distinct().collect()]
        else:
            found = found.persist()
            files = [r[0] for r in found.select("_file").distinct().collect()]
        number = ledger.txn_version(spark, path) + 1
        opened = direct.open_on(spark, snapshot, files, app_id=ledger.TXN_APP_ID, txn_version=number)
        assert opened is not None
        upserts = changes.filter("op = 'U'").select(*columns)
        if vectors:
            opened.write(upserts)
            opened.mark_rows(found, file=F.col("_file"), row=F.col("_row"))
            found.unpersist()
        else:
            kept = opened.read_touched().join(F.broadcast(changes.select(KEY)), KEY, "left_anti")
            opened.write(kept.unionByName(upserts))
            opened.remove_touched()
        opened.commit(app_id=ledger.TXN_APP_ID, txn_version=number, metrics={"operationNumSourceRows": 0}, record="{}")

    return apply


def rules_batch(spark: SparkSession, path: str, graves: str, *, vectors: bool = False) -> Callable[[str], None]:
    """The ``rules`` (``vectors``: ``rules_dv``) mode (see the module): tombstones go to the Delta
    table at ``graves``."""
    import threading

    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from lakemerge.batch.plan import BROADCAST_ROWS
    from lakemerge.spark import tuning
    from lakemerge.spark.scoped import scoped_conf
    from lakemerge.table import direct, ledger, stats

    newest_grave: list[int] = []  # the newest tombstone's sequence (this process is the only writer)

    def apply(batch: str) -> None:
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(batch).metadata.num_rows
        small = rows <= BROADCAST_ROWS
        with scoped_conf(spark, tuning.small_batch_settings(spark, rows) if small else {}):
            settled(batch, small)

    def settled(batch: str, small: bool) -> None:
        from bench.tables import deduped

        changes = deduped(spark, batch)
        columns = [c for c in changes.columns if c != "op"]
        stored, snapshot, _ = stats.read_snapshot(spark, path)
        # (the keys of the records as read: duplicates do no harm to a semi-join)
        keys = F.broadcast(spark.read.parquet(batch).select(KEY))
        row = [F.col("_metadata.row_index").alias("_row")] if vectors else []
        found = stored.select(KEY, F.col("seq").alias("_t_seq"), F.col("_metadata.file_path").alias("_file"), *row)
        found = found.join(keys, KEY, "left_semi")
        # (a larger batch joins its keys' stored rows by a shuffle of those rows, as lakemerge does)
        joined = changes.join(F.broadcast(found) if small else found, KEY, "left")
        late = F.col("seq") < F.col("_t_seq")
        if newest_grave and sequence_bounds(batch)[0] < newest_grave[0]:
            tombs = spark.read.format("delta").load(graves).join(keys, KEY, "left_semi")
            newest = tombs.groupBy(KEY).agg(F.max("seq").alias("_g_seq"))
            joined = joined.join(F.broadcast(newest), KEY, "left")
            late = late | (F.col("_t_seq").isNull() & (F.col("seq") < F.col("_g_seq")))
        outcome = (
            F.when(F.coalesce(late, F.lit(False)), "late")
            .when(F.col("_t_seq").isNull() & (F.col("op") == "D"), "absent")
            .when(F.col("_t_seq").isNull(), "insert")
            .when(F.col("op") == "D", "delete")
            .otherwise("update")
        )
        classified = joined.withColumn("_outcome", outcome).persist()
        replaced = F.col("_outcome").isin("update", "delete")
        counted = classified.groupBy("_outcome").agg(
            F.count(F.lit(1)).alias("n"), F.collect_set(F.when(replaced, F.col("_file"))).alias("files")
        )
        counts: dict[str, int] = {}
        files: set[str] = set()
        for row in counted.collect():
            counts[row["_outcome"]] = row["n"]
            files.update(row["files"])
        number = ledger.txn_version(spark, path) + 1
        opened = direct.open_on(spark, snapshot, sorted(files), app_id=ledger.TXN_APP_ID, txn_version=number)
        assert opened is not None
        failed: list[BaseException] = []
        graves_written = _in_thread(lambda: _append_graves(spark, classified, graves, number), failed)
        fresh = classified.filter(F.col("_outcome").isin("insert", "update")).select(*columns)
        if vectors:
            opened.write(fresh)
            marked = opened.mark_rows(classified.filter(replaced), file=F.col("_file"), row=F.col("_row"))
            dropped = marked.get("numModifiedRows", 0)
        else:
            drop = classified.filter(replaced).select(F.col(KEY).alias("_k"), F.lit(True).alias("_drop"))
            read = opened.read_touched().join(F.broadcast(drop), F.col(KEY) == F.col("_k"), "left")
            seen = Observation("rules")
            read = read.observe(seen, F.count_if(F.col("_drop").isNotNull()).alias("dropped"))
            opened.write(read.filter(F.col("_drop").isNull()).select(*columns).unionByName(fresh))
            opened.remove_touched()
            dropped = seen.get["dropped"]
        graves_written.join()
        if failed:
            raise failed[0]
        expected = counts.get("update", 0) + counts.get("delete", 0)
        if dropped != expected:
            raise RuntimeError(f"the write replaced {dropped} rows where the batch counted {expected}")
        opened.commit(app_id=ledger.TXN_APP_ID, txn_version=number, metrics={"operationNumSourceRows": 0}, record="{}")
        if counts.get("delete", 0) + counts.get("absent", 0):
            newest_grave[:] = [max([*newest_grave, sequence_bounds(batch)[1]])]
        classified.unpersist()

    def _in_thread(work: Callable[[], None], failed: list[BaseException]) -> threading.Thread:
        def run() -> None:
            try:
                work()
            except BaseException as error:  # (raised by the batch once it joins the thread)
                failed.append(error)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    return apply


def _append_graves(spark: SparkSession, classified: DataFrame, graves: str, number: int) -> None:
    """Append the batch's deletes (applied, or of absent keys) to the tombstone table at ``graves``,
    once per batch ``number`` (Delta's transaction identifier for the writer)."""
    from pyspark.sql import functions as F

    deletes = classified.filter((F.col("op") == "D") & F.col("_outcome").isin("delete", "absent"))
    writer = deletes.select(KEY, "seq").coalesce(1).write.format("delta").mode("append")
    writer.option("txnAppId", "floor-rules").option("txnVersion", number).save(graves)


def sequence_bounds(batch: str) -> tuple[int, int]:
    """The smallest and largest ``seq`` of a Parquet file, from its footer's statistics."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    meta = pq.ParquetFile(batch).metadata
    column = meta.schema.names.index("seq")
    found = [meta.row_group(i).column(column).statistics for i in range(meta.num_row_groups)]
    return min(f.min for f in found), max(f.max for f in found)


def key_bounds(batch: str) -> tuple[int, int] | None:
    """The smallest and largest key of a Parquet file, from its footer's statistics (``None`` when a
    row group has none: the batch is then read unpruned)."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    meta = pq.ParquetFile(batch).metadata
    column = meta.schema.names.index(KEY)
    found = [meta.row_group(i).column(column).statistics for i in range(meta.num_row_groups)]
    if not found or any(f is None or not f.has_min_max for f in found):
        return None
    return min(f.min for f in found), max(f.max for f in found)


def run_one(mode: str, count: int, kind: str, sf: float, prune: bool = False, layout: str = "clustered") -> list[float]:
    """Create the table of ``layout`` and apply ``count`` batches in ``mode`` in this process: each
    batch's seconds. ``prune``: ``bound`` and ``lookup`` read only the files that may hold the batch's
    key range (see :func:`lookup_batch`)."""
    from bench import peers

    root = f"{DATA}/sf{sf:g}"
    batches = [f"{root}/batch-{kind}-{n}.parquet" for n in range(1, count + 1)]
    spark = peers.session()
    path, target = f"{DATA}/floor-table", f"{DATA}/floor-table-beside"
    for folder in (path, target):
        peers.clean(folder)
    peers._create_delta(spark, f"{root}/orders.parquet", path, layout, deletion_vectors=mode in VECTORS)
    appliers: dict[str, Callable[[], Callable[[str], None]]] = {
        "append": lambda: append_batch(spark, target),
        "bound": lambda: lookup_batch(spark, path, target, prune=prune, earlier=False),
        "lookup": lambda: lookup_batch(spark, path, target, prune=prune),
        "kept": lambda: kept_batch(spark, path, target),
        "touched": lambda: touched_batch(spark, path),
        "rules": lambda: rules_batch(spark, path, target),
        "touched_dv": lambda: touched_batch(spark, path, vectors=True),
        "rules_dv": lambda: rules_batch(spark, path, target, vectors=True),
        "log": lambda: peers.lakemerge_batch(spark, path, layout, "log", batches[0]),
        "cow": lambda: peers.lakemerge_batch(spark, path, layout, "copy_on_write", batches[0]),
        "dv": lambda: peers.lakemerge_batch(spark, path, layout, "deletion_vectors", batches[0]),
        "cow_nt": lambda: peers.lakemerge_batch(spark, path, layout, "copy_on_write", batches[0], tombstones=False),
        "dv_nt": lambda: peers.lakemerge_batch(spark, path, layout, "deletion_vectors", batches[0], tombstones=False),
        "hand": lambda: peers.hand_merge_batch(spark, path),
        "hand_dv": lambda: peers.hand_merge_batch(spark, path),
        "rewrite": lambda: peers.full_rewrite_batch(spark, path, layout),
    }
    times = peers._timed(batches, appliers[mode]())
    spark.stop()
    for folder in (path, target):
        peers.clean(folder)
    return times


def summary(runs: dict[str, list[list[float]]]) -> list[str]:
    """The lines that sum up ``runs`` (per mode, each round's seconds per batch)."""
    lines = ["", "mode: medians of each round (their median); warm means, batches 3 on (their median)"]
    medians = {mode: [statistics.median(times) for times in rounds] for mode, rounds in runs.items()}
    for mode, rounds in runs.items():
        warm = [statistics.mean(times[2:]) for times in rounds if len(times) > 2]
        line = f"  {mode}: {' '.join(f'{m:.3f}' for m in medians[mode])} ({statistics.median(medians[mode]):.3f} s)"
        if warm:
            line += f"; warm {' '.join(f'{w:.3f}' for w in warm)} ({statistics.median(warm):.3f} s)"
        lines.append(line)
    for reference in (r for r in REFERENCES if r in runs and len(runs) > 1):
        lines.append(f"{reference} / mode, by the medians of each round (their median):")
        for mode in runs:
            if mode == reference:
                continue
            ratios = [r / m for r, m in zip(medians[reference], medians[mode], strict=True)]
            lines.append(f"  {mode}: {' '.join(f'{x:.2f}' for x in ratios)} ({statistics.median(ratios):.2f}x)")
    return lines


def _shown(folder: str) -> str:
    """``folder`` relative to the checkout this harness is in, when it lies inside it."""
    inside = os.path.commonpath([os.path.abspath(folder), HARNESS]) == HARNESS
    return os.path.relpath(folder, HARNESS) if inside else folder


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["--one"]:
        import lakemerge

        mode, count, kind, sf, prune, layout = argv[1], int(argv[2]), argv[3], float(argv[4]), argv[5], argv[6]
        times = run_one(mode, count, kind, sf, prune == "prune", layout)
        print("FLOOR " + json.dumps({"times": times, "library": lakemerge.__file__}), flush=True)
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__.split("\n\n")[0])
    parser.add_argument("modes", nargs="*", metavar="MODE", help=f"any of {', '.join(MODES)} (default: all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--batches", default="uniform-0.1")
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--layout", choices=LAYOUTS, default="clustered")
    parser.add_argument(
        "--prune",
        action="store_true",
        help="bound and lookup read only the files that may hold the batch's key range (new literals every batch)",
    )
    args = parser.parse_args(argv)
    modes = list(dict.fromkeys(args.modes or MODES))
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}: choose from {', '.join(MODES)}")
    if args.rounds < 1 or args.count < 3:
        parser.error("--rounds must be at least 1 and --count at least 3 (batches 3 on are the warm ones)")
    runs: dict[str, list[list[float]]] = {mode: [] for mode in modes}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (HARNESS, os.environ.get("PYTHONPATH")) if p)}
    began = time.perf_counter()
    for number in range(1, args.rounds + 1):
        for mode in modes:
            command = [sys.executable, "-m", "bench.floor", "--one", mode, str(args.count), args.batches, str(args.sf)]
            command += ["prune" if args.prune else "whole", args.layout]
            try:
                done = subprocess.run(command, capture_output=True, text=True, env=env, cwd="/tmp", timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                print(f"round {number} {mode}: no result in {TIMEOUT} s")
                return 1
            found = [line for line in done.stdout.splitlines() if line.startswith("FLOOR ")]
            if done.returncode or not found:
                print(f"round {number} {mode}: failed: {(done.stderr or done.stdout).strip()[-400:]}")
                return 1
            run = json.loads(found[-1][len("FLOOR ") :])
            if not runs[mode] and mode == "log":
                print(f"(lakemerge of {_shown(os.path.dirname(run['library']))})")
            runs[mode].append(run["times"])
            print(f"round {number} {mode}: {run['times']}", flush=True)
    for line in summary(runs):
        print(line)
    print(f"\n({time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
