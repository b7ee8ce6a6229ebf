"""Commit one planned batch: one Delta commit carrying the batch's record (metrics and files).

A copy-on-write or deletion-vector batch runs one MERGE (or an append of new keys), an SCD2
batch rewrites its keys' history, and a ``log`` batch appends to its change log, counting its
changes in the same Spark job (:mod:`lakemerge.table.transaction`). Tombstones of a table
without a log go to their side table first; they count only once this commit exists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from lakemerge import columns as C
from lakemerge.batch import counts
from lakemerge.errors import ConflictError, InputError
from lakemerge.feeds.files import first_changed
from lakemerge.results import BatchMetrics, BatchResult
from lakemerge.spark.errors import translated
from lakemerge.spark.scoped import scoped_conf
from lakemerge.table import ledger, offsets, quarantine, tombstones, transaction
from lakemerge.write import log, scd2, write_changes
from lakemerge.write.direct import Known, serves, write_direct

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakemerge.batch.plan import BatchPlan


class Superseded(Exception):
    """Another writer committed this batch number first; the batch must be planned again."""


def commit_batch(plan: BatchPlan, *, spark: SparkSession) -> BatchResult:
    """Write the plan as one Delta commit carrying its record.

    Raises:
        AccountingError: the plan's counts do not add up (nothing is committed).
        Superseded: a concurrent writer took the batch number (nothing of this plan is committed).
    """
    metrics = plan.metrics
    if plan.counted:
        counts.check_accounting(metrics)
    with translated(reading=False):
        _prepare(spark, plan)
    record = _record(plan)
    if plan.bad is not None:
        with translated(reading=False):
            quarantine.write_bad_rows(plan.bad, plan.table.quarantine)
    if plan.counted and plan.reread:
        # (its last read of its files is behind it: the classification is cached)
        _check_unchanged(spark, plan)
    if not plan.counted:
        return _committed(spark, plan, _append_counting(spark, plan, record))
    known = None if _altered(spark, plan) else _direct(spark, plan)
    if known is not None:
        _write_direct(spark, plan, record, known)
        return _committed(spark, plan, metrics)
    if metrics.tombstones_written and not plan.table.log_mode:
        # (A log table's tombstones are rows of its log, appended below with the batch.)
        with translated(reading=False), scoped_conf(spark, plan.settings or plan.own_settings):
            _write_tombstones(spark, plan)
    with ledger.commit_record(spark, record, txn_version=plan.txn_version), translated(reading=False):
        _write(spark, plan)
    return _committed(spark, plan, metrics)


def _prepare(spark: SparkSession, plan: BatchPlan) -> None:
    """Metadata the batch's commit needs first: column mapping on the existing tables it writes when
    its columns' names need it, and a ``log`` table's Delta table at its path, created empty with the
    batch's columns by its first batch (the last compaction's rows are what other engines read
    there). Neither changes what the table holds: a crash after them leaves nothing applied."""
    from pyspark.sql.types import StructType

    from lakemerge.columns import col
    from lakemerge.table import store

    table = plan.table
    fields = {f.name: f for f in plan.classified.schema.fields}
    columns = StructType([fields[c] for c in plan.data_columns if c in fields])
    if table.log_mode:
        if not plan.exists and not store.table_exists(spark, table.path):
            empty = plan.classified.select(*[col(c) for c in columns.names]).limit(0)
            with ledger.commit_record(spark, {"created_for_change_log": table.log_table}, txn_version=None):
                store.create_table(empty, table)
        elif store.needs_mapping(columns):  # (metadata reads only for such names)
            for path in (table.path, table.log_table):
                if store.table_exists(spark, path):
                    store.map_names(spark, path, columns)
    elif plan.exists:
        store.map_names(spark, table.path, columns)


def _altered(spark: SparkSession, plan: BatchPlan) -> bool:
    """Make the table's metadata changes the batch's schema changes need before its commit (each a
    metadata commit of its own, changing no data: a crash after them leaves nothing applied, and
    the batch planned again finds them made); whether there were any."""
    from lakemerge.table import schema

    path = plan.table.path
    widened = [c for c in plan.schema_changes if c.change == "widened"]
    dropped = [c.column for c in plan.schema_changes if c.change == "dropped"]
    with translated(reading=False):
        if widened:
            schema.allow_widening(spark, path)
        for change in widened:
            assert change.type is not None
            schema.widen(spark, path, change.column, change.type)
        if dropped:
            schema.drop_columns(spark, path, dropped)
    return bool(widened or dropped)


def _record(plan: BatchPlan) -> dict[str, Any]:
    """The batch's record, as its commit carries it (:mod:`lakemerge.table.ledger`)."""
    record: dict[str, Any] = {
        "batch_id": plan.batch_id,
        "table": plan.table.name,
        "started_at": plan.started_at,
        "txn_version": plan.txn_version,
        "metrics": asdict(plan.metrics),
        "files": [asdict(a) for a in plan.applied],
    }
    if plan.snapshots:
        record["snapshots"] = plan.snapshots
    if plan.schema_changes:
        record["schema_changes"] = [asdict(c) for c in plan.schema_changes]
    if plan.source is not None:
        record["source"] = {"name": plan.source[0], "batch": plan.source[1]}
        if plan.source_offsets:
            record["source"]["offsets"] = offsets.as_record(plan.source_offsets)
            record["source"]["ends"] = offsets.ends_record(plan.source_ends or {})
    return record


