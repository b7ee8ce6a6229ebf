"""Run one peer on one cell in this process (a fresh Spark session), print a JSON line.

Called by the harness as ``python -m bench.worker '<json>'`` with keys ``peer``, ``source``,
``layout``, ``batches``, ``workdir`` and (optional) ``conf``; prints ``{"times": [...], "checksum": {...}}``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys


def main(argv: list[str]) -> int:
    job = json.loads(argv[0])
    peer, layout = job["peer"], job["layout"]
    workdir = job["workdir"]
    path = os.path.join(workdir, f"{peer}-table")
    os.makedirs(workdir, exist_ok=True)
    from bench import peers

    peers.clean(path)
    if peer == "delta_rs":
        times = peers.delta_rs(job["source"], path, layout, job["batches"])
        checksum = peers.rs_checksum(path)
    else:
        os.environ["BENCH_WAREHOUSE"] = os.path.join(workdir, "iceberg")
        shutil.rmtree(os.environ["BENCH_WAREHOUSE"], ignore_errors=True)
        spark = peers.session(iceberg=peer.startswith("iceberg"), extra=job.get("conf") or None)
        times = peers.SPARK_PEERS[peer](spark, job["source"], path, layout, job["batches"])
        checksum = peers.spark_checksum(spark, peer, path)
        spark.stop()
    peers.emit(path, times, checksum)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
