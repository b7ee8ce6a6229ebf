"""Apply one batch of change files to one table: the spine every operation goes through.

feeds (list, read) → changes (normalize, validate, collapse) → apply (classify, merge) → table
(one Delta commit carrying the batch's metrics and files).
"""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from lakemerge.apply import Outcome, classify, write_changes
from lakemerge.changes import collapse, normalize
from lakemerge.changes.normalize import ChangeSet, first_bad_row
from lakemerge.config.models import TableConfig
from lakemerge.errors import AccountingError, ConflictError, SchemaError
from lakemerge.feeds import FeedFile, list_feed_files, read_feed
from lakemerge.feeds import columns as C
from lakemerge.results import AppliedFile, BatchMetrics, BatchResult
from lakemerge.spark.errors import translate
from lakemerge.table import delta, quarantine

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass
class BatchPlan:
    """A batch read, validated, collapsed and classified, ready to commit (or to show, in a dry run).

    Holds persisted frames: call :meth:`release` when done.
    """

    table: TableConfig
    batch_id: str
    started: float
    started_at: int
    files: tuple[FeedFile, ...]
    skipped: tuple[str, ...]
    exists: bool
    txn_version: int
    data_columns: tuple[str, ...]
    metrics: BatchMetrics
    classified: DataFrame
    frames: tuple[DataFrame, ...]
    bad: DataFrame | None = None
    partial: tuple[str, ...] = ()
    truncate_before: Column | None = None

    def release(self) -> None:
        """Unpersist the cached frames."""
        for frame in self.frames:
            frame.unpersist()

    @property
    def applied(self) -> tuple[AppliedFile, ...]:
        """The files as the commit records them."""
        return tuple(AppliedFile(path=f.path, size=f.size, modified=f.modified) for f in self.files)


def select_files(
    spark: SparkSession, table: TableConfig, inputs: Sequence[str] | None
) -> tuple[list[tuple[int, FeedFile]], tuple[str, ...], bool]:
    """The batch's files as (feed index, file): pending files of each feed in turn, each feed's in
    file order, up to the table's batch limits (at least one file); also the files skipped as
    already applied, and whether the table exists. ``inputs`` replaces the first feed's location."""
    exists = delta.table_exists(spark, table.path)
    ledger = delta.applied_files(spark, table.path) if exists else {}
    pending: list[tuple[int, FeedFile]] = []
    skipped: list[str] = []
    for index, feed in enumerate(table.feeds):
        if inputs and index > 0:
            break
        found = list_feed_files(spark, (inputs if inputs else feed.location), file_order=feed.file_order)
        archived = feed.archive is not None
        for f in found:
            if delta.check_unchanged(ledger, f.path, f.size, f.modified, archived=archived):
                skipped.append(f.path)
            else:
                pending.append((index, f))
    chosen: list[tuple[int, FeedFile]] = []
    size = 0
    for index, item in pending:
        if chosen and table.max_files_per_batch is not None and len(chosen) >= table.max_files_per_batch:
            break
        if chosen and table.max_bytes_per_batch is not None and size + item.size > table.max_bytes_per_batch:
            break
        chosen.append((index, item))
        size += item.size
    return chosen, tuple(skipped), exists


