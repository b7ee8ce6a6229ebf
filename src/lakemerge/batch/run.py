"""``lakemerge run``: apply every pending batch of every table, once or watching the landing zone.

Each table's pending files are applied batch by batch (each up to the table's limits) until none
is left. With ``watch``, the landing zones are polled every ``interval`` seconds until ``stop`` is
set. Stopping never interrupts a commit: the batch in progress finishes, then the loop ends.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from lakemerge.batch.attempts import apply_table
from lakemerge.batch.groups import apply_group, grouped
from lakemerge.config.pipeline import PipelineConfig
from lakemerge.config.table import TableConfig
from lakemerge.errors import LakemergeError
from lakemerge.feeds.archive import archive_files, check_archive
from lakemerge.results import BatchResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_tables(
    tables: Sequence[TableConfig],
    *,
    spark: SparkSession,
    watch: bool = False,
    interval: float = 60.0,
    max_batches: int | None = None,
    stop: threading.Event | None = None,
    on_result: Callable[[BatchResult], None] | None = None,
) -> list[BatchResult]:
    """Apply pending batches until none is left (or, with ``watch``, until ``stop`` is set).

    Args:
        tables: the tables to serve, in order.
        spark: the session to work in.
        watch: keep polling for new files.
        interval: seconds between polls when watching.
        max_batches: stop after this many committed batches in all.
        stop: set it (e.g. from a signal handler) to end after the batch in progress.
        on_result: called with each committed batch's result.

    Returns:
        The committed batches' results, in commit order.
    """
    stop = stop or threading.Event()
    results: list[BatchResult] = []
    _check_archives(spark, tables)
    while True:
        for table in tables:
            while not stop.is_set() and (max_batches is None or len(results) < max_batches):
                with _reporting(results):
                    result = apply_table(table, spark=spark)
                with _reporting([*results, result] if result.version is not None else results):
                    _archive(spark, table, result)
                if result.version is None:
                    break
                results.append(result)
                if on_result:
                    on_result(result)
        done = max_batches is not None and len(results) >= max_batches
        if not watch or done or stop.wait(interval):
            return results


def run_pipeline(
    pipeline: PipelineConfig,
    *,
    spark: SparkSession,
    tables: Sequence[str] | None = None,
    watch: bool = False,
    interval: float = 60.0,
    max_batches: int | None = None,
    stop: threading.Event | None = None,
    on_result: Callable[[BatchResult], None] | None = None,
) -> list[BatchResult]:
    """Like :func:`run_tables` for a pipeline: groups of tables are applied group run by group run
    (one batch per table, then the group's point), the other tables batch by batch."""
    stop = stop or threading.Event()
    names = list(tables) if tables else list(pipeline.tables)
    groups, single = grouped(pipeline, names)
    results: list[BatchResult] = []
    _check_archives(spark, [pipeline.table(n) for n in names])

    def room() -> bool:
        return not stop.is_set() and (max_batches is None or len(results) < max_batches)

    while True:
        for group in groups:
            while room():
                with _reporting(results):
                    committed, point = apply_group(pipeline, group, spark=spark)
                for result in committed:
                    results.append(result)
                    with _reporting(results):
                        _archive(spark, pipeline.table(result.table), result)
                    if on_result:
                        on_result(result)
                if point is None:
                    break
        if single and room():
            left = None if max_batches is None else max_batches - len(results)
            try:
                done = run_tables(
                    [pipeline.table(n) for n in single], spark=spark, max_batches=left, stop=stop, on_result=on_result
                )
            except LakemergeError as exc:
                exc.committed = (*results, *exc.committed)
                raise
            results.extend(done)
        if not watch or not room() or stop.wait(interval):
            return results


@contextlib.contextmanager
def _reporting(results: list[BatchResult]) -> Iterator[None]:
    """A failure in the block carries the batches committed before it (``LakemergeError.committed``)."""
    try:
        yield
    except LakemergeError as exc:
        exc.committed = tuple(results)
        raise


def _check_archives(spark: SparkSession, tables: Sequence[TableConfig]) -> None:
    """Fail before the first batch when a feed's files cannot be archived (:func:`check_archive`)."""
    for table in tables:
        for feed in table.feeds:
            if feed.archive:
                check_archive(spark, feed.location, feed.archive)


def _archive(spark: SparkSession, table: TableConfig, result: BatchResult) -> None:
    """Move the batch's files (and applied files still in place) to their feed's archive."""
    paths = [*result.skipped_files, *(f.path for f in result.files)]
    for feed in table.feeds:
        if feed.archive:
            archive_files(spark, paths, feed.location, feed.archive, conflict=feed.archive_conflict)
