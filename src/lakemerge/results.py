"""Typed results: what every operation returns, and what the CLI prints as text or JSON.

Every result is a frozen dataclass deriving from :class:`Result`, whose :meth:`Result.to_dict` is
the JSON document the CLI prints with ``--json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Result:
    """The base of every result."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (the CLI's ``--json`` output)."""
        return asdict(self)


@dataclass(frozen=True)
class AppliedFile(Result):
    """A change file applied by a batch, as recorded in the commit."""

    path: str
    size: int
    modified: int


@dataclass(frozen=True)
class IgnoredEntry(Result):
    """An entry of a landing zone that a batch did not read, and why (hidden, a name Hadoop cannot
    read, a dangling symbolic link)."""

    path: str
    reason: str


@dataclass(frozen=True)
class SchemaChange(Result):
    """A change a batch made to its table's columns (its ``schema_changes`` policy's doing).

    Attributes:
        column: the column.
        change: ``added``, ``ignored`` (a new column left out), ``nulled`` (not in the changes:
            null in the rows they write), ``dropped`` or ``widened``.
        type / was: its type in the changes (the type it was widened to) / in the table before.
    """

    column: str
    change: str
    type: str | None = None
    was: str | None = None

    def __str__(self) -> str:
        if self.change == "widened":
            return f"{self.column} widened {self.was} → {self.type}"
        return f"{self.column} {self.change}" + (f" ({self.type})" if self.change == "added" else "")


@dataclass(frozen=True)
class BatchMetrics(Result):
    """Row accounting of one batch.

    ``rows_read + snapshot_absent = inserted + updated + deleted + late + deletes_absent + superseded
    + rows_bad + truncates + ignored + unchanged`` always holds (checked before commit).

    Attributes:
        rows_read: records read from the batch's files.
        rows_bad: records that failed validation (the batch fails when any is present).
        changes: changes left after collapsing to one per key.
        superseded: records replaced by a later change of the same key within the batch.
        inserted / updated / deleted: rows the commit inserted, updated, deleted.
        late: changes older than the stored row, ignored.
        deletes_absent: deletes of keys the table does not hold (nothing to do).
        truncates: truncate records read (changes older than the latest are superseded).
        truncated: stored rows the batch's truncate removes (not part of the row accounting).
        ignored: records skipped on purpose (op codes in ``ignore_codes``, e.g. Debezium tombstones).
        unchanged: snapshot rows equal to the stored row (same sequence and values): not rewritten.
        snapshot_absent: keys a full snapshot lacks (in its scope): each becomes a delete as of the
            snapshot, counted like a record read (as ``deleted``, or ``late`` when the stored row
            is newer than the snapshot).
        tombstones_written: tombstones the batch recorded (deletes, including deletes of absent keys).

    For SCD type 2 tables, changes are not collapsed to one per key: every change with its own
    sequence becomes part of the key's history, and ``late`` counts the changes older than the
    key's latest stored sequence, which are placed in history where they belong (not ignored).
    """

    rows_read: int = 0
    rows_bad: int = 0
    changes: int = 0
    superseded: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    late: int = 0
    deletes_absent: int = 0
    truncates: int = 0
    truncated: int = 0
    ignored: int = 0
    unchanged: int = 0
    snapshot_absent: int = 0
    tombstones_written: int = 0


@dataclass(frozen=True)
class CompactionResult(Result):
    """What one ``lakemerge compact`` (or automatic compaction) did to one table.

    Attributes:
        table / path: the table.
        log_batches_folded: log batches folded into the table by this compaction (``log`` mode).
        log_rows_folded: log rows read for folding; ``log_rows_deleted`` removed from the log after.
        tombstones_moved: the log's deletes appended to the tombstone table before they left the log.
        version: the table version of the fold commit, when there was one.
        files_removed / files_added / bytes_removed / bytes_added: OPTIMIZE's bin-packing metrics.
        deletion_vectors_purged: whether REORG ... APPLY (PURGE) ran (``deletion_vectors`` mode).
        clustering: ``none``, ``zorder`` or ``liquid``.
        seconds: wall time.
    """

    table: str
    path: str
    log_batches_folded: int = 0
    log_rows_folded: int = 0
    log_rows_deleted: int = 0
    tombstones_moved: int = 0
    version: int | None = None
    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    deletion_vectors_purged: bool = False
    clustering: str = "none"
    seconds: float = 0.0


