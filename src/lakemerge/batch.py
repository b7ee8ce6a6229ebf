"""Apply one batch of change files to one table: the spine every operation goes through.

feeds (list, read) → changes (normalize, validate, collapse) → apply (classify, merge) → table
(one Delta commit carrying the batch's metrics and files).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from lakemerge.apply import Outcome, classify, write_changes
from lakemerge.changes import collapse, normalize
from lakemerge.changes.normalize import first_bad_row
from lakemerge.config.models import TableConfig
from lakemerge.errors import AccountingError, SchemaError
from lakemerge.feeds import columns as C
from lakemerge.feeds import list_feed_files, read_feed
from lakemerge.results import AppliedFile, BatchMetrics, BatchResult
from lakemerge.spark.errors import translate
from lakemerge.table import delta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def apply_table(
    table: TableConfig,
    *,
    spark: SparkSession,
    inputs: Sequence[str] | None = None,
) -> BatchResult:
    """Apply every change file of ``table``'s feed (or ``inputs``) not applied yet, in one commit.

    Args:
        table: the table and its feed.
        spark: the session to work in.
        inputs: files or directories to read instead of ``table.feed.location``.

    Returns:
        The batch's result; ``version`` is ``None`` when no new file was found.

    Raises:
        InputError: a path is missing or a record is bad (nothing is committed).
        SchemaError: the feed's columns cannot be written to the table (nothing is committed).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started = time.monotonic()
    started_at = int(time.time() * 1000)
    batch_id = uuid.uuid4().hex
    found = list_feed_files(spark, inputs or table.feed.location, file_order=table.feed.file_order)
    exists = delta.table_exists(spark, table.path)
    ledger = delta.applied_files(spark, table.path) if exists else {}
    files = [f for f in found if not delta.check_unchanged(ledger, f.path, f.size, f.modified)]
    skipped = tuple(f.path for f in found if f.path in ledger)
    if not files:
        return BatchResult(
            table=table.name,
            path=table.path,
            batch_id=batch_id,
            version=None,
            created=False,
            files=(),
            skipped_files=skipped,
            metrics=BatchMetrics(),
            seconds=time.monotonic() - started,
        )

    try:
        changes = normalize(spark, table, read_feed(spark, table.feed, files), files)
    except Exception as exc:
        raise (translate(exc, reading=True) or exc) from exc
    frame = changes.frame.persist(StorageLevel.MEMORY_AND_DISK)
    classified = None
    try:
        try:
            stats = frame.agg(F.count(F.lit(1)), F.count(C.ERROR)).collect()[0]
        except Exception as exc:
            raise (translate(exc, reading=True) or exc) from exc
        rows_read, rows_bad = int(stats[0]), int(stats[1])
        if rows_bad:
            raise first_bad_row(changes, files, rows_bad)

        valid = frame.filter(F.col(C.ERROR).isNull())
        stored = None
        if exists:
            stored = spark.read.format("delta").load(table.path)
            _check_table_columns(table, stored.columns)
            valid = delta.conform(valid, stored, changes.data_columns, feed=", ".join(table.feed.location))
        latest = collapse(valid, key=table.key, sequence=table.sequence_columns)
        classified = classify(latest, stored, key=table.key, sequence=table.sequence_columns).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        counts = {str(r[0]): int(r[1]) for r in classified.groupBy(C.OUTCOME).count().collect()}
        collapsed = sum(counts.values())
        metrics = BatchMetrics(
            rows_read=rows_read,
            rows_bad=rows_bad,
            changes=collapsed,
            superseded=rows_read - rows_bad - collapsed,
            inserted=counts.get(Outcome.INSERT, 0),
            updated=counts.get(Outcome.UPDATE, 0),
            deleted=counts.get(Outcome.DELETE, 0),
            late=counts.get(Outcome.LATE, 0),
            deletes_absent=counts.get(Outcome.ABSENT, 0),
        )
        _check_accounting(metrics)
        applied = tuple(AppliedFile(path=f.path, size=f.size, modified=f.modified) for f in files)
        record = {
            "batch_id": batch_id,
            "table": table.name,
            "started_at": started_at,
            "metrics": metrics.__dict__,
            "files": [a.__dict__ for a in applied],
        }
        with delta.commit_record(spark, record), _translated():
            write_changes(
                spark,
                table,
                classified,
                data_columns=changes.data_columns,
                exists=exists,
                writes=metrics.inserted + metrics.updated + metrics.deleted,
                batch_id=batch_id,
            )
    finally:
        frame.unpersist()
        if classified is not None:
            classified.unpersist()

    version, op_metrics = delta.find_commit(spark, table.path, batch_id)
    return BatchResult(
        table=table.name,
        path=table.path,
        batch_id=batch_id,
        version=version,
        created=not exists,
        files=applied,
        skipped_files=skipped,
        metrics=metrics,
        seconds=round(time.monotonic() - started, 3),
        files_added=int(op_metrics.get("numTargetFilesAdded", op_metrics.get("numFiles", 0))),
        files_removed=int(op_metrics.get("numTargetFilesRemoved", op_metrics.get("numRemovedFiles", 0))),
        bytes_added=int(op_metrics.get("numTargetBytesAdded", op_metrics.get("numOutputBytes", 0))),
        bytes_removed=int(op_metrics.get("numTargetBytesRemoved", op_metrics.get("numRemovedBytes", 0))),
    )


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        raise (translate(exc, reading=False) or exc) from exc


def _check_table_columns(table: TableConfig, stored_columns: Sequence[str]) -> None:
    present = {c.lower() for c in stored_columns}
    for role, cols in (("key", table.key), ("sequence", table.sequence_columns)):
        for name in cols:
            if name.lower() not in present:
                raise SchemaError(
                    f"{table.path}: {role} column '{name}' is not in the table ({', '.join(stored_columns)}); "
                    "nothing was applied"
                )


def _check_accounting(m: BatchMetrics) -> None:
    total = m.inserted + m.updated + m.deleted + m.late + m.deletes_absent + m.superseded + m.rows_bad
    if total != m.rows_read:
        raise AccountingError(
            f"internal error: batch row counts do not add up (read {m.rows_read}, accounted {total}); "
            "nothing was committed"
        )
