"""A live view of Spark's work for humans: one bar per active stage with its task counts.

Polls Spark's status tracker from a background thread (a Spark Connect session reports its stages
itself); shown only on a terminal, never with ``--json`` or ``--quiet``.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from lakemerge import api


def bars(console: Console) -> Progress:
    """The display: per task a spinner, its description as written (never read as markup: it holds
    table names and Spark's call sites), a bar, its task counts and the time elapsed."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


@contextlib.contextmanager
def spark_progress(spark: Any, console: Console, *, enabled: bool, label: str = "working") -> Iterator[None]:
    """Show Spark's active stages on ``console`` while the block runs (when ``enabled`` and stderr
    is a terminal): polled from the session's status tracker, or as a Spark Connect session
    reports them."""
    if not enabled or not sys.stderr.isatty():
        yield
        return
    done = threading.Event()
    progress = bars(console)
    overall = progress.add_task(label, total=None)
    shown: dict[str, Any] = {}
    lock = threading.Lock()

    def update(active: list[Any]) -> None:
        with lock:
            keys = set()
            for stage in active:
                keys.add(stage.key)
                if stage.key not in shown:
                    shown[stage.key] = progress.add_task(stage.name, total=stage.total)
                progress.update(shown[stage.key], completed=stage.done, total=stage.total)
            for key in list(shown):
                if key not in keys:
                    progress.remove_task(shown.pop(key))
            progress.update(overall, description=f"{label}: {len(keys)} active Spark stage(s)")

    def poll() -> None:
        while not done.wait(0.25):
            update(api.spark_stages(spark) or [])

    with progress:
        stop = api.on_spark_progress(spark, update)
        worker = None
        if stop is None:
            worker = threading.Thread(target=poll, name="lakemerge-progress", daemon=True)
            worker.start()
        try:
            yield
        finally:
            done.set()
            if worker is not None:
                worker.join(timeout=2)
            if stop is not None:
                stop()
