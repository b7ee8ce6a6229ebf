"""A live view of Spark's work for humans: one bar per active stage with its task counts.

Polls Spark's status tracker from a background thread; shown only on a terminal, never with
``--json`` or ``--quiet``.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


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
    is a terminal)."""
    if not enabled or not sys.stderr.isatty():
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    done = threading.Event()
    progress = bars(console)
    overall = progress.add_task(label, total=None)
    stages: dict[int, Any] = {}

    def poll() -> None:
        while not done.wait(0.25):
            active = set()
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is None:
                    continue
                active.add(stage_id)
                name = str(info.name).split(" at ")[0][:40]
                if stage_id not in stages:
                    stages[stage_id] = progress.add_task(f"stage {stage_id}: {name}", total=info.numTasks)
                progress.update(stages[stage_id], completed=info.numCompletedTasks, total=info.numTasks)
            for stage_id in list(stages):
                if stage_id not in active:
                    progress.remove_task(stages.pop(stage_id))
            progress.update(overall, description=f"{label}: {len(active)} active Spark stage(s)")

    with progress:
        worker = threading.Thread(target=poll, name="lakemerge-progress", daemon=True)
        worker.start()
        try:
            yield
        finally:
            done.set()
            worker.join(timeout=2)
