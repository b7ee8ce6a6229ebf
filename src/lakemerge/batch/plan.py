"""Plan one batch: select its files, then three phases, each a module of its own:

1. read and validate its change records, and count them (:mod:`lakemerge.batch.read`);
2. the table's stored state as the batch sees it: stored rows, types, truncate, snapshot
   absences, tombstones (:mod:`lakemerge.batch.stored`);
3. collapse and classify (:mod:`lakemerge.batch.classify`), then count the outcomes
   (:mod:`lakemerge.batch.counts`).

The result is a :class:`BatchPlan` that :mod:`lakemerge.batch.commit` writes, or that a dry run
reports (:mod:`lakemerge.batch.preview`).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lakemerge.batch.cached import Cached
from lakemerge.batch.classify import Classified, Reach, classify_batch
from lakemerge.batch.counts import outcome_counts, with_outcomes
from lakemerge.batch.frames import FrameBatch
from lakemerge.batch.read import ReadBatch, read_batch
from lakemerge.batch.select import NothingPending, Selection, select_files, select_frame
from lakemerge.batch.stored import (
    Absent,
    Stored,
    Truncate,
    compared,
    conformed,
    find_truncate,
    read_stored,
    snapshot_absences,
)
from lakemerge.config import TableConfig
from lakemerge.errors import ConfigError
from lakemerge.feeds import FeedFile
from lakemerge.results import AppliedFile, BatchMetrics, BatchResult, IgnoredEntry, SchemaChange
from lakemerge.spark import tuning
from lakemerge.spark.scoped import scoped_conf
from lakemerge.table import ledger, offsets, tombstones
from lakemerge.table.offsets import Ends, Ranges
from lakemerge.table.prune import KeyRanges
from lakemerge.table.snapshots import one_snapshot_each
from lakemerge.write import scd2

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: Batches of at most this many change rows are broadcast in the classification join (their keys
#: hash into tens of MB at most), so that the table is read once and never shuffled.
BROADCAST_ROWS = 1_000_000

#: A ``log`` table's merged view is reduced to the keys of a batch of at most this many change
#: rows (with a key of one 8-byte column; fewer for wider keys, :func:`key_broadcast_rows`) before
#: it is ranked, by a broadcast semi-join on the batch's keys alone (the batch's own rows, never the
#: table's: some 64 MB at most): ranking the whole view shuffles and sorts every stored key
#: (bench/RESULTS.md, SF10 with 1.5 M changes). The stored rows so found are joined to the batch
#: by a shuffle of those rows (``classify(table_of_keys=True)``), not by a forced broadcast.
KEY_BROADCAST_ROWS = 4_000_000


def key_broadcast_rows(schema: StructType, key: Sequence[str]) -> int:
    """How many change rows' keys of ``schema``'s ``key`` columns can be broadcast: as many bytes
    as :data:`KEY_BROADCAST_ROWS` keys of 8 bytes, each key taking 8 bytes of hashing overhead and
    each column 8 bytes when it is a number, date or time, 32 otherwise (strings, decimals)."""
    from pyspark.sql import types as T

    fixed = (T.IntegralType, T.FloatType, T.DoubleType, T.DateType, T.TimestampType, T.TimestampNTZType)
    width = sum(8 if isinstance(schema[k].dataType, fixed) else 32 for k in key)
    return KEY_BROADCAST_ROWS * 16 // (width + 8)


@dataclass(frozen=True)
class BatchPlan:
    """A batch read, validated, collapsed and classified, ready to commit (or to show, in a dry run);
    it holds persisted frames: call :meth:`release` when done."""

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
    cached: Cached
    bad: DataFrame | None = None
    partial: tuple[str, ...] = ()
    truncate_before: Column | None = None
    #: ``truncate_before`` as SQL (the MERGE's text holds it).
    truncate_sql: str | None = None
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: scd2.History | None = None
    writes: int | None = None
    ranges: KeyRanges | None = None
    small: bool = False
    #: The batch's keys can be broadcast (:func:`key_broadcast_rows`).
    keyed: bool = False
    stored_columns: tuple[str, ...] = ()
    #: The snapshot the changes were classified against, and the data files holding the stored rows
    #: they update or delete: what a write without MERGE needs (:mod:`lakemerge.write.direct`).
    snapshot: Any = None
    touched: tuple[str, ...] = ()
    #: Spark settings the batch was planned with and is written with (:mod:`lakemerge.spark.tuning`).
    settings: dict[str, str | None] = field(default_factory=dict)
    #: The session's own values of those settings, for the parts that read the whole table.
    own_settings: dict[str, str | None] = field(default_factory=dict)
    #: A DataFrame batch's source and batch id (recorded with its commit).
    source: tuple[str, int] | None = None
    #: A Kafka stream's batch: the offsets of the records it applies, and the ends of every
    #: partition its source applied once it commits (both recorded with its commit).
    source_offsets: Ranges | None = None
    source_ends: Ends | None = None
    #: Entries of the landing zones not read, with why (:class:`lakemerge.batch.select.Selection`).
    ignored: tuple[tuple[str, str], ...] = ()
    #: Whether ``metrics`` holds the outcome counts. A ``log`` batch planned without them
    #: (``plan_batch(counted=False)``) counts its changes while it appends them, and its commit
    #: completes the metrics (:mod:`lakemerge.table.transaction`).
    counted: bool = True
    #: The batch's records are read from their files each time (not cached): its commit checks that
    #: none changed since it was listed (:func:`lakemerge.batch.read.keeps_records`).
    reread: bool = False
    schema_changes: tuple[SchemaChange, ...] = ()

    def release(self) -> None:
        """Unpersist the cached frames."""
        self.cached.release()

    @property
    def applied(self) -> tuple[AppliedFile, ...]:
        """The files as the commit records them."""
        return tuple(AppliedFile(path=f.path, size=f.size, modified=f.modified) for f in self.files)

    def result(self, *, version: int | None, metrics: BatchMetrics | None = None, **details: Any) -> BatchResult:
        """The batch's result: committed as ``version`` (``None``: not committed), with ``metrics``
        (default: the plan's) and ``details`` (the other :class:`BatchResult` fields)."""
        return BatchResult(
            source=self.source[0] if self.source else None,
            source_batch=self.source[1] if self.source else None,
            source_offsets=offsets.as_record(self.source_offsets or {}),
            table=self.table.name,
            path=self.table.path,
            batch_id=self.batch_id,
            version=version,
            created=not self.exists,
            files=self.applied,
            skipped_files=self.skipped,
            ignored_entries=tuple(IgnoredEntry(path, reason) for path, reason in self.ignored),
            metrics=self.metrics if metrics is None else metrics,
            seconds=round(time.monotonic() - self.started, 3),
            schema_changes=self.schema_changes,
            **details,
        )


def plan_batch(
    table: TableConfig,
    *,
    spark: SparkSession,
    inputs: Sequence[str] | None = None,
    frame: FrameBatch | None = None,
    own_settings: dict[str, str | None] | None = None,
    counted: bool = True,
) -> BatchPlan | NothingPending:
    """Read and classify the next batch of ``table`` (of ``inputs`` instead of its first feed, or the
    records of ``frame``).

    ``counted=False`` (``log`` tables only): leave the changes and their classification uncached
    and uncounted; the commit counts them in the same Spark job that appends them to the log.
    ``own_settings``: the session's own values of the settings a batch tunes (default: read now).

    Raises:
        InputError: a path is missing or a record is bad.
        SchemaError: the feed's columns cannot be written to the table.
    """
    started, started_at, batch_id = time.monotonic(), int(time.time() * 1000), uuid.uuid4().hex
    with one_snapshot_each():
        selection = select_frame(spark, table, frame) if frame is not None else select_files(spark, table, inputs)
        return _planned(
            table,
            selection,
            spark=spark,
            inputs=inputs,
            own_settings=own_settings,
            counted=counted,
            started=(started, started_at, batch_id),
        )


def _planned(
    table: TableConfig,
    selection: Selection | NothingPending,
    *,
    spark: SparkSession,
    inputs: Sequence[str] | None,
    own_settings: dict[str, str | None] | None,
    counted: bool,
    started: tuple[float, int, str],
) -> BatchPlan | NothingPending:
    """The plan of the batch ``selection`` chose (see :func:`plan_batch`)."""
    started_now, started_at, batch_id = started
    if isinstance(selection, NothingPending):
        return selection
    if not selection.chosen and selection.frame is None:
        return NothingPending(selection.skipped, ignored=selection.ignored)
    log_path = table.log_table if table.log_mode else None
    number = ledger.last_batch(spark, table.path, log_path=log_path, known=selection.ledger) + 1
    own = tuning.session_settings(spark) if own_settings is None else own_settings
    planner = _Planner(spark, table, selection, number, batch_id, own, counted, started_now, started_at)
    with planner.cached.released_on_error(), planner.tuned:
        read = read_batch(
            spark, table, selection, number=number, batch_id=batch_id, cached=planner.cached, counted=counted
        )
        if not selection.exists and not read.changes.row_data:
            # A new table takes its columns from its first batch's rows: files of events that change
            # no row (Debezium's tombstones, heartbeats) wait for the first batch that holds one,
            # which takes every pending file (so that no batch limit leaves one behind for good).
            planner.cached.release()
            wider = select_files(spark, table, inputs, limited=False) if selection.frame is None else None
            if wider is None or len(wider.chosen) <= len(selection.chosen):
                return NothingPending(selection.skipped, ignored=selection.ignored)
            return _planned(
                table, wider, spark=spark, inputs=inputs, own_settings=own, counted=counted, started=started
            )
        return planner.plan(read)


@dataclass
class _Sizes:
    """What a batch's size allows: its keys can be broadcast (``keyed``), it is broadcast in its
    classification (``small``), and the settings it was tuned with (``settings``)."""

    keyed: bool
    small: bool
    settings: dict[str, str | None] = field(default_factory=dict)


@dataclass
class _Planner:
    """The phases after a batch's records are read: one batch's state while it is planned.

    ``tuned`` holds the Spark settings the batch is planned with (:mod:`lakemerge.spark.tuning`):
    a batch that may reach the whole table keeps the session's own (``own``); one small enough to
    broadcast, without a truncate, shuffles only its own rows, in partitions sized from them."""

    spark: SparkSession
    table: TableConfig
    selection: Selection
    number: int
    batch_id: str
    own: dict[str, str | None]
    counted: bool
    started: float
    started_at: int
    cached: Cached = field(default_factory=Cached)
    schema_changes: tuple[SchemaChange, ...] = ()
    tuned: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def plan(self, read: ReadBatch) -> BatchPlan:
        """Phase 2 of ``read`` (the table's stored state), then :meth:`_classify`."""
        table, spark, selection = self.table, self.spark, self.selection
        key_bound = key_broadcast_rows(read.valid.schema, table.key)
        tune = read.rows_read <= (key_bound if table.log_mode else BROADCAST_ROWS)
        tune = tune and not table.scd2 and not selection.snapshots
        if not tune:
            self.tuned.enter_context(scoped_conf(spark, self.own))
        of_keys = table.log_mode and selection.exists and not selection.snapshots and read.rows_read <= key_bound
        stored, schema = read_stored(spark, table, exists=selection.exists, ranges=read.ranges, of_keys=of_keys)
        data_columns = read.changes.data_columns
        problem = table.unknown_shared([*data_columns, *(schema.names if schema is not None else ())])
        if problem is not None:
            raise ConfigError(f"{problem[1]}; nothing was applied", key=f"tables.{table.name}.{problem[0]}")
        valid = read.valid
        if schema is not None:
            matched = conformed(spark, table, valid, schema, data_columns, selection.files, read.changes.sometimes)
            valid, self.schema_changes, data_columns = matched.frame, matched.changes, matched.columns
            read = replace(read, changes=replace(read.changes, data_columns=data_columns, sometimes=matched.folded))
        truncate = find_truncate(spark, table, valid, stored.rows, own=self.own)
        absent = snapshot_absences(
            table,
            selection,
            truncate.surviving(table, valid),
            stored.rows,
            data_columns=data_columns,
            cached=self.cached,
        )
        changes = read.rows_read + absent.count
        sizes = _Sizes(keyed=changes <= key_bound, small=changes <= BROADCAST_ROWS)
        sizes.small = sizes.small and (sizes.keyed or not table.log_mode)
        sizes.settings = self._tune(tune and truncate.before is None, tune, read.rows_read)
        return self._classify(read, stored, truncate, absent, sizes)

    def _classify(
        self, read: ReadBatch, stored: Stored, truncate: Truncate, absent: Absent, sizes: _Sizes
    ) -> BatchPlan:
        """Phase 3: collapse and classify the changes, count their outcomes: the :class:`BatchPlan`."""
        table, selection = self.table, self.selection
        data_columns, partial = read.changes.data_columns, stored.partial(table, read.changes)
        compare = compared(table, data_columns, stored.rows) if selection.snapshots else ()
        # (A snapshot's absent keys become deletes of its own sequence; SCD2 reads tombstones whole.)
        oldest = None if selection.snapshots or table.scd2 else read.oldest
        classified = classify_batch(
            self.spark,
            table,
            absent.changes,
            stored,
            tombstones.read(self.spark, table, selection.ledger.batch_ids, oldest=oldest),
            reach=Reach(read.whole, read.early, read.ranges, sizes.small, compare, keyed=sizes.keyed),
            truncate=truncate,
            partial=partial,
            data_columns=data_columns,
            cached=self.cached,
            counted=self.counted,
        )
        direct = stored.snapshot is not None and truncate.before is None and not table.scd2
        metrics, writes, touched = self._metrics(read, truncate, absent, classified, files=direct)
        return BatchPlan(
            table=table,
            batch_id=self.batch_id,
            started=self.started,
            started_at=self.started_at,
            files=tuple(selection.files) if selection.frame is None else (),
            source=(selection.frame.source, selection.frame.batch_id) if selection.frame is not None else None,
            source_offsets=selection.frame.ranges if selection.frame is not None else None,
            source_ends=self._source_ends(),
            skipped=selection.skipped,
            ignored=selection.ignored,
            exists=selection.exists,
            txn_version=self.number,
            data_columns=data_columns,
            metrics=metrics,
            classified=classified.changes,
            cached=self.cached,
            bad=read.bad,
            partial=partial,
            truncate_before=truncate.before,
            truncate_sql=truncate.sql,
            snapshots=absent.positions,
            history=classified.history,
            writes=writes,
            ranges=classified.ranges,
            small=sizes.small,
            keyed=sizes.keyed,
            stored_columns=stored.columns,
            snapshot=stored.snapshot if direct else None,
            touched=touched,
            settings=sizes.settings,
            own_settings=self.own,
            counted=self.counted,
            reread=read.reread,
            schema_changes=self.schema_changes,
        )

    def _source_ends(self) -> Ends | None:
        """A Kafka stream's batch: the ends of every partition its source applied, once it commits."""
        frame = self.selection.frame
        if frame is None or not frame.ranges:
            return None
        return offsets.furthest(self.selection.ledger.offsets.get(frame.source, {}), offsets.ends(frame.ranges))

    def _tune(self, small: bool, tune: bool, rows: int) -> dict[str, str | None]:
        """Enter the settings the rest of the plan runs with: a small batch's own (returned, for its
        commit), else the session's when the batch was tunable; nothing more otherwise."""
        if small:
            settings = tuning.small_batch_settings(self.spark, rows)
            self.tuned.enter_context(scoped_conf(self.spark, settings))
            return settings
        if tune:
            self.tuned.enter_context(scoped_conf(self.spark, self.own))
        return {}

    def _metrics(
        self, read: ReadBatch, truncate: Truncate, absent: Absent, classified: Classified, *, files: bool
    ) -> tuple[BatchMetrics, int | None, tuple[str, ...]]:
        """The batch's metrics (its outcomes too when it is counted), for an SCD2 batch how many
        versions it writes, and (with ``files``) the data files holding the stored rows it replaces."""
        metrics = BatchMetrics(
            rows_read=read.rows_read,
            rows_bad=read.rows_bad,
            truncates=truncate.records,
            truncated=truncate.stored_rows,
            ignored=read.ignored,
            snapshot_absent=absent.count,
        )
        if not self.counted:
            return metrics, None, ()
        source = classified.history.source if classified.history is not None else None
        by_op, writes, touched = outcome_counts(classified.changes, source, files=files)
        truncating = truncate.before is not None
        return with_outcomes(metrics, by_op, table=self.table, truncating=truncating), writes, touched
