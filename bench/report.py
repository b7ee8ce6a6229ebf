"""Turn the harness's ``results.json`` into RESULTS-style tables and a PNG plot.

``python -m bench.report [--out DIR] RESULTS_JSON...`` rewrites ``DIR/results-table.md`` (the
measured part that bench/RESULTS.md quotes) and ``DIR/bench.png``; ``DIR`` defaults to
``/tmp/lakemerge-bench/out``, outside the source tree. ``python -m bench.report bench/results.json``
redraws the committed results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from bench.data import OUT

BASE = "lakemerge"
#: ``log`` mode, the second yardstick: the mode the performance targets are measured with
#: (bench/RESULTS.md, "Performance targets").
LOG = "lakemerge_log"


def _median(times: list[float]) -> float:
    return statistics.median(times)


def table(results: list[dict[str, Any]], base_peer: str = BASE) -> str:
    """Markdown: one row per (sf, cell), median seconds per peer and its ratio to ``base_peer``."""
    cells: dict[tuple[float, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    peers: list[str] = []
    for r in results:
        cells[(r["sf"], r["cell"])][r["peer"]] = r
        if r["peer"] not in peers:
            peers.append(r["peer"])
    head = ["SF", "cell (layout:keys:batch %)", "batch rows", *peers, "checksums"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (sf, cell), by_peer in cells.items():
        base = by_peer.get(base_peer)
        base_s = _median(base["times"]) if base and base.get("status") == "ok" else None
        row = [f"{sf:g}", cell, str(next(iter(by_peer.values()))["batch_rows"][0])]
        sums = set()
        for peer in peers:
            r = by_peer.get(peer)
            if r is None or r.get("status") != "ok":
                row.append(r["status"] if r else "—")
                continue
            s = _median(r["times"])
            sums.add(json.dumps(r["checksum"], sort_keys=True))
            row.append(f"{s:.1f} s" if peer == base_peer or base_s is None else f"{s:.1f} s ({s / base_s:.2f}×)")
        row.append("equal" if len(sums) == 1 else f"DIFFER ({len(sums)})")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def spread(results: list[dict[str, Any]]) -> list[str]:
    """Per cell stepped batch by batch (results with ``at``), how far apart in time its peers ran
    the same batch: the longest stretch from a batch's first start to its last, over the batches."""
    starts: dict[tuple[float, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        for n, at in enumerate(r.get("at") or []):
            starts[(r["sf"], r["cell"])][n].append(at)
    lines = []
    for (sf, cell), by_batch in starts.items():
        widest = max(max(found) - min(found) for found in by_batch.values())
        lines.append(f"- SF{sf:g} {cell}: every peer began each batch within {widest:.0f} s of the first to begin it")
    return [*lines, ""] if lines else []


def plot(results: list[dict[str, Any]], target: str) -> None:
    """Median seconds vs batch size (per peer, clustered/uniform cells) and vs table size (SF)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    by_peer: dict[str, list[tuple[float, float]]] = defaultdict(list)
    by_sf: dict[str, list[tuple[float, float]]] = defaultdict(list)
    sfs = sorted({r["sf"] for r in results})
    for r in results:
        if r.get("status") != "ok":
            continue
        layout, shape, fraction = r["cell"].split(":")
        if layout == "clustered" and shape == "uniform":
            if r["sf"] == sfs[-1]:
                by_peer[r["peer"]].append((float(fraction), _median(r["times"])))
            if abs(float(fraction) * r["sf"] - 0.1) < 1e-9:
                by_sf[r["peer"]].append((r["sf"], _median(r["times"])))
    # One color and marker per peer, the same in both plots (Matplotlib's default cycle repeats after ten).
    names = list(dict.fromkeys(r["peer"] for r in results))
    palette = plt.get_cmap("tab20")
    style = {
        name: {"color": palette((2 * i) % 20 + (i // 10) % 2), "marker": "osD^v<>ph*"[i % 10]}
        for i, name in enumerate(names)
    }
    for peer, points in by_peer.items():
        points.sort()
        left.plot([p[0] for p in points], [p[1] for p in points], label=peer, **style[peer])
    left.set_xscale("log")
    left.set_xlabel(f"batch size (% of table), SF{sfs[-1]:g}, clustered, uniform keys")
    left.set_ylabel("median seconds per batch")
    left.legend(fontsize=8)
    for peer, points in by_sf.items():
        points.sort()
        right.plot([p[0] for p in points], [p[1] for p in points], label=peer, **style[peer])
    right.set_xscale("log")
    right.set_xlabel("TPC-H scale factor (same batch: 0.1 % of SF1, clustered)")
    right.set_ylabel("median seconds per batch")
    if by_sf:
        right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    plt.close(fig)


def environment(ran: set[str] | frozenset[str] = frozenset()) -> str:
    """The machine and versions, for the report (those of the Spark 3.5 peers when ``ran`` names one)."""
    import importlib.metadata as md

    versions = []
    for name in ("pyspark", "delta-spark", "deltalake", "duckdb", "duckdb-extension-tpch"):
        try:
            versions.append(f"{name} {md.version(name)}")
        except md.PackageNotFoundError:
            versions.append(f"{name} missing")
    from bench import envs, hudi

    try:
        installed = md.version("pyspark")
    except md.PackageNotFoundError:
        installed = envs.SPARK41.spark
    elsewhere = envs.iceberg_environment(installed)
    iceberg = envs.iceberg_package(elsewhere.spark if elsewhere else installed)
    versions.append(f"Iceberg {iceberg.rsplit(':', 1)[-1]} ({iceberg.split(':')[1]})")
    if elsewhere is not None:
        versions[-1] += f" on PySpark {elsewhere.spark} with Delta's {envs.line(elsewhere.spark)} build"
    on_35 = sorted({package for peer, package in hudi.PACKAGES.items() if peer in ran})
    if on_35:
        versions.append(f"on PySpark {hudi.SPARK_VERSION}: " + ", ".join(p.split(":", 1)[1] for p in on_35))
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return (
        f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        + ", ".join(versions)
        + f"; load average at report time {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}"
    )


def write(raws: list[str], out: str) -> None:
    """Write ``results-table.md`` and ``bench.png`` under ``out`` from the raw results files
    (several when the peers were run by several invocations of the harness)."""
    os.makedirs(out, exist_ok=True)
    results: list[dict[str, Any]] = []
    commands = []
    for raw in raws:
        with open(raw) as fh:
            found = json.load(fh)
        results += found["results"]
        commands.append(f"`{found['command']}`")
    text = [
        f"Command(s): {'; '.join(commands)}",
        "",
        f"Machine: {environment({r['peer'] for r in results})}",
        "",
        table(results),
        "",
    ]
    if any(r["peer"] == LOG for r in results):
        text += [f"The same medians, each peer's ratio to `{LOG}`:", "", table(results, LOG), ""]
    text += spread(results)
    skipped = {r["peer"]: r["reason"] for r in results if r.get("status") in ("skipped", "failed", "timeout")}
    for peer, reason in skipped.items():
        text.append(f"- {peer}: {reason}")
    with open(os.path.join(out, "results-table.md"), "w") as fh:
        fh.write("\n".join(text) + "\n")
    plot(results, os.path.join(out, "bench.png"))


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT, help=f"where results-table.md and bench.png go (default {OUT})")
    parser.add_argument("results", nargs="+", metavar="RESULTS_JSON", help="raw results of the harness")
    args = parser.parse_args(argv)
    write(args.results, args.out)
    print(f"{os.path.join(args.out, 'results-table.md')} and {os.path.join(args.out, 'bench.png')} written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
