"""The latest version of a table as the session's backend reads it (:mod:`lakemerge.table.snapshot`),
taken once per table while a batch is planned."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from lakemerge.spark.backends import backend
from lakemerge.table.snapshot import Snapshot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: The snapshots taken within :func:`one_snapshot_each`, by path (``None``: outside it).
_SNAPSHOTS: ContextVar[dict[str, Snapshot] | None] = ContextVar("lakemerge_snapshots", default=None)


@contextmanager
def one_snapshot_each() -> Iterator[None]:
    """Within the block, :func:`latest_snapshot` brings each table up to date once and then gives
    that snapshot again. A batch's planning reads the state of its table and log a dozen times
    (its ledger, their sizes, their files' key statistics, the files to read), and each update
    lists the table's Delta log: planned within this block, the batch sees one version of each
    table throughout, and its commit (outside it) checks that version against the latest."""
    token = _SNAPSHOTS.set({})
    try:
        yield
    finally:
        _SNAPSHOTS.reset(token)


def latest_snapshot(spark: SparkSession, path: str) -> Snapshot:
    """The table's latest version (once for each path within :func:`one_snapshot_each`)."""
    taken = _SNAPSHOTS.get()
    if taken is not None and path in taken:
        return taken[path]
    snapshot = _open(spark, path)
    if taken is not None and snapshot.version >= 0:
        taken[path] = snapshot
    return snapshot


def is_delta(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` holds a Delta table (within :func:`one_snapshot_each`, a table found is not
    looked for again)."""
    seen = _SNAPSHOTS.get()
    if seen is not None and path in seen:
        return True
    if _jvm(spark):
        from lakemerge.table.jvm_snapshot import is_delta as found
    else:
        from lakemerge.table.sql_snapshot import is_delta as found
    return found(spark, path)


def commits(spark: SparkSession, path: str, first: int, last: int) -> list[dict[str, Any]] | None:
    """The commit metadata of versions ``first`` to ``last`` read from their commit files without a
    Spark job (see :func:`lakemerge.table.ledger.commit_rows`), or ``None`` where that cannot be
    done: a session reading the log through SQL alone reads the history instead."""
    if not _jvm(spark):
        return None
    from lakemerge.table.jvm_snapshot import commits as read

    return read(spark, path, first, last)


def _open(spark: SparkSession, path: str) -> Snapshot:
    if _jvm(spark):
        from lakemerge.table.jvm_snapshot import JvmSnapshot

        return JvmSnapshot.latest(spark, path)
    from lakemerge.table.sql_snapshot import SqlSnapshot

    return SqlSnapshot.latest(spark, path)


def _jvm(spark: SparkSession) -> bool:
    return backend(spark).jvm
