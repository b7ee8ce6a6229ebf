"""Every rule of a batch's row accounting, in one place.

``rows_read + snapshot_absent = inserted + updated + deleted + late + deletes_absent + superseded +
rows_bad + truncates + ignored + unchanged`` holds for every batch and is checked before its commit
(:func:`check_accounting`): a batch whose counts do not add up is never committed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from lakemerge import columns as C
from lakemerge.config import TableConfig
from lakemerge.errors import AccountingError
from lakemerge.results import BatchMetrics
from lakemerge.write.classify import Outcome

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: (outcome, op) pairs a ``log`` batch counts while it appends its changes (:func:`tallies`).
PAIRS = tuple((o.value, op) for o in Outcome for op in ("U", "D"))


def remembered(table: TableConfig) -> list[str]:
    """The outcomes of a delete that leave a tombstone: applied, of an absent key, and (SCD2, where
    a late delete is placed in history) late."""
    return [Outcome.DELETE.value, Outcome.ABSENT.value] + ([Outcome.LATE.value] if table.scd2 else [])


def with_outcomes(
    read: BatchMetrics, by_op: Sequence[tuple[str, str, int]], *, table: TableConfig, truncating: bool
) -> BatchMetrics:
    """``read`` (the counts known before classification: rows read, bad, ignored, truncates,
    snapshot absences) completed with the classified changes' counts ``by_op`` (outcome, op, n)."""
    counts: dict[str, int] = {}
    for outcome, _, n in by_op:
        counts[outcome] = counts.get(outcome, 0) + n
    kept = remembered(table)
    graves = sum(n for outcome, op, n in by_op if op == "D" and outcome in kept)
    collapsed = sum(counts.values())
    return replace(
        read,
        changes=collapsed,
        superseded=read.rows_read + read.snapshot_absent - read.rows_bad - read.ignored - read.truncates - collapsed,
        inserted=counts.get(Outcome.INSERT, 0),
        updated=counts.get(Outcome.UPDATE, 0),
        deleted=counts.get(Outcome.DELETE, 0),
        late=counts.get(Outcome.LATE, 0),
        deletes_absent=counts.get(Outcome.ABSENT, 0),
        unchanged=counts.get(Outcome.UNCHANGED, 0),
        tombstones_written=graves + (1 if truncating else 0) if table.tombstones else 0,
    )


def outcome_counts(
    classified: DataFrame, source: DataFrame | None, *, files: bool = False
) -> tuple[list[tuple[str, str, int]], int | None, tuple[str, ...]]:
    """How many of the classified changes have each outcome and op, (with an SCD2 batch's
    ``source``) how many versions it writes, and (with ``files``) the data files holding the stored
    rows it updates or deletes, in one Spark action."""
    from pyspark.sql import functions as F

    replaced = F.col(C.OUTCOME).isin("update", "delete")
    touched = F.collect_set(F.when(replaced, F.col(C.STORED_FILE))) if files else F.array().cast("array<string>")
    counted = classified.groupBy(F.col(C.OUTCOME).alias("o"), F.col(C.OP).alias("op")).agg(
        F.count(F.lit(1)).alias("n"), F.lit(False).alias("versions"), touched.alias("files")
    )
    if source is not None:
        versions = source.agg(F.count(F.lit(1)).alias("n")).select(
            F.lit(None).cast("string").alias("o"),
            F.lit(None).cast("string").alias("op"),
            "n",
            F.lit(True).alias("versions"),
            F.array().cast("array<string>").alias("files"),
        )
        counted = counted.unionByName(versions)
    by_op: list[tuple[str, str, int]] = []
    writes = None
    found: set[str] = set()
    for row in counted.collect():
        found.update(row["files"])
        if row["versions"]:
            writes = int(row["n"])
        else:
            by_op.append((str(row["o"]), str(row["op"]), int(row["n"])))
    return by_op, writes, tuple(sorted(found))


def tallies() -> dict[str, Column]:
    """The counts a ``log`` batch observes in the job that appends it: one per (outcome, op) pair
    of :data:`PAIRS`, and ``all``. (Written as SQL: a column built of PySpark's functions costs a
    dozen calls into the JVM.)"""
    from pyspark.sql import functions as F

    found = {f"{o}_{op}": F.expr(f"count_if({C.OUTCOME} = '{o}' AND {C.OP} = '{op}')") for o, op in PAIRS}
    found["all"] = F.expr("count(1)")
    return found


def from_tallies(read: BatchMetrics, counts: Mapping[str, int], *, table: TableConfig) -> BatchMetrics:
    """A ``log`` batch's metrics from the :func:`tallies` its append observed, checked.

    Raises:
        AccountingError: a change of an outcome or op not counted, or counts that do not add up.
    """
    by_op = [(outcome, op, counts[f"{outcome}_{op}"]) for outcome, op in PAIRS]
    if sum(n for _, _, n in by_op) != counts["all"]:
        raise AccountingError(
            f"internal error: changes of an outcome or operation lakemerge does not know ({dict(counts)}); "
            "nothing was committed"
        )
    metrics = with_outcomes(read, by_op, table=table, truncating=False)
    check_accounting(metrics)
    return metrics


def writes(metrics: BatchMetrics) -> int:
    """How many rows a batch writes to a copy-on-write or deletion-vector table (its truncate's
    removals included)."""
    return metrics.inserted + metrics.updated + metrics.deleted + metrics.truncated


def log_writes(metrics: BatchMetrics) -> int:
    """How many rows a ``log`` batch appends to its change log (deletes of absent keys included:
    they are its tombstones)."""
    return metrics.inserted + metrics.updated + metrics.deleted + metrics.deletes_absent


def changes_bound(metrics: BatchMetrics) -> int:
    """The most changes a batch can hold: its valid records (before its outcomes are counted)."""
    return metrics.rows_read + metrics.snapshot_absent - metrics.rows_bad - metrics.ignored


def written(operation_metrics: Mapping[str, Any]) -> dict[str, int]:
    """The data files and bytes a commit added and removed, from Delta's operation metrics (a
    MERGE's, else a write's)."""

    def first(*names: str) -> int:
        return next((int(operation_metrics[n]) for n in names if n in operation_metrics), 0)

    return {
        "files_added": first("numTargetFilesAdded", "numFiles"),
        "files_removed": first("numTargetFilesRemoved", "numRemovedFiles"),
        "bytes_added": first("numTargetBytesAdded", "numOutputBytes"),
        "bytes_removed": first("numTargetBytesRemoved", "numRemovedBytes"),
    }


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
