"""The harness's side of :mod:`bench.worker`: the peers of a cell alive together, each in its own
process, stepped batch by batch.

:func:`run_cell` starts the peers one after another (each creates its table, untimed; one at a time,
so that no setup competes with another), then for each batch sends it to every peer in turn and
waits for its answer (A B C A B C ...): a batch of one peer is compared with the same batch of the
others run seconds to minutes before or after it, not tens of minutes. Then every peer is asked for
its checksum and ends. A peer that fails or runs out of time is marked so, with its reason, and
ended; the others go on.

With ``alive`` set, the peers are stepped in groups of at most that many (:func:`groups`), one group
after the other, each group interleaved; a peer always shares its group with its reference peers
(:data:`REFERENCES`).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from bench import procs

#: The peer each peer's ratio is read against, which must be stepped beside it (the Spark 3.5
#: Iceberg peer is a calibration of the other Iceberg merge-on-read peer's Spark).
REFERENCES = {
    "lakemerge": "hand_merge",
    "lakemerge_log": "hand_merge",
    "lakemerge_dv": "hand_merge_dv",
    "iceberg_mor_spark35": "iceberg_mor",
}
#: Peers alive at once by default: a Spark peer's processes held 1.4-2.1 GB resident when idle after
#: three SF1 batches, growing each batch towards its 2 GB heap and what the JVM holds beside it
#: (bench/RESULTS.md, "Running the benchmark"); six of them fit a 24 GB machine with room to spare.
ALIVE = 6


@dataclass(frozen=True)
class Start:
    """How to start one peer's worker: its command line, its environment, and the file its standard
    error goes to."""

    peer: str
    command: list[str]
    env: dict[str, str]
    log: str


class Failed(Exception):
    """A peer that stopped answering: ``status`` ``failed`` or ``timeout``, and why."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Worker:
    """One peer's running worker; ``budget``: the seconds it may take in all (setup, batches,
    checksum), counting only the harness's waits on it."""

    def __init__(self, start: Start, budget: float) -> None:
        self.start = start
        self.budget = budget
        self.spent = 0.0
        os.makedirs(os.path.dirname(start.log) or ".", exist_ok=True)
        with open(start.log, "w") as log:
            # Its own session: the worker and its JVM are one process group, ended together.
            self.process = subprocess.Popen(
                start.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=start.env,
                start_new_session=True,
            )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin: IO[str] = self.process.stdin
        self._answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            self._answers.put(line)
        self._answers.put(None)

    def ask(self, command: dict[str, Any] | None) -> dict[str, Any]:
        """Send ``command`` (none: wait for the worker's first answer) and return the answer.

        Raises:
            Failed: the worker answered an error, ended without answering, or took longer than what
                is left of its budget.
        """
        begin = time.perf_counter()
        try:
            if command is not None:
                try:
                    self._stdin.write(json.dumps(command) + "\n")
                    self._stdin.flush()
                except OSError:
                    raise Failed("failed", self._ended()) from None
            try:
                line = self._answers.get(timeout=max(self.budget - self.spent, 0.0))
            except queue.Empty:
                raise Failed("timeout", f"over {self.budget:g} s") from None
        finally:
            self.spent += time.perf_counter() - begin
        if line is None:
            raise Failed("failed", self._ended())
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise Failed("failed", str(answer["error"]))
        return answer

    def _ended(self) -> str:
        code = self.process.wait()
        with open(self.start.log, errors="replace") as fh:
            tail = [line.strip() for line in fh.read().strip().splitlines()[-5:]]
        return f"ended with status {code}: " + " | ".join(tail)[-600:]

    def end(self, grace: float = 0.0) -> None:
        """End the worker and everything it started, after ``grace`` seconds for it to end by itself."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace)
        # The whole group: a JVM the worker started may outlive it by a moment.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        with contextlib.suppress(OSError):
            self._stdin.close()


def groups(peers: Sequence[str], alive: int | None) -> list[list[str]]:
    """``peers`` in groups of at most ``alive`` (``None``: one group), in their order, each peer in
    the group of the reference it is read against (:data:`REFERENCES`).

    Raises:
        ValueError: ``alive`` is below 1, or below a reference's peers and itself.
    """
    if alive is None:
        return [list(peers)]
    if alive < 1:
        raise ValueError("--alive must be at least 1")
    # Each reference with the peers read against it, as one unit; every other peer alone.
    units: list[list[str]] = []
    unit_of: dict[str, list[str]] = {}
    for peer in peers:
        anchor = REFERENCES.get(peer) if REFERENCES.get(peer) in peers else peer
        if anchor not in unit_of:
            unit_of[anchor] = []
            units.append(unit_of[anchor])
        unit_of[anchor].append(peer)
        unit_of.setdefault(peer, unit_of[anchor])
    found: list[list[str]] = []
    for unit in units:
        if len(unit) > alive:
            raise ValueError(
                f"--alive {alive} is too few for {', '.join(unit)}, stepped together: at least {len(unit)}"
            )
        fit = next((g for g in found if len(g) + len(unit) <= alive), None)
        if fit is None:
            found.append(list(unit))
        else:
            fit += unit
    order = {peer: i for i, peer in enumerate(peers)}
    return [sorted(group, key=order.__getitem__) for group in found]


def run_cell(
    starts: Sequence[Start],
    batches: Sequence[str],
    *,
    timeout: float,
    alive: int | None = None,
    origin: float | None = None,
    clock: Callable[[], float] = time.time,
) -> dict[str, dict[str, Any]]:
    """Step every peer of ``starts`` through ``batches`` (see the module); per peer: ``status``
    (``ok``, ``failed``, ``timeout``) and ``reason``, ``times`` (seconds per batch), ``wall`` (the
    harness's waits on it), ``checksum``, ``at`` (when each batch began, seconds after ``origin``),
    ``group`` (which group it was stepped in), ``rss_mb`` (its processes' resident megabytes after
    each round, every peer idle) and ``others_cpu`` (per batch, the CPU seconds the other peers'
    processes used while it ran)."""
    origin = clock() if origin is None else origin
    by_peer = {s.peer: s for s in starts}
    results: dict[str, dict[str, Any]] = {}
    for number, group in enumerate(groups([s.peer for s in starts], alive)):
        cell = _Group(results, number)
        for peer in group:
            cell.start(by_peer[peer], timeout)
        for batch in batches:
            for peer in list(cell.running):
                before = cell.cpu(besides=peer)
                results[peer]["at"].append(round(clock() - origin, 1))
                answer = cell.step(peer, {"apply": batch})
                if answer is not None:
                    results[peer]["times"].append(float(answer["seconds"]))
                    results[peer]["others_cpu"].append(round(cell.cpu(besides=peer) - before, 2))
            cell.measure()
        for peer in list(cell.running):
            answer = cell.step(peer, {"finish": True})
            if answer is not None:
                results[peer]["checksum"] = answer["checksum"]
                cell.running.pop(peer).end(grace=60)
        for peer, worker in cell.workers.items():
            results[peer]["wall"] = round(worker.spent, 1)
    return results


class _Group:
    """The workers of one group of a cell, and the results they fill in."""

    def __init__(self, results: dict[str, dict[str, Any]], number: int) -> None:
        self.results = results
        self.number = number
        self.workers: dict[str, Worker] = {}
        self.running: dict[str, Worker] = {}

    def start(self, start: Start, timeout: float) -> None:
        """Start a peer's worker and wait until its table is created."""
        entry = {"status": "ok", "group": self.number, "times": [], "at": [], "rss_mb": [], "others_cpu": []}
        self.results[start.peer] = entry
        try:
            worker = Worker(start, timeout)
        except OSError as exc:
            entry.update(status="failed", reason=f"not started: {exc}")
            return
        self.workers[start.peer] = self.running[start.peer] = worker
        self.step(start.peer, None)

    def step(self, peer: str, command: dict[str, Any] | None) -> dict[str, Any] | None:
        """Send ``command`` to ``peer``; on a failure the peer is marked, ended and not stepped again."""
        worker = self.running[peer]
        try:
            return worker.ask(command)
        except Failed as failure:
            self.results[peer].update(status=failure.status, reason=failure.reason)
            self.running.pop(peer).end()
            return None

    def cpu(self, besides: str) -> float:
        """The CPU seconds every running peer's processes but ``besides``'s have used."""
        processes = procs.snapshot()
        found = [procs.usage(w.process.pid, processes) for p, w in self.running.items() if p != besides]
        return sum(f[1] for f in found if f)

    def measure(self) -> None:
        """Every running peer's resident megabytes, now."""
        processes = procs.snapshot()
        for peer, worker in self.running.items():
            found = procs.usage(worker.process.pid, processes)
            self.results[peer]["rss_mb"].append(round(found[0]) if found else None)