@dataclass(frozen=True)
class BatchResult(Result):
    """What applying one batch to one table did.

    Attributes:
        table: the table's name; ``path`` where it lives.
        batch_id: unique id of the batch, recorded in the commit.
        version: the Delta version the batch committed, or ``None`` when there was nothing to apply.
        created: whether this batch created the table.
        files: the change files the batch applied.
        skipped_files: files found but already applied by an earlier batch.
        ignored_entries: entries of the landing zones not read, each with why: hidden ones (names
            starting with ``.`` or ``_``), names Hadoop cannot read, dangling symbolic links.
        metrics: row accounting; ``seconds`` the batch's wall time.
        files_added / files_removed / bytes_added / bytes_removed: Delta's data-file metrics.
        dry_run: the batch was only planned; nothing was committed.
        files_touched: stored data files holding rows the batch updates or deletes (a dry run counts
            them; a real run reports the files Delta rewrote).
        partitions_touched: partitions the batch writes to (dry runs only).
        compaction: what an automatic compaction after the batch did.
        source / source_batch: a batch given as a DataFrame: its source and the source's batch id.
        source_offsets: a batch of a Kafka stream: the offsets of the records it applied, per topic
            and partition (``{"orders": {"0": [first, one past the last]}}``).
        applied_before: a DataFrame batch whose source and batch id (a Kafka stream's: whose
            offsets) the table had committed already: nothing was applied again (``version`` is
            ``None``, the metrics zero).
        schema_changes: what the batch did to the table's columns.
    """

    table: str
    path: str
    batch_id: str
    version: int | None
    created: bool
    files: tuple[AppliedFile, ...]
    skipped_files: tuple[str, ...]
    metrics: BatchMetrics
    seconds: float
    files_added: int = 0
    files_removed: int = 0
    bytes_added: int = 0
    bytes_removed: int = 0
    dry_run: bool = False
    files_touched: int | None = None
    partitions_touched: int | None = None
    compaction: CompactionResult | None = None
    source: str | None = None
    source_batch: int | None = None
    applied_before: bool = False
    ignored_entries: tuple[IgnoredEntry, ...] = ()
    source_offsets: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    schema_changes: tuple[SchemaChange, ...] = ()


@dataclass(frozen=True)
class SkipResult(Result):
    """What ``lakemerge skip`` recorded.

    Attributes:
        table / path: the table.
        version: the commit holding the record (on the change log of a ``log`` table that has one).
        files: the files recorded as skipped: never applied.
        reason / by: the operator's reason, and who recorded it (the user name).
    """

    table: str
    path: str
    version: int
    files: tuple[AppliedFile, ...]
    reason: str
    by: str


@dataclass(frozen=True)
class CommitInfo(Result):
    """One commit of a table's history.

    Attributes:
        version / timestamp / operation: Delta's own.
        batch_id, metrics, files: lakemerge's record of the batch, when a batch wrote the commit.
        source / source_batch: for a batch given as a DataFrame, its source and the source's batch id.
        source_offsets: for a batch of a Kafka stream, the offsets it applied (see BatchResult).
        seconds: the batch's duration, from its start to its commit.
        operation_metrics: Delta's metrics (files and bytes added and removed, rows, time).
        skip_reason / skipped_by: the commit records ``files`` as skipped by an operator
            (``lakemerge skip``): why, and who.
        change_log: a commit of a ``log`` table's change log (``PATH__log``, where its batches
            commit), shown with the table's own commits; ``version`` is the log's.
        schema_changes: what the batch did to the table's columns.
    """

    version: int
    timestamp: str
    operation: str
    batch_id: str | None = None
    table: str | None = None
    seconds: float | None = None
    metrics: dict[str, int] = field(default_factory=dict)
    files: tuple[AppliedFile, ...] = ()
    operation_metrics: dict[str, str] = field(default_factory=dict)
    source: str | None = None
    source_batch: int | None = None
    skip_reason: str | None = None
    skipped_by: str | None = None
    change_log: bool = False
    source_offsets: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    schema_changes: tuple[SchemaChange, ...] = ()


