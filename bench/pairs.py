"""Interleaved A/B of checkouts: ``python -m bench.pairs [--sf SF] MODE COUNT BATCHES ROUNDS NAME=DIR...``.

Each round runs every checkout once, in the order given, each in a fresh process: the harness's
clustered table is created from ``/tmp/lakemerge-bench/sfSF`` (``SF`` default 1; ``python -m
bench`` makes it), and ``COUNT`` batches named ``BATCHES`` (e.g. ``uniform-0.1``) are applied in
``MODE`` (``copy_on_write``, ``deletion_vectors``, ``log``, or ``hand`` for the hand-written MERGE). A
checkout is a directory holding ``src/lakemerge`` (``git worktree add DIR COMMIT``): its lakemerge
runs under this harness (this file's ``bench``), so only the library differs between the sides.

On a machine whose speed drifts by 10-30 % over minutes (ours), runs of one checkout after the
other compare drift, not code: alternating them round by round and comparing each round's pair
does. Prints each run's seconds per batch, then per checkout the sum over batches 3 to ``COUNT``
(the first two warm the JVM) in each round, and each round's ratio to the first checkout; then the
same sums of the CPU seconds the Spark JVM used during those batches (its tasks, its planning and
its JIT compiler together; read from ``/proc``: NaN where there is none).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.data import ROOT

#: The folder holding this harness's ``bench`` package.
HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_one(mode: str, count: int, kind: str, sf: float = 1) -> tuple[list[float], list[float]]:
    """Apply the batches in this process (the checkout is whatever ``lakemerge`` imports): each
    batch's seconds, and the Spark JVM's CPU seconds during it."""
    from bench import peers

    root = f"{ROOT}/sf{sf:g}"
    batches = [f"{root}/batch-{kind}-{n}.parquet" for n in range(1, count + 1)]
    spark = peers.session()
    path = "/tmp/lakemerge-bench/pairs-table"
    peers.clean(path)
    peers._create_delta(spark, f"{root}/orders.parquet", path, "clustered", deletion_vectors=mode == "deletion_vectors")
    if mode == "hand":
        apply = peers.hand_merge_batch(spark, path)
    else:
        apply = peers.lakemerge_batch(spark, path, "clustered", mode, batches[0])
    cpu = jvm_cpu(spark)
    times, used = [], []
    for batch in batches:
        began, began_cpu = time.perf_counter(), cpu()
        apply(batch)
        times.append(round(time.perf_counter() - began, 3))
        used.append(round(cpu() - began_cpu, 3))
    spark.stop()
    peers.clean(path)
    return times, used


def jvm_cpu(spark: Any) -> Callable[[], float]:
    """The CPU seconds (user and system) the session's JVM has used so far, as a function."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    tick = os.sysconf("SC_CLK_TCK")

    def seconds() -> float:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return math.nan
        return (int(fields[11]) + int(fields[12])) / tick

    return seconds


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        import lakemerge

        times, used = run_one(argv[1], int(argv[2]), argv[3], float(argv[4]))
        print("PAIRS " + json.dumps({"library": lakemerge.__file__, "times": times, "cpu": used}), flush=True)
        return 0
    sf = 1.0
    if argv[:1] == ["--sf"] and len(argv) > 1:
        sf, argv = float(argv[1]), argv[2:]
    if len(argv) < 6:
        print(__doc__)
        return 2
    mode, count, kind, rounds = argv[0], int(argv[1]), argv[2], int(argv[3])
    if count < 3:
        print("COUNT must be at least 3: batches 3 to COUNT are compared")
        return 2
    checkouts = [item.split("=", 1) for item in argv[4:]]
    sums: dict[str, list[float]] = {name: [] for name, _ in checkouts}
    cpu_sums: dict[str, list[float]] = {name: [] for name, _ in checkouts}
    for number in range(1, rounds + 1):
        for name, folder in checkouts:
            folder = os.path.abspath(folder)
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(folder, "src"), HARNESS])}
            done = subprocess.run(
                [sys.executable, "-m", "bench.pairs", "--one", mode, str(count), kind, str(sf)],
                capture_output=True,
                text=True,
                env=env,
                cwd="/tmp",
            )
            found = [line for line in done.stdout.splitlines() if line.startswith("PAIRS ")]
            if done.returncode or not found:
                print(f"round {number} {name}: failed: {(done.stderr or done.stdout).strip()[-400:]}")
                return 1
            run = json.loads(found[-1][len("PAIRS ") :])
            if not os.path.abspath(run["library"]).startswith(folder + os.sep):
                print(f"round {number} {name}: ran the lakemerge of {run['library']}, not of {folder}")
                return 1
            times = run["times"]
            sums[name].append(sum(times[2:]))
            cpu_sums[name].append(sum(run["cpu"][2:]))
            print(f"round {number} {name}: {times} (JVM CPU {run['cpu']})", flush=True)
    first = checkouts[0][0]
    for title, table in (("seconds", sums), ("JVM CPU seconds", cpu_sums)):
        print(f"\n{title}, sum of batches 3-{count} per round (ratio to {first}):")
        for name, values in table.items():
            ratios = " ".join(f"{v / b:.2f}" for v, b in zip(values, table[first], strict=True))
            total = sum(values) / sum(table[first])
            print(f"  {name}: {' '.join(f'{v:.2f}' for v in values)}  total {sum(values):.2f}  ({ratios}; {total:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
