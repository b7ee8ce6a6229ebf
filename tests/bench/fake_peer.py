"""A peer that applies nothing, for the harness's stepping: ``python -m tests.bench.fake_peer '<job>'``
through :func:`bench.worker.main`, the job's ``journal`` getting a line per batch it is sent.

Its ``behaviour`` (default ``ok``): ``error`` (batch ``at`` raises), ``exit`` (the process ends
without answering at batch ``at``), ``hang`` (batch ``at`` never ends; it started a child process
first, as a worker starts its JVM, and journals its pid), ``setup`` (the table cannot be created),
``busy`` (a thread spins the CPU from setup on, while the others are stepped).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

from bench import worker
from bench.tables import Prepared


def _journal(job: dict[str, Any], line: str) -> None:
    with open(job["journal"], "a") as fh:
        fh.write(line + "\n")


def _spin() -> None:
    while True:
        sum(range(10_000))


def make(job: dict[str, Any], path: str, warehouse: str) -> Prepared:
    behaviour, at = job.get("behaviour", "ok"), job.get("at", 2)
    if behaviour == "setup":
        raise RuntimeError("cannot create the table\nsecond line of the message\n\tat some.Java(Frame.java:1)")
    if behaviour == "busy":
        threading.Thread(target=_spin, daemon=True).start()
    os.makedirs(path)
    applied: list[str] = []

    def apply(batch: str) -> None:
        applied.append(batch)
        _journal(job, f"{job['peer']} {batch}")
        if len(applied) == at and behaviour == "error":
            raise ValueError(f"bad batch {batch}")
        if len(applied) == at and behaviour == "exit":
            os._exit(3)
        if len(applied) == at and behaviour == "hang":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
            _journal(job, f"child {child.pid}")
            time.sleep(300)
        time.sleep(job.get("seconds", 0.01))

    return Prepared(apply=apply, checksum=lambda: {"rows": len(applied), "table": int(os.path.isdir(path))})


if __name__ == "__main__":
    sys.exit(worker.main(sys.argv[1:], make))
