"""The benchmark harness: ``python -m bench --sf 1 --batches 3 --cells ... --peers ...``.

For each scale factor it generates TPC-H ``orders`` (DuckDB dbgen) and, per cell
(``layout:shape:fraction``), ``--batches`` change batches; then starts every peer of the cell in a
process of its own (its own Spark session, same resources), one after the other, and steps them
batch by batch, A B C A B C ... (:mod:`bench.stepping`; ``--alive N``: in groups of at most N). It
checks that all peers end with the same table (row count and checksum), and writes under ``--out``
(default ``DATA/out``, where ``--data`` defaults to ``/tmp/lakemerge-bench``: outside the source
tree) the raw results (``results.json``, rewritten after each cell) and, at the end,
``results-table.md`` and ``bench.png`` (:func:`bench.report.write`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from bench import data, envs, hudi, peers, registry, report, stepping
from bench.tables import LAYOUTS

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
    parser.add_argument("--peers", nargs="+", default=list(registry.PEERS), choices=registry.PEERS)
    parser.add_argument("--data", default=data.ROOT, help="where data and tables go")
    parser.add_argument(
        "--out", help=f"where the raw results, results-table.md and bench.png go (default: DATA/out, {data.OUT})"
    )
    parser.add_argument("--results", default="results.json", help="file name of the raw results under --out")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per peer and cell")
    parser.add_argument(
        "--alive",
        type=int,
        default=stepping.ALIVE,
        help="peers alive at once: a cell's peers stepped in groups of at most N, each peer with the one its "
        f"ratio is read against (default {stepping.ALIVE})",
    )
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

    try:
        stepping.groups(args.peers, args.alive)
    except ValueError as exc:
        parser.error(str(exc))
    for spec in args.cells:
        parts = spec.partition("@")[0].split(":")
        if len(parts) != 3 or parts[0] not in LAYOUTS or parts[1] not in ("uniform", "recent"):
            parser.error(f"bad cell {spec!r}: layout:keys:percent, layout one of {LAYOUTS}, keys uniform or recent")

    out = args.out or os.path.join(args.data, "out")
    os.makedirs(out, exist_ok=True)
    results: list[dict[str, Any]] = []
    raw = os.path.join(out, args.results)
    started = time.time()
    from lakemerge.spark.versions import installed_spark

    installed = installed_spark()
    pythons, unmade = _interpreters(args, installed)
    for sf in args.sf:
        root = os.path.join(args.data, f"sf{sf:g}")
        source = data.generate(sf, root)
        for spec in args.cells:
            cell, _, only = spec.partition("@")
            if only and float(only) != sf:
                continue
            layout, shape, fraction = cell.split(":")
            batches = [
                data.make_batch(source, root, number=n, fraction=float(fraction), shape=shape, seed=n)
                for n in range(1, args.batches + 1)
            ]
            job = {"source": source, "layout": layout, "feed": batches[0].path, "workdir": os.path.join(root, "w")}
            starts = [
                _start(peer, pythons[peer], registry.environment(peer, installed), job, cell, conf)
                for peer in args.peers
                if peer in pythons
            ]
            found = stepping.run_cell(
                starts, [b.path for b in batches], timeout=args.timeout, alive=args.alive, origin=started
            )
            for peer in args.peers:
                entry: dict[str, Any] = {"sf": sf, "cell": cell, "peer": peer, "batch_rows": [b.rows for b in batches]}
                entry.update(found.get(peer) or {"status": "failed", "reason": unmade[peer]})
                results.append(entry)
                print(json.dumps(entry), flush=True)
            with open(raw, "w") as fh:
                json.dump({"command": _command(), "started": started, "results": results}, fh, indent=1)
    report.write([raw], out)
    return 0


def _interpreters(args: argparse.Namespace, installed: str) -> tuple[dict[str, str], dict[str, str]]:
    """The Python of each peer of ``args.peers`` (an environment made on first use), and why a peer
    has none."""
    made: dict[envs.Environment | None, str] = {None: sys.executable}
    failed: dict[envs.Environment, str] = {}
    pythons, unmade = {}, {}
    for peer in args.peers:
        environment = registry.environment(peer, installed)
        if environment is not None and environment not in made and environment not in failed:
            try:
                made[environment] = envs.interpreter(args.data, environment, args.timeout)
            except (OSError, subprocess.SubprocessError) as exc:
                failed[environment] = f"no PySpark {environment.spark} environment: {exc}"[-600:]
        if environment in made:
            pythons[peer] = made[environment]
        else:
            assert environment is not None
            unmade[peer] = failed[environment]
    return pythons, unmade


def _start(
    peer: str, python: str, environment: envs.Environment | None, job: dict[str, Any], cell: str, conf: dict[str, str]
) -> stepping.Start:
    """How to start ``peer``'s worker with ``python`` on ``job`` (its table under the job's work
    folder, its standard error in a log file beside it)."""
    if peer in hudi.PEERS:
        # Spark 3.5: only the settings that are not Delta's.
        conf = hudi.engine_conf({**peers.BASE_CONF, **conf})
    command = [python, "-m", "bench.worker", json.dumps({**job, "peer": peer, "conf": conf})]
    if environment is None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    else:
        env = envs.process_env(dict(os.environ), environment)
    log = os.path.join(job["workdir"], "logs", f"{cell.replace(':', '-')}-{peer}.log")
    return stepping.Start(peer=peer, command=command, env=env, log=log)


def _command() -> str:
    return "python -m bench " + " ".join(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