@dataclass(frozen=True)
class TableSummary(Result):
    """What ``show`` reports: schema, size, latest version and a few rows. For a ``log`` table, the
    table as of its last compaction, and ``log_rows``: the rows of its change log (``None`` for
    other tables)."""

    path: str
    version: int
    schema: tuple[tuple[str, str], ...]
    partition_by: tuple[str, ...]
    rows: int
    files: int
    bytes: int
    sample: tuple[dict[str, Any], ...]
    log_rows: int | None = None


@dataclass(frozen=True)
class GroupPoint(Result):
    """One recorded point of a group: the version of every table, when it was recorded, and the
    transaction that made it (``None`` for a group run of file batches)."""

    group: str
    point: int
    versions: dict[str, int]
    recorded_at: int
    transaction: int | None = None


@dataclass(frozen=True)
class RollbackResult(Result):
    """What a rollback did.

    Attributes:
        path: the table.
        from_version: the latest version before the rollback.
        to_version: the version whose content the table now shows.
        version: the version of the restore commit itself.
        reapply: whether the undone versions' files are pending again.
        pending_again: those files (empty unless ``reapply``).
    """

    path: str
    from_version: int
    to_version: int
    version: int
    reapply: bool
    pending_again: tuple[str, ...]


@dataclass(frozen=True)
class VacuumResult(Result):
    """What a vacuum did.

    Attributes:
        table: the table's name.
        path: the table's path.
        files_deleted: data files VACUUM removed from the table (and from its tombstone table).
        tombstones_removed: expired and orphaned tombstones dropped (and, in ``latest`` tables, all
            but the newest of each key).
        tombstones_kept: tombstones still honoured.
        seconds: wall time.
    """

    table: str
    path: str
    files_deleted: int
    tombstones_removed: int
    tombstones_kept: int
    seconds: float


@dataclass(frozen=True)
class QuarantinedRow(Result):
    """One bad record kept in a table's quarantine: the batch that read it, the file and row it came
    from, why it is bad, and the record as read."""

    batch_id: str
    table: str
    file: str
    row: int
    reason: str
    record: str


@dataclass(frozen=True)
class Registered(Result):
    """What registering a table in the Spark catalog did.

    Attributes:
        table: the table's name in the pipeline.
        name: its catalog name (``database.table``).
        location: the table's path, as the catalog holds it.
        created: whether this call created the catalog entry (``False``: it was there).
        views: the views (re)created beside it.
    """

    table: str
    name: str
    location: str
    created: bool
    views: tuple[str, ...]


@dataclass(frozen=True)
class ReportResult(Result):
    """What ``report`` wrote: the HTML page ``out`` for the table at ``path``, of ``commits``
    commits of which ``batches`` were lakemerge's batches."""

    path: str
    out: str
    commits: int
    batches: int
    bytes_written: int


@dataclass(frozen=True)
class ChangedRecord(Result):
    """A row before and after a commit; ``None`` for an absent row (an insert, or a delete)."""

    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True)
class DemoResult(Result):
    """The two batches of the demo, what the second changed, and the table's history."""

    workdir: str
    table_path: str
    batches: tuple[BatchResult, ...]
    changes: tuple[ChangedRecord, ...]
    history: tuple[CommitInfo, ...]


@dataclass(frozen=True)
class TransactionResult(Result):
    """What a transaction over a group's tables committed.

    Attributes:
        group / transaction: the group, and the transaction's id.
        batches: each table's batch (a table applied by an earlier run of the same transaction, which
            stopped before recording the group's point, says ``applied_before``).
        point: the group's point that makes the transaction visible to readers of the group.
        applied_before: the whole transaction was committed before: nothing was applied again.
    """

    group: str
    transaction: int
    batches: tuple[BatchResult, ...]
    point: GroupPoint | None
    applied_before: bool = False