def plan_batch(
    table: TableConfig, *, spark: SparkSession, inputs: Sequence[str] | None = None
) -> BatchPlan | NothingPending:
    """Read and classify the next batch of ``table``.

    Raises:
        InputError: a path is missing or a record is bad.
        SchemaError: the feed's columns cannot be written to the table.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started, started_at = time.monotonic(), int(time.time() * 1000)
    batch_id = uuid.uuid4().hex
    chosen, skipped, exists = select_files(spark, table, inputs)
    if not chosen:
        return NothingPending(skipped)
    files = [f for _, f in chosen]
    txn = delta.txn_version(spark, table.path) if exists else 0
    try:
        changes = _read_changes(spark, table, chosen, batch_number=txn + 1)
    except Exception as exc:
        raise (translate(exc, reading=True) or exc) from exc
    frame = changes.frame.persist(StorageLevel.MEMORY_AND_DISK)
    frames = [frame]
    try:
        try:
            ignored_row = F.when(F.col(C.ERROR).isNull() & (F.col(C.OP) == "N"), 1).otherwise(0)
            stats = frame.agg(F.count(F.lit(1)), F.count(C.ERROR), F.sum(ignored_row)).collect()[0]
        except Exception as exc:
            raise (translate(exc, reading=True) or exc) from exc
        rows_read, rows_bad, ignored = int(stats[0]), int(stats[1]), int(stats[2] or 0)
        if table.too_many_bad(rows_bad, rows_read):
            raise first_bad_row(
                changes, files, rows_bad, threshold=table.max_bad_rows > 0 or table.max_bad_fraction is not None
            )
        bad = None
        if rows_bad:
            bad = quarantine.bad_rows(
                frame,
                files=files,
                data_columns=changes.data_columns,
                batch_id=batch_id,
                table=table.name,
            )

        valid = frame.filter(F.col(C.ERROR).isNull() & (F.col(C.OP) != "N"))
        stored = None
        if exists:
            stored = spark.read.format("delta").load(table.path)
            _check_table_columns(table, stored.columns)
            valid = delta.conform(
                valid,
                stored,
                changes.data_columns,
                feed=", ".join(loc for feed in table.feeds for loc in feed.location),
                date_to_timestamp=table.widen_date_to_timestamp,
                table_widens=delta.type_widening_enabled(spark, table.path),
            )
        truncate = _truncate(table, valid, stored) if any(f.truncate_codes for f in table.feeds) else Truncate()
        if truncate.before is not None:
            valid = valid.filter(
                (F.col(C.OP) != "T") & (F.struct(*[F.col(f"`{c}`") for c in table.sequence_columns]) >= truncate.before)
            )
        partial = table.partial_columns(changes.data_columns)
        latest = collapse(valid, key=table.key, sequence=table.sequence_columns, partial=partial)
        classified = classify(
            latest,
            stored,
            key=table.key,
            sequence=table.sequence_columns,
            partition_by=table.partition_by,
            truncate_before=truncate.before,
        ).persist(StorageLevel.MEMORY_AND_DISK)
        frames.append(classified)
        counts = {str(r[0]): int(r[1]) for r in classified.groupBy(C.OUTCOME).count().collect()}
    except BaseException:
        for item in frames:
            item.unpersist()
        raise
    collapsed = sum(counts.values())
    metrics = BatchMetrics(
        rows_read=rows_read,
        rows_bad=rows_bad,
        changes=collapsed,
        superseded=rows_read - rows_bad - ignored - truncate.records - collapsed,
        inserted=counts.get(Outcome.INSERT, 0),
        updated=counts.get(Outcome.UPDATE, 0),
        deleted=counts.get(Outcome.DELETE, 0),
        late=counts.get(Outcome.LATE, 0),
        deletes_absent=counts.get(Outcome.ABSENT, 0),
        truncates=truncate.records,
        truncated=truncate.stored_rows,
        ignored=ignored,
    )
    return BatchPlan(
        table=table,
        batch_id=batch_id,
        started=started,
        started_at=started_at,
        files=tuple(files),
        skipped=skipped,
        exists=exists,
        txn_version=txn + 1,
        data_columns=changes.data_columns,
        metrics=metrics,
        classified=classified,
        frames=tuple(frames),
        bad=bad,
        partial=partial,
        truncate_before=truncate.before,
    )


class _Superseded(Exception):
    """Another writer committed this batch number first; the batch must be planned again."""


def commit_batch(plan: BatchPlan, *, spark: SparkSession) -> BatchResult:
    """Write the plan as one Delta commit carrying its record.

    Raises:
        AccountingError: the plan's counts do not add up (nothing is committed).
        _Superseded: a concurrent writer took the batch number (nothing of this plan is committed).
    """
    metrics = plan.metrics
    check_accounting(metrics)
    record = {
        "batch_id": plan.batch_id,
        "table": plan.table.name,
        "started_at": plan.started_at,
        "txn_version": plan.txn_version,
        "metrics": asdict(metrics),
        "files": [asdict(a) for a in plan.applied],
    }
    if plan.bad is not None:
        with _translated():
            quarantine.write_bad_rows(plan.bad, plan.table.quarantine)
    with delta.commit_record(spark, record, txn_version=plan.txn_version), _translated():
        write_changes(
            spark,
            plan.table,
            plan.classified,
            data_columns=plan.data_columns,
            exists=plan.exists,
            writes=metrics.inserted + metrics.updated + metrics.deleted + metrics.truncated,
            partial=plan.partial,
            truncate_before=plan.truncate_before,
            txn_version=plan.txn_version,
        )
    found = delta.find_commit(spark, plan.table.path, plan.batch_id)
    if found is None:
        raise _Superseded()
    version, op_metrics = found
    removed = int(op_metrics.get("numTargetFilesRemoved", op_metrics.get("numRemovedFiles", 0)))
    return BatchResult(
        table=plan.table.name,
        path=plan.table.path,
        batch_id=plan.batch_id,
        version=version,
        created=not plan.exists,
        files=plan.applied,
        skipped_files=plan.skipped,
        metrics=metrics,
        seconds=round(time.monotonic() - plan.started, 3),
        files_added=int(op_metrics.get("numTargetFilesAdded", op_metrics.get("numFiles", 0))),
        files_removed=removed,
        bytes_added=int(op_metrics.get("numTargetBytesAdded", op_metrics.get("numOutputBytes", 0))),
        bytes_removed=int(op_metrics.get("numTargetBytesRemoved", op_metrics.get("numRemovedBytes", 0))),
        files_touched=removed,
    )


def apply_table(
    table: TableConfig,
    *,
    spark: SparkSession,
    inputs: Sequence[str] | None = None,
    dry_run: bool = False,
) -> BatchResult:
    """Apply the next batch of ``table``'s feed (or of ``inputs``) in one commit.

    The batch is every pending file, in file order, up to the table's batch limits. A commit that
    loses a race to a concurrent writer is planned again from scratch (the files it had may now be
    applied), with exponential backoff, up to ``table.commit_attempts`` times.

    Args:
        table: the table and its feed.
        spark: the session to work in.
        inputs: files or directories to read instead of ``table.feed.location``.
        dry_run: plan the batch and report what it would do, committing nothing.

    Returns:
        The batch's result; ``version`` is ``None`` when no file was pending (or in a dry run).

    Raises:
        InputError: a path is missing or a record is bad (nothing is committed).
        SchemaError: the feed's columns cannot be written to the table (nothing is committed).
        ConflictError: concurrent writers won every attempt.
    """
    started = time.monotonic()
    for attempt in range(1, table.commit_attempts + 1):
        try:
            return _attempt(table, spark=spark, inputs=inputs, dry_run=dry_run, started=started)
        except Exception as exc:
            conflict = exc if isinstance(exc, _Superseded) else translate(exc, reading=False)
            if not isinstance(conflict, (_Superseded, ConflictError)):
                raise
            if attempt == table.commit_attempts:
                raise ConflictError(
                    f"{table.path}: gave up after {attempt} attempts: concurrent writers kept changing the table "
                    f"({conflict or 'batch number taken'}); nothing of this batch was committed"
                ) from None
            time.sleep(min(30.0, 0.2 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def _attempt(
    table: TableConfig, *, spark: SparkSession, inputs: Sequence[str] | None, dry_run: bool, started: float
) -> BatchResult:
    plan = plan_batch(table, spark=spark, inputs=inputs)
    if isinstance(plan, NothingPending):
        return _nothing(table, plan.skipped, started)
    try:
        return preview(plan, spark=spark) if dry_run else commit_batch(plan, spark=spark)
    finally:
        plan.release()


def preview(plan: BatchPlan, *, spark: SparkSession) -> BatchResult:
    """What committing ``plan`` would do, committing nothing: the metrics, and how many stored
    files and partitions the changes touch."""
    from pyspark.sql import functions as F

    frame = plan.classified
    outcome = F.col(C.OUTCOME)
    matched = outcome.isin(Outcome.UPDATE.value, Outcome.DELETE.value)
    partition_by = plan.table.partition_by
    aggregates = [F.count_distinct(F.when(matched, F.col(C.STORED_FILE))).alias("files")] if plan.exists else []
    if partition_by:
        new = F.when(
            outcome.isin(Outcome.INSERT.value, Outcome.UPDATE.value),
            F.to_json(F.struct(*[F.col(f"`{c}`") for c in partition_by])),
        )
        old = F.when(matched, F.col(C.STORED_PARTITION)) if plan.exists else F.lit(None).cast("string")
        touched = frame.select(F.explode(F.array(new, old)).alias("p")).filter("p IS NOT NULL")
        partitions = touched.distinct().count()
    else:
        partitions = 1 if plan.metrics.inserted + plan.metrics.updated + plan.metrics.deleted else 0
    files = int(frame.agg(*aggregates).collect()[0]["files"]) if aggregates else 0
    return BatchResult(
        table=plan.table.name,
        path=plan.table.path,
        batch_id=plan.batch_id,
        version=None,
        created=not plan.exists,
        files=plan.applied,
        skipped_files=plan.skipped,
        metrics=plan.metrics,
        seconds=round(time.monotonic() - plan.started, 3),
        dry_run=True,
        files_touched=files,
        partitions_touched=partitions,
    )


def _read_changes(
    spark: SparkSession, table: TableConfig, chosen: Sequence[tuple[int, FeedFile]], *, batch_number: int
) -> ChangeSet:
    """Read and normalise each feed's files (file indexes run on across feeds), then union them."""
    parts: list[ChangeSet] = []
    offset = 0
    for index, feed in enumerate(table.feeds):
        group = [f for i, f in chosen if i == index]
        if not group:
            continue
        raw = read_feed(spark, feed, group, offset=offset)
        parts.append(normalize(spark, table, raw, group, batch_number=batch_number, feed=feed, offset=offset))
        offset += len(group)
    if len(parts) == 1:
        return parts[0]
    frame = parts[0].frame
    columns = list(parts[0].data_columns)
    for part in parts[1:]:
        frame = frame.unionByName(part.frame, allowMissingColumns=True)
        columns += [c for c in part.data_columns if c not in columns]
    return ChangeSet(frame=frame, data_columns=tuple(columns), header_lines=parts[0].header_lines)


