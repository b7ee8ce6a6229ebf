"""Interleaved A/B of checkouts: ``python -m bench.pairs MODE COUNT BATCHES ROUNDS NAME=DIR...``.

Each round runs every checkout once, in the order given, each in a fresh process: the harness's
clustered SF1 table is created from ``/tmp/lakemerge-bench/sf1`` (``python -m bench`` makes it),
and ``COUNT`` batches named ``BATCHES`` (e.g. ``uniform-0.1``) are applied in ``MODE``
(``copy_on_write``, ``deletion_vectors``, ``log``, or ``hand`` for the hand-written MERGE). A
checkout is a directory holding ``src/lakemerge`` (``git worktree add DIR COMMIT``): its lakemerge
runs under this harness (this file's ``bench``), so only the library differs between the sides.

On a machine whose speed drifts by 10-30 % over minutes (ours), runs of one checkout after the
other compare drift, not code: alternating them round by round and comparing each round's pair
does. Prints each run's seconds per batch, then per checkout the sum over batches 3 to ``COUNT``
(the first two warm the JVM) in each round, and each round's ratio to the first checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = "/tmp/lakemerge-bench/sf1"
#: The folder holding this harness's ``bench`` package.
HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_one(mode: str, count: int, kind: str) -> list[float]:
    """Apply the batches in this process (the checkout is whatever ``lakemerge`` imports)."""
    from bench import peers

    batches = [f"{ROOT}/batch-{kind}-{n}.parquet" for n in range(1, count + 1)]
    spark = peers.session()
    path = "/tmp/lakemerge-bench/pairs-table"
    peers.clean(path)
    peers._create_delta(spark, f"{ROOT}/orders.parquet", path, "clustered", deletion_vectors=mode == "deletion_vectors")
    if mode == "hand":
        apply = peers.hand_merge_batch(spark, path)
    else:
        apply = peers.lakemerge_batch(spark, path, "clustered", mode, batches[0])
    times = peers._timed(batches, apply)
    spark.stop()
    peers.clean(path)
    return times


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        import lakemerge

        times = run_one(argv[1], int(argv[2]), argv[3])
        print("PAIRS " + json.dumps({"library": lakemerge.__file__, "times": times}), flush=True)
        return 0
    if len(argv) < 6:
        print(__doc__)
        return 2
    mode, count, kind, rounds = argv[0], int(argv[1]), argv[2], int(argv[3])
    checkouts = [item.split("=", 1) for item in argv[4:]]
    sums: dict[str, list[float]] = {name: [] for name, _ in checkouts}
    for number in range(1, rounds + 1):
        for name, folder in checkouts:
            folder = os.path.abspath(folder)
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(folder, "src"), HARNESS])}
            done = subprocess.run(
                [sys.executable, "-m", "bench.pairs", "--one", mode, str(count), kind],
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
            print(f"round {number} {name}: {times}", flush=True)
    first = checkouts[0][0]
    print(f"\nsum of batches 3-{count} per round (ratio to {first}):")
    for name, values in sums.items():
        ratios = " ".join(f"{v / b:.2f}" for v, b in zip(values, sums[first], strict=True))
        print(f"  {name}: {' '.join(f'{v:.2f}' for v in values)}  total {sum(values):.2f}  ({ratios})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