def _write(spark: SparkSession, plan: BatchPlan) -> None:
    """Write a counted plan's changes in one commit (inside :func:`ledger.commit_record`)."""
    metrics = plan.metrics
    if plan.history is not None:
        with scoped_conf(spark, plan.own_settings):
            scd2.write(
                spark,
                plan.table,
                plan.history,
                exists=plan.exists,
                writes=plan.writes or 0,
                txn_version=plan.txn_version,
            )
    elif plan.table.log_mode:
        with scoped_conf(spark, plan.settings or plan.own_settings):
            log.append(plan.table, _log_rows(spark, plan, plan.classified, writes=counts.log_writes(metrics)))
    else:
        with scoped_conf(spark, plan.own_settings):
            write_changes(
                spark,
                plan.table,
                plan.classified,
                data_columns=plan.data_columns,
                exists=plan.exists,
                writes=counts.writes(metrics),
                partial=plan.partial,
                truncate_before=plan.truncate_sql,
                txn_version=plan.txn_version,
                ranges=plan.ranges,
                inserts_only=metrics.updated == metrics.deleted == metrics.truncated == 0,
                # Classified in a small batch's few partitions: not what the rewrite should use.
                regroup=bool(plan.settings),
            )


def _direct(spark: SparkSession, plan: BatchPlan) -> Known | None:
    """What the plan's classification found, when a write without MERGE serves the batch
    (:mod:`lakemerge.write.direct`): it updates or deletes stored rows, has no truncate and no
    partial update; ``None``: a MERGE (or an append, or a record alone) writes it."""
    m = plan.metrics
    if plan.snapshot is None or plan.truncate_before is not None or plan.partial or m.updated + m.deleted == 0:
        return None
    known = Known(plan.snapshot, plan.touched, m.inserted, m.updated, m.deleted, broadcast=plan.small, keyed=plan.keyed)
    row_index = C.STORED_ROW in plan.classified.columns
    return known if serves(spark, known, plan.classified.schema, plan.data_columns, row_index=row_index) else None


def _write_direct(spark: SparkSession, plan: BatchPlan, record: dict[str, Any], known: Known) -> None:
    """Write ``plan`` without MERGE, its tombstones appended meanwhile (in a thread of their own:
    the two writes overlap) and committed before the batch's commit, which they must precede.

    Raises:
        Superseded: a concurrent writer took the batch number (nothing of this plan is committed)."""
    pending = _Background(lambda: _write_tombstones(spark, plan)) if plan.metrics.tombstones_written else None
    try:
        with translated(reading=False), scoped_conf(spark, plan.settings or plan.own_settings):
            version = write_direct(
                spark,
                plan.table,
                plan.classified,
                known=known,
                data_columns=plan.data_columns,
                txn_version=plan.txn_version,
                record=ledger.record_metadata(record),
                before_commit=pending.join if pending is not None else lambda: None,
            )
    except ConflictError:
        # The write started from the plan's snapshot: a writer that committed this batch number
        # since then makes Delta refuse the commit, as a MERGE would have skipped its write.
        if ledger.last_batch(spark, plan.table.path) >= plan.txn_version:
            raise Superseded() from None
        raise
    finally:
        if pending is not None:
            pending.wait()
    if version is None:
        raise Superseded()


