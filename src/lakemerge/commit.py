"""Commit one planned batch: one Delta commit carrying the batch's record (metrics and files).

A copy-on-write or deletion-vector batch runs one MERGE (or an append of new keys), an SCD2
batch rewrites its keys' history, and a ``log`` batch appends to its change log, counting its
changes in the same Spark job (:mod:`lakemerge.table.transaction`). Tombstones of a table
without a log go to their side table first; they count only once this commit exists.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from lakemerge.apply import Outcome, log, scd2, write_changes
from lakemerge.errors import AccountingError, InputError
from lakemerge.feeds import columns as C
from lakemerge.feeds.files import first_changed
from lakemerge.plan import BatchPlan, remembered, with_outcomes
from lakemerge.results import BatchMetrics, BatchResult
from lakemerge.spark.errors import translate
from lakemerge.spark.scoped import scoped_conf
from lakemerge.table import delta, quarantine, tombstones, transaction

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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
        check_accounting(metrics)
    record = {
        "batch_id": plan.batch_id,
        "table": plan.table.name,
        "started_at": plan.started_at,
        "txn_version": plan.txn_version,
        "metrics": asdict(metrics),
        "files": [asdict(a) for a in plan.applied],
    }
    if plan.snapshots:
        record["snapshots"] = plan.snapshots
    if plan.bad is not None:
        with _translated():
            quarantine.write_bad_rows(plan.bad, plan.table.quarantine)
    if not plan.counted:
        metrics = _append_counting(spark, plan, record)
        return _committed(spark, plan, metrics)
    if metrics.tombstones_written and not plan.table.log_mode:
        # (A log table's tombstones are rows of its log, appended below with the batch.)
        with _translated(), scoped_conf(spark, plan.settings or plan.own_settings):
            _write_tombstones(spark, plan)
    with delta.commit_record(spark, record, txn_version=plan.txn_version), _translated():
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
                writes = metrics.inserted + metrics.updated + metrics.deleted + metrics.deletes_absent
                log.append(plan.table, _log_rows(spark, plan, plan.classified, writes=writes))
        else:
            with scoped_conf(spark, plan.own_settings):
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
                    ranges=plan.ranges,
                    inserts_only=metrics.updated == metrics.deleted == metrics.truncated == 0,
                    # Classified in a small batch's few partitions: not what the rewrite should use.
                    regroup=bool(plan.settings),
                )
    return _committed(spark, plan, metrics)


def _append_counting(spark: SparkSession, plan: BatchPlan, record: dict[str, Any]) -> BatchMetrics:
    """Append an uncounted ``log`` plan's rows to the log, counting its changes by outcome in the
    same Spark job, and commit them with ``record`` completed by those counts; the metrics.

    Raises:
        AccountingError: the counts do not add up (nothing is committed).
        Superseded: a concurrent writer took the batch number (nothing is committed).
    """
    from pyspark.sql import functions as F

    table = plan.table
    pairs = [(o.value, op) for o in Outcome for op in ("U", "D")]
    # (Written as SQL: a column built of PySpark's functions costs a dozen calls into the JVM.)
    tallies = {
        f"{outcome}_{op}": F.expr(f"count_if({C.OUTCOME} = '{outcome}' AND {C.OP} = '{op}')") for outcome, op in pairs
    }
    tallies["all"] = F.expr("count(1)")
    observed, counted = transaction.observe(plan.classified, tallies)
    m = plan.metrics
    bound = m.rows_read + m.snapshot_absent - m.rows_bad - m.ignored
    rows = _log_rows(spark, plan, observed, writes=bound)
    found: list[BatchMetrics] = []

    def completed() -> str:
        # The changes were read more than once (uncached): a file that changed meanwhile could
        # have given each read other rows.
        changed = first_changed(spark, plan.files)
        if changed is not None:
            raise InputError(
                "file changed while its batch was read (its size or time are not what was listed); nothing "
                "was committed: give new content a new name",
                path=changed,
            )
        counts = counted()
        by_op = [(outcome, op, counts[f"{outcome}_{op}"]) for outcome, op in pairs]
        if sum(n for _, _, n in by_op) != counts["all"]:
            raise AccountingError(
                f"internal error: changes of an outcome or operation lakemerge does not know ({counts}); "
                "nothing was committed"
            )
        metrics = with_outcomes(m, by_op, table=table, truncating=False)
        check_accounting(metrics)
        found.append(metrics)
        return delta.record_metadata({**record, "metrics": asdict(metrics)})

    with _translated(), scoped_conf(spark, plan.settings or plan.own_settings):
        version = transaction.append_with_record(
            spark,
            table.log_table,
            rows,
            record=completed,
            app_id=delta.TXN_APP_ID,
            txn_version=plan.txn_version,
            properties=log.properties(table, rows.schema),
        )
    if version is None:
        raise Superseded()
    return found[0]


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
    found = delta.find_commit(spark, target, plan.batch_id)
    if found is None:
        raise Superseded()
    version, op_metrics = found
    removed = int(op_metrics.get("numTargetFilesRemoved", op_metrics.get("numRemovedFiles", 0)))
    return plan.result(
        version=version,
        metrics=metrics,
        files_added=int(op_metrics.get("numTargetFilesAdded", op_metrics.get("numFiles", 0))),
        files_removed=removed,
        bytes_added=int(op_metrics.get("numTargetBytesAdded", op_metrics.get("numOutputBytes", 0))),
        bytes_removed=int(op_metrics.get("numTargetBytesRemoved", op_metrics.get("numRemovedBytes", 0))),
        files_touched=removed,
    )


def _write_tombstones(spark: SparkSession, plan: BatchPlan) -> None:
    """Append the batch's tombstones (tagged with its id, so that they count only once its
    commit exists): its deletes that were not late, and its truncate."""
    table = plan.table
    types = {f.name: f.dataType.simpleString() for f in plan.classified.schema.fields}
    deletes = tombstones.deletes_of(plan.classified, table, remembered(table))
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


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        raise (translate(exc, reading=False) or exc) from exc


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
        + m.unchanged
    )
    negative = sorted(name for name, value in asdict(m).items() if isinstance(value, int) and value < 0)
    if negative:
        raise AccountingError(f"internal error: negative batch counts ({', '.join(negative)}); nothing was committed")
    if total != m.rows_read + m.snapshot_absent:
        raise AccountingError(
            f"internal error: batch row counts do not add up (read {m.rows_read} + {m.snapshot_absent} absent "
            f"from a snapshot, accounted {total}); "
            "nothing was committed"
        )