@dataclass(frozen=True)
class Truncate:
    """The batch's latest truncate (PRODUCT.md §Semantics 4), if any.

    Attributes:
        records: truncate records in the batch.
        before: the latest truncate's sequence, as a struct literal: rows older than it go.
        stored_rows: stored rows older than it, which the commit removes.
    """

    records: int = 0
    before: Column | None = None
    stored_rows: int = 0


def _truncate(table: TableConfig, valid: DataFrame, stored: DataFrame | None) -> Truncate:
    """Find the batch's latest truncate and count the stored rows it removes (two small actions)."""
    from pyspark.sql import functions as F

    sequence = F.struct(*[F.col(f"`{c}`") for c in table.sequence_columns])
    row = valid.filter(F.col(C.OP) == "T").agg(F.count(F.lit(1)).alias("n"), F.max(sequence).alias("at")).collect()[0]
    if not row["n"]:
        return Truncate()
    fields = row["at"].asDict()
    types = {f.name: f.dataType for f in valid.schema.fields}
    before = F.struct(*[F.lit(fields[c]).cast(types[c]).alias(c) for c in table.sequence_columns])
    older = stored.filter(sequence < before).count() if stored is not None else 0
    return Truncate(records=int(row["n"]), before=before, stored_rows=int(older))


@dataclass(frozen=True)
class NothingPending:
    """No file is pending; ``skipped`` lists the files found but already applied."""

    skipped: tuple[str, ...]


def _nothing(table: TableConfig, skipped: tuple[str, ...], started: float) -> BatchResult:
    return BatchResult(
        table=table.name,
        path=table.path,
        batch_id=uuid.uuid4().hex,
        version=None,
        created=False,
        files=(),
        skipped_files=skipped,
        metrics=BatchMetrics(),
        seconds=round(time.monotonic() - started, 3),
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


def check_accounting(m: BatchMetrics) -> None:
    """Raise AccountingError unless every row read is accounted for."""
    total = (
        m.inserted
        + m.updated
        + m.deleted
        + m.late
        + m.deletes_absent
        + m.superseded
        + m.rows_bad
        + m.truncates
        + m.ignored
    )
    if total != m.rows_read:
        raise AccountingError(
            f"internal error: batch row counts do not add up (read {m.rows_read}, accounted {total}); "
            "nothing was committed"
        )
