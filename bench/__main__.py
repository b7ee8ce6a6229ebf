"""The benchmark harness: ``python -m bench --sf 1 --batches 3 --cells ... --peers ...``.

For each scale factor it generates TPC-H ``orders`` (DuckDB dbgen) and, per cell
(``layout:shape:fraction``), ``--batches`` change batches; then runs every peer on every cell in a
fresh subprocess (its own Spark session, same resources), checks that all peers end with the same
table (row count and checksum), and writes under ``--out`` (default ``DATA/out``, where ``--data``
defaults to ``/tmp/lakemerge-bench``: outside the source tree) the raw results (``results.json``,
rewritten after each run) and, at the end, ``results-table.md`` and ``bench.png``
(:func:`bench.report.write`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from bench import data, hudi, peers, report

DEFAULT_CELLS = (
    "clustered:uniform:0.1",
    "clustered:uniform:1",
    "clustered:uniform:10",
    "clustered:recent:1",
    "random:uniform:1",
    "date:recent:1",
    "clustered:uniform:1@0.1",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, nargs="+", default=[1.0], help="TPC-H scale factors")
    parser.add_argument("--batches", type=int, default=3, help="change batches per cell")
    parser.add_argument(
        "--cells", nargs="+", default=list(DEFAULT_CELLS), help="layout:shape:percent, with @SF: at that SF only"
    )
    parser.add_argument("--peers", nargs="+", default=list(peers.PEERS), choices=peers.PEERS)
    parser.add_argument("--data", default=data.ROOT, help="where data and tables go")
    parser.add_argument(
        "--out", help=f"where the raw results, results-table.md and bench.png go (default: DATA/out, {data.OUT})"
    )
    parser.add_argument("--results", default="results.json", help="file name of the raw results under --out")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per peer and cell")
    parser.add_argument(
        "--conf",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="Spark settings for every peer's session, after lakemerge's defaults (a diagnostic run)",
    )
    args = parser.parse_args(argv)
    conf = dict(item.split("=", 1) for item in args.conf if "=" in item)
    if len(conf) != len(args.conf):
        parser.error("--conf takes KEY=VALUE pairs")

    out = args.out or os.path.join(args.data, "out")
    os.makedirs(out, exist_ok=True)
    results: list[dict[str, Any]] = []
    raw = os.path.join(out, args.results)
    started = time.time()
    for sf in args.sf:
        root = os.path.join(args.data, f"sf{sf:g}")
        source = data.generate(sf, root)
        for spec in args.cells:
            cell, _, only = spec.partition("@")
            if only and float(only) != sf:
                continue
            layout, shape, fraction = cell.split(":")
            if layout not in peers.LAYOUTS or shape not in ("uniform", "recent"):
                parser.error(f"bad cell {cell!r}: layout one of {peers.LAYOUTS}, shape uniform or recent")
            batches = [
                data.make_batch(source, root, number=n, fraction=float(fraction), shape=shape, seed=n)
                for n in range(1, args.batches + 1)
            ]
            for peer in args.peers:
                entry: dict[str, Any] = {
                    "sf": sf,
                    "cell": cell,
                    "peer": peer,
                    "batch_rows": [b.rows for b in batches],
                }
                entry.update(_run(peer, source, layout, [b.path for b in batches], root, args, conf))
                results.append(entry)
                print(json.dumps(entry), flush=True)
                with open(raw, "w") as fh:
                    json.dump({"command": _command(), "started": started, "results": results}, fh, indent=1)
    report.write([raw], out)
    return 0


def _run(
    peer: str, source: str, layout: str, batches: list[str], root: str, args: argparse.Namespace, conf: dict[str, str]
) -> dict[str, Any]:
    job: dict[str, Any] = {
        "peer": peer,
        "source": source,
        "layout": layout,
        "batches": batches,
        "workdir": os.path.join(root, "w"),
        "conf": conf,
    }
    if peer in hudi.PEERS:
        # Spark 3.5 in its own environment: it sees this folder's `bench` and nothing of ours.
        job["conf"] = hudi.engine_conf({**peers.BASE_CONF, **conf})
        try:
            python = hudi.interpreter(args.data, args.timeout)
        except (OSError, subprocess.SubprocessError) as exc:
            return {"status": "failed", "reason": f"no PySpark {hudi.SPARK_VERSION} environment: {exc}"[-600:]}
        command = [python, "-m", "bench.hudi", json.dumps(job)]
        env = hudi.environment(dict(os.environ), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    else:
        command = [sys.executable, "-m", "bench.worker", json.dumps(job)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    begin = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "reason": f"over {args.timeout:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("BENCH ")]
    if done.returncode or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        return {"status": "failed", "reason": " | ".join(tail)[-600:]}
    found = json.loads(lines[-1][len("BENCH ") :])
    return {"status": "ok", "wall": round(time.perf_counter() - begin, 1), **found}


def _command() -> str:
    return "python -m bench " + " ".join(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
