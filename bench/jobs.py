"""The Spark jobs of a warm lakemerge batch, from Spark's status store:
``python -m bench.jobs [MODE] [COUNT] [BATCHES] [LAYOUT] [SF]``.

Creates the harness's table (``LAYOUT``: clustered, random or date; default clustered) from
``/tmp/lakemerge-bench/sfSF`` (``SF`` default 1; run ``python -m bench`` once to generate it), applies ``COUNT``
(default 8) batches named ``BATCHES`` (default ``uniform-0.1``) in ``MODE`` (default ``log``; ``hand`` and
``hand_dv`` for the hand-written MERGE, on a table without and with deletion vectors; ``rules`` and ``rules_dv``
for the floor's batch of those names, ``python -m bench.floor``), and
prints each batch's time (and the driver JVM's time compiling and collecting garbage during it, and
the classes it loaded: Spark's generated code, code first used in that batch, the JDK's reflection accessors)
and, for the last one, every Spark job it ran: when it started after the
batch did, how long it took, its tasks and where it came from (the lakemerge line, or Delta's
description such as "Filtering files for query"). The gaps between jobs are the driver's planning.
Then every stage of those jobs: its tasks, their summed run time, and the records it read from files
or the cache (``in``) and from a shuffle (``shuffled``) and wrote (``out``): a stage of one task
over many rows runs on one core.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any


def main(argv: list[str]) -> int:
    defaults = ["log", "8", "uniform-0.1", "clustered", "1"]
    mode, count, kind, layout, sf = (argv + defaults[len(argv) :])[:5]
    from bench import peers

    root = f"/tmp/lakemerge-bench/sf{float(sf):g}"
    batches = [f"{root}/batch-{kind}-{n}.parquet" for n in range(1, int(count) + 1)]
    spark = peers.session()
    path = "/tmp/lakemerge-bench/jobs-table"
    peers.clean(path)
    vectors = mode in ("deletion_vectors", "hand_dv", "rules_dv")
    peers._create_delta(spark, f"{root}/orders.parquet", path, layout, deletion_vectors=vectors)
    if mode.startswith("hand"):
        apply = peers.hand_merge_batch(spark, path)
    elif mode.startswith("rules"):
        from bench import floor

        peers.clean(f"{path}-graves")
        apply = floor.rules_batch(spark, path, f"{path}-graves", vectors=mode == "rules_dv")
    else:
        apply = peers.lakemerge_batch(spark, path, layout, mode, batches[0])
    store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
    jvm_times = _jvm_clock(spark)
    classes = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getClassLoadingMXBean()  # type: ignore[union-attr]
    for number, batch in enumerate(batches, start=1):
        began_ms = time.time() * 1000
        compiling, collecting = jvm_times()
        loaded = classes.getTotalLoadedClassCount()
        start = time.perf_counter()
        apply(batch)
        took = time.perf_counter() - start
        compiled, collected = jvm_times()
        print(
            f"batch {number}: {took:.2f} s (JVM: {compiled - compiling:.2f} s compiling, "
            f"{collected - collecting:.2f} s collecting garbage, "
            f"{classes.getTotalLoadedClassCount() - loaded} classes loaded)"
        )
        if number == len(batches):
            for line in _jobs_since(store, began_ms):
                print(line)
            for line in _stages_since(spark, store, began_ms):
                print(line)
    spark.stop()
    for folder in (path, f"{path}-graves"):
        peers.clean(folder)
    return 0


def _jvm_clock(spark: object) -> Callable[[], tuple[float, float]]:
    """A function giving the driver JVM's seconds spent so far in its JIT compilers (summed over
    the compiler threads, so it may exceed the wall time) and in garbage collection."""
    factory = spark.sparkContext._jvm.java.lang.management.ManagementFactory  # type: ignore[attr-defined]
    compiler = factory.getCompilationMXBean()
    collectors = list(factory.getGarbageCollectorMXBeans())

    def read() -> tuple[float, float]:
        gc = sum(c.getCollectionTime() for c in collectors)
        return compiler.getTotalCompilationTime() / 1000, gc / 1000

    return read


def _since(items: Any, began_ms: float) -> list[tuple[float, int, Any]]:
    """Of a Scala sequence of Spark's job or stage data, those submitted after ``began_ms`` (epoch
    milliseconds): when each started after ``began_ms``, how long it took (ms), and the item."""
    found = []
    for index in range(items.size()):
        item = items.apply(index)
        submitted = item.submissionTime()
        if not submitted.isDefined() or submitted.get().getTime() < began_ms:
            continue
        start = submitted.get().getTime()
        completed = item.completionTime()
        end = completed.get().getTime() if completed.isDefined() else start
        found.append((start - began_ms, end - start, item))
    return found


def _jobs_since(store: object, began_ms: float) -> list[str]:
    """One line per job submitted after ``began_ms`` (epoch milliseconds), in submission order."""
    rows = []
    for at, took, job in _since(store.jobsList(None), began_ms):  # type: ignore[attr-defined]
        description = job.description()
        where = str(description.get()) if description.isDefined() else str(job.name())
        rows.append((at, took, job.jobId(), job.numTasks(), where[:100]))
    return [
        f"  +{at:6.0f} ms {took:5d} ms  job {job_id:4d}  tasks {tasks:3d}  {where}"
        for at, took, job_id, tasks, where in sorted(rows)
    ]


def _stages_since(spark: object, store: object, began_ms: float) -> list[str]:
    """One line per stage submitted after ``began_ms`` (epoch milliseconds), in submission order:
    its tasks, their summed run time and the records it read (files or cache), shuffled in and wrote."""
    gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
    no_quantiles = gateway.new_array(gateway.jvm.double, 0)
    stages = store.stageList(None, False, False, no_quantiles, None)  # type: ignore[attr-defined]
    rows = [
        (
            at,
            took,
            s.stageId(),
            s.numTasks(),
            s.executorRunTime(),
            s.inputRecords(),
            s.shuffleReadRecords(),
            s.outputRecords(),
        )
        for at, took, s in _since(stages, began_ms)
    ]
    return [
        f"  +{at:6.0f} ms {took:5d} ms  stage {number:4d}  tasks {tasks:3d}  run {run:5d} ms  "
        f"in {read:8d}  shuffled {shuffled:8d}  out {out:8d}"
        for at, took, number, tasks, run, read, shuffled, out in sorted(rows)
    ]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
