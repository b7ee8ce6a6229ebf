"""What a peer's processes hold and use: the resident memory and CPU seconds of a process and
every process under it (a worker and its JVM), read from Linux's ``/proc``; ``None`` where there is
no ``/proc``."""

from __future__ import annotations

import os

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (field 3, the state, first)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def snapshot() -> dict[int, tuple[int, float, float]]:
    """Every process now: its parent, its CPU seconds (user and system) and its resident megabytes;
    empty where there is no ``/proc``."""
    found: dict[int, tuple[int, float, float]] = {}
    if not os.path.isdir("/proc"):
        return found
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                # Fields 4, 14 and 15 are the parent, utime and stime, 24 is rss (pages); the list
                # starts at field 3.
                cpu = (int(fields[11]) + int(fields[12])) / _TICKS
                found[int(entry)] = (int(fields[1]), cpu, int(fields[21]) * _PAGE / 2**20)
    return found


def usage(pid: int, processes: dict[int, tuple[int, float, float]]) -> tuple[float, float] | None:
    """The resident megabytes and the CPU seconds of ``pid`` and every process under it, from a
    :func:`snapshot`; ``None`` when ``pid`` is not in it."""
    if pid not in processes:
        return None
    children: dict[int, list[int]] = {}
    for member, (parent, _, _) in processes.items():
        children.setdefault(parent, []).append(member)
    rss = cpu = 0.0
    todo = [pid]
    while todo:
        current = todo.pop()
        _, used, resident = processes[current]
        rss, cpu = rss + resident, cpu + used
        todo += children.get(current, [])
    return rss, cpu