class _Background:
    """A function running in a thread of its own, from construction; :meth:`join` waits for it and
    raises what it raised."""

    def __init__(self, work: Callable[[], None]) -> None:
        self.error: BaseException | None = None

        def run() -> None:
            try:
                work()
            except BaseException as exc:  # (handed to the caller by join)
                self.error = exc

        self.thread = threading.Thread(target=run, name="lakemerge-tombstones", daemon=True)
        self.thread.start()

    def wait(self) -> None:
        self.thread.join()

    def join(self) -> None:
        self.wait()
        if self.error is not None:
            raise self.error


def _append_counting(spark: SparkSession, plan: BatchPlan, record: dict[str, Any]) -> BatchMetrics:
    """Append an uncounted ``log`` plan's rows to the log, counting its changes by outcome in the
    same Spark job, and commit them with ``record`` completed by those counts; the metrics.

    Raises:
        AccountingError: the counts do not add up (nothing is committed).
        Superseded: a concurrent writer took the batch number (nothing is committed).
    """
    table = plan.table
    observed, counted = transaction.observe(plan.classified, counts.tallies())
    rows = _log_rows(spark, plan, observed, writes=counts.changes_bound(plan.metrics))
    found: list[BatchMetrics] = []

    def completed() -> str:
        _check_unchanged(spark, plan)
        metrics = counts.from_tallies(plan.metrics, counted(), table=table)
        found.append(metrics)
        return ledger.record_metadata({**record, "metrics": asdict(metrics)})

    with translated(reading=False), scoped_conf(spark, plan.settings or plan.own_settings):
        version = transaction.append_with_record(
            spark,
            table.log_table,
            rows,
            record=completed,
            app_id=ledger.TXN_APP_ID,
            txn_version=plan.txn_version,
            properties=log.properties(table, rows.schema),
        )
    if version is None:
        raise Superseded()
    return found[0]


def _check_unchanged(spark: SparkSession, plan: BatchPlan) -> None:
    """Raise InputError when a file of the plan is not as it was listed: its records were read more
    than once (not cached), and a file that changed meanwhile could have given each read other rows.

    Raises:
        InputError: naming the file; nothing is committed."""
    changed = first_changed(spark, plan.files)
    if changed is not None:
        raise InputError(
            "file changed while its batch was read (its size or time are not what was listed); nothing "
            "was committed: give new content a new name",
            path=changed,
        )


def _log_rows(spark: SparkSession, plan: BatchPlan, classified: DataFrame, *, writes: int) -> DataFrame:
    """The log rows of ``plan``'s ``classified`` changes, in files for at most ``writes`` rows."""
    return log.log_rows(
        spark,
        plan.table,
        classified,
        data_columns=plan.data_columns,
        partial=plan.partial,
        txn_version=plan.txn_version,
        writes=writes,
        keyed=plan.keyed,
        stored_columns=plan.stored_columns,
    )


def _committed(spark: SparkSession, plan: BatchPlan, metrics: BatchMetrics) -> BatchResult:
    """The result of ``plan``'s commit, found by its batch id in the table's (or log's) newest commits.

    Raises:
        Superseded: no commit holds the batch: Delta skipped it for a concurrent writer's.
    """
    target = plan.table.log_table if plan.table.log_mode else plan.table.path
    found = ledger.find_commit(spark, target, plan.batch_id)
    if found is None:
        raise Superseded()
    version, operation_metrics = found
    written = counts.written(operation_metrics)
    return plan.result(version=version, metrics=metrics, **written, files_touched=written["files_removed"])


def _write_tombstones(spark: SparkSession, plan: BatchPlan) -> None:
    """Append the batch's tombstones (tagged with its id, so that they count only once its
    commit exists): its deletes that were not late, and its truncate."""
    table = plan.table
    types = {f.name: f.dataType.simpleString() for f in plan.classified.schema.fields}
    deletes = tombstones.deletes_of(plan.classified, table, counts.remembered(table))
    tombstones.append(
        spark,
        table,
        deletes,
        truncate=plan.truncate_before,
        batch=plan.txn_version,
        batch_id=plan.batch_id,
        types=types,
        count=plan.metrics.tombstones_written,
    )
