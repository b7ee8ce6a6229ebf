"""One peer in a process of its own, stepped by the harness a batch at a time.

``python -m bench.worker '<json>'``, the job's keys ``peer``, ``source`` (the TPC-H Parquet),
``layout``, ``feed`` (the first batch's file), ``workdir`` and ``conf`` (Spark settings). The worker
creates the peer's table (untimed) and answers; then it reads one command a line on standard input
and answers each with one line on standard output, JSON both:

- (no command: the table is created) → ``{"ready": true}``
- ``{"apply": BATCH}`` → ``{"seconds": S}``: the batch applied, timed around the write alone
- ``{"finish": true}`` → ``{"checksum": {...}}``: the final table checksummed, removed, and the
  process ends
- any failure → ``{"error": "..."}`` (the traceback goes to standard error), the table removed, and
  the process ends with status 1; so does a closed standard input without ``finish``.

Everything else the process prints, its JVM's output included, goes to standard error: standard
output carries the answers alone.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import IO, Any

from bench.tables import Prepared, clean, timed


def prepare(job: dict[str, Any], path: str, warehouse: str) -> Prepared:
    """The job's peer with its table at ``path`` (an Iceberg peer's in a catalog at ``warehouse``)."""
    from bench import hudi, peers

    peer, source, layout = job["peer"], job["source"], job["layout"]
    conf = job.get("conf") or {}
    if peer in hudi.PEERS:
        return hudi.prepare(peer, source, path, layout, warehouse, conf)
    if peer == "delta_rs":
        return peers.delta_rs(source, path, layout)
    return peers.prepare_spark(peer, source, path, layout, job["feed"], warehouse, conf)


def reason(exc: BaseException) -> str:
    """A failure in one line: the exception's type and the first lines of its message that are not
    a stack trace (a Py4J error's first line names only the call)."""
    lines = [line.strip() for line in str(exc).splitlines()]
    lines = [line.lstrip(": ") for line in lines if line and not line.startswith("at ")]
    return f"{type(exc).__name__}: {' | '.join(lines[:3])}"[:600]


def serve(peer: Prepared, commands: Iterable[str], answers: IO[str]) -> int:
    """Answer the harness's ``commands`` (lines) for the prepared ``peer``; the exit status."""
    for line in commands:
        command = json.loads(line)
        try:
            if "apply" in command:
                _answer(answers, {"seconds": timed(peer.apply, command["apply"])})
                continue
            found = peer.checksum()
            peer.stop()
        except Exception as exc:
            traceback.print_exc()
            _answer(answers, {"error": reason(exc)})
            return 1
        _answer(answers, {"checksum": found})
        return 0
    return 1


def _answer(answers: IO[str], reply: dict[str, Any]) -> None:
    answers.write(json.dumps(reply) + "\n")
    answers.flush()


def main(argv: list[str], make: Callable[[dict[str, Any], str, str], Prepared] = prepare) -> int:
    """Run the job ``argv[0]``; ``make``: what prepares its peer (:func:`prepare`: the harness's
    peers)."""
    job = json.loads(argv[0])
    # The answers get standard output to themselves: what prints to it from here on goes to
    # standard error (file descriptor 1 is redirected, so the JVM, started later, inherits that).
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    os.makedirs(job["workdir"], exist_ok=True)
    path = os.path.join(job["workdir"], f"{job['peer']}-table")
    warehouse = os.path.join(job["workdir"], f"{job['peer']}-iceberg")
    clean(path)
    clean(warehouse)
    try:
        try:
            peer = make(job, path, warehouse)
        except Exception as exc:
            traceback.print_exc()
            _answer(answers, {"error": reason(exc)})
            return 1
        _answer(answers, {"ready": True})
        return serve(peer, sys.stdin, answers)
    finally:
        clean(path)
        clean(warehouse)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
