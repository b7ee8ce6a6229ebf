"""Plan one batch: choose its files, read, validate and collapse its changes, classify them
against the table, and count what it will do.

feeds (list, read) → changes (normalize, validate, collapse) → apply (classify): a
:class:`BatchPlan` that :mod:`lakemerge.commit` writes, or that a dry run reports.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lakemerge.apply import Outcome, classify, log, prune, scd2
from lakemerge.apply.prune import KeyRanges, key_ranges, range_query
from lakemerge.changes import collapse, normalize
from lakemerge.changes.normalize import ChangeSet, first_bad_row
from lakemerge.changes.snapshot import WHOLE, Pending, absent_deletes, check_order, next_snapshot, scope_positions
from lakemerge.config.models import FILE_SEQUENCE_COLUMN, TableConfig
from lakemerge.errors import InputError, SchemaError
from lakemerge.feeds import FeedFile, list_feed_files, read_feed
from lakemerge.feeds import columns as C
from lakemerge.results import AppliedFile, BatchMetrics, BatchResult
from lakemerge.spark import tuning
from lakemerge.spark.errors import translate
from lakemerge.spark.scoped import scoped_conf
from lakemerge.table import delta, quarantine, tombstones

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
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: scd2.History | None = None
    writes: int | None = None
    ranges: KeyRanges | None = None
    small: bool = False
    #: The batch's keys can be broadcast (:func:`key_broadcast_rows`).
    keyed: bool = False
    stored_columns: tuple[str, ...] = ()
    #: Spark settings the batch was planned with and is written with (:mod:`lakemerge.spark.tuning`).
    settings: dict[str, str | None] = field(default_factory=dict)
    #: The session's own values of those settings, for the parts that read the whole table.
    own_settings: dict[str, str | None] = field(default_factory=dict)
    #: Whether ``metrics`` holds the outcome counts. A ``log`` batch planned without them
    #: (``plan_batch(counted=False)``) counts its changes while it appends them, and its commit
    #: completes the metrics (:mod:`lakemerge.table.transaction`).
    counted: bool = True

    def release(self) -> None:
        """Unpersist the cached frames."""
        for frame in self.frames:
            frame.unpersist()

    @property
    def applied(self) -> tuple[AppliedFile, ...]:
        """The files as the commit records them."""
        return tuple(AppliedFile(path=f.path, size=f.size, modified=f.modified) for f in self.files)

    def result(self, *, version: int | None, metrics: BatchMetrics | None = None, **details: Any) -> BatchResult:
        """The batch's result: committed as ``version`` (``None``: not committed), with ``metrics``
        (default: the plan's) and ``details`` (the other :class:`BatchResult` fields)."""
        return BatchResult(
            table=self.table.name,
            path=self.table.path,
            batch_id=self.batch_id,
            version=version,
            created=not self.exists,
            files=self.applied,
            skipped_files=self.skipped,
            metrics=self.metrics if metrics is None else metrics,
            seconds=round(time.monotonic() - self.started, 3),
            **details,
        )


@dataclass(frozen=True)
class Selection:
    """The files a batch takes, and what the table's history says about earlier batches.

    Attributes:
        chosen: (feed index, file) in batch order.
        skipped: files found but already applied.
        exists: whether the table exists.
        ledger: the table's history of batches (empty for a new table).
        snapshots: per snapshot feed index, the snapshot the batch applies.
    """

    chosen: list[tuple[int, FeedFile]]
    skipped: tuple[str, ...]
    exists: bool
    ledger: delta.Ledger
    snapshots: dict[int, Pending]


def select_files(spark: SparkSession, table: TableConfig, inputs: Sequence[str] | None) -> Selection:
    """The batch's files: pending files of each feed in turn, each feed's in file order, up to the
    table's batch limits (at least one file); a snapshot feed contributes its oldest pending
    snapshot only. ``inputs`` replaces the first feed's location."""
    exists, ledger = delta.state(spark, table.path, log_path=table.log_table if table.log_mode else None)
    pending: list[tuple[int, FeedFile]] = []
    skipped: list[str] = []
    snapshots: dict[int, Pending] = {}
    for index, feed in enumerate(table.feeds):
        if inputs and index > 0:
            break
        found = list_feed_files(spark, (inputs if inputs else feed.location), file_order=feed.file_order)
        archived = feed.archive is not None
        fresh = []
        for f in found:
            if delta.check_unchanged(ledger.files, f.path, f.size, f.modified, archived=archived):
                skipped.append(f.path)
            else:
                fresh.append(f)
        if feed.snapshot and fresh:
            snapshots[index] = next_snapshot(spark, table, feed, fresh)
            if feed.snapshot_scope == "table" and snapshots[index].position is not None:
                check_order(index, snapshots[index], {WHOLE: snapshots[index].position}, _applied(ledger, index), feed)
            fresh = list(snapshots[index].files)
        pending.extend((index, f) for f in fresh)
    chosen: list[tuple[int, FeedFile]] = []
    size = 0
    for index, item in pending:
        whole_snapshot = index in snapshots and any(i == index for i, _ in chosen)
        if chosen and not whole_snapshot:
            if table.max_files_per_batch is not None and len(chosen) >= table.max_files_per_batch:
                break
            if table.max_bytes_per_batch is not None and size + item.size > table.max_bytes_per_batch:
                break
        chosen.append((index, item))
        size += item.size
    taken = {i for i, _ in chosen}
    return Selection(chosen, tuple(skipped), exists, ledger, {i: p for i, p in snapshots.items() if i in taken})


def _applied(ledger: delta.Ledger, index: int) -> dict[str, Any] | None:
    found = ledger.snapshots.get(index)
    return found if isinstance(found, dict) else None


def plan_batch(
    table: TableConfig,
    *,
    spark: SparkSession,
    inputs: Sequence[str] | None = None,
    own_settings: dict[str, str | None] | None = None,
    counted: bool = True,
) -> BatchPlan | NothingPending:
    """Read and classify the next batch of ``table``.

    ``counted=False`` (``log`` tables only): leave the changes and their classification uncached
    and uncounted; :func:`commit_batch` counts them in the same Spark job that appends them to the
    log.

    Raises:
        InputError: a path is missing or a record is bad.
        SchemaError: the feed's columns cannot be written to the table.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started, started_at = time.monotonic(), int(time.time() * 1000)
    batch_id = uuid.uuid4().hex
    selection = select_files(spark, table, inputs)
    chosen, skipped, exists = selection.chosen, selection.skipped, selection.exists
    if not chosen:
        return NothingPending(skipped)
    files = [f for _, f in chosen]
    txn = delta.last_batch(
        spark, table.path, log_path=table.log_table if table.log_mode else None, known=selection.ledger
    )
    try:
        changes = _read_changes(spark, table, chosen, batch_number=txn + 1)
    except Exception as exc:
        raise (translate(exc, reading=True) or exc) from exc
    # A counted plan reads its changes again and again (counts, classification, the commit's
    # passes): they are cached. An uncounted log batch reads them three times, each for a few
    # columns but one: caching them cost more than those reads (a batch of 1.5 M changes spent
    # 2.4 s of 9.5 building the cache; bench/RESULTS.md, "Seventeenth session"). Its commit checks
    # that no feed file changed since it was listed, so one rewritten between the reads commits nothing.
    frame = changes.frame.persist(StorageLevel.MEMORY_AND_DISK) if counted else changes.frame
    frames = [frame]
    settings: dict[str, str | None] = {}
    own = tuning.session_settings(spark) if own_settings is None else own_settings
    tuned = contextlib.ExitStack()
    try:
        is_valid = f"{C.ERROR} IS NULL AND {C.OP} != 'N'"
        valid = frame.filter(is_valid)
        # The key ranges of a batch that can only touch its own keys (no snapshot, no history, no
        # truncate possible) are found in the same action as its row counts; a small table is
        # read whole (prune.MIN_PRUNED_BYTES).
        whole = not exists or table.scd2 or bool(selection.snapshots) or _small_table(spark, table)
        early = not whole and not any(f.truncate_codes for f in table.feeds)
        counts = {
            "_lm_rows": "count(1)",
            "_lm_bad": f"count({C.ERROR})",
            "_lm_n": f"count_if({C.ERROR} IS NULL AND {C.OP} = 'N')",
        }
        # (The valid rows' key ranges are found in the same aggregate, one read of the feed, over
        # the span of the keys the table holds.)
        stored_files = _stored_files(spark, table) if early else None
        span = prune.span_of(stored_files)
        query = range_query(frame, table.key, where=is_valid, counts=counts, span=span) if early else None
        try:
            if query is not None:
                parts = query.parts
            else:
                parts = (prune.tagged(frame.agg(*[F.expr(f"{c} AS {n}") for n, c in counts.items()]), prune.BOUNDS),)
            found = prune.collect_parts(parts)
            stats = found[prune.BOUNDS]
        except Exception as exc:
            raise (translate(exc, reading=True) or exc) from exc
        rows_read, rows_bad, ignored = int(stats["_lm_rows"]), int(stats["_lm_bad"]), int(stats["_lm_n"] or 0)
        # A batch that may reach the whole table (large, with history, or with snapshots, whose
        # absent keys come from the table) is planned with the session's own settings. A log
        # table's batch whose keys are broadcast reads only its keys' rows of the merged view.
        key_bound = key_broadcast_rows(valid.schema, table.key)
        tune = rows_read <= (key_bound if table.log_mode else BROADCAST_ROWS)
        tune = tune and not table.scd2 and not selection.snapshots
        if not tune:
            tuned.enter_context(scoped_conf(spark, own))
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

        # A batch that can only touch its own keys has its key ranges now, where they pay: a log
        # table's sides are then read from only the files that can hold those keys.
        ranges: KeyRanges | None = None
        if query is not None:
            ranges = _paying(stored_files, query.ranges(found))
        stored: DataFrame | None = None
        stored_schema: StructType | None = None
        sides: dict[str, DataFrame] = {}
        sides_within = False  # (the sides were read within the batch's key ranges)
        truncating = any(f.truncate_codes for f in table.feeds)
        # A log batch without snapshots whose keys can be broadcast classifies against its own keys'
        # rows of the merged view only (log.newest_of_keys).
        of_keys = table.log_mode and exists and not selection.snapshots and rows_read <= key_bound
        if exists:
            # In log mode the stored state is the merged view, so late/tombstone/partial rules hold.
            # Without truncates, its sides are read from the files the checksum lists, within the
            # batch's key ranges when it has them: Delta's file skipping would have nothing to add.
            if table.log_mode:
                sides = log.read_sides(spark, table, listed=not truncating, ranges=ranges)
                sides_within = ranges is not None
                # The whole view only where the batch reaches beyond its own keys (a truncate, SCD2
                # history, a snapshot, keys too many to broadcast): else its schema is all it needs.
                if of_keys and not truncating and not table.scd2:
                    stored_schema = log.merged_schema(table, sides)
                if stored_schema is None:
                    stored = log.merged(table, sides)
            else:
                stored = delta.read_pinned(spark, table.path)
            if stored_schema is None:
                assert stored is not None
                stored_schema = stored.schema
            _check_table_columns(table, stored_schema.names)
            valid = delta.conform(
                valid,
                stored_schema,
                changes.data_columns,
                feed=", ".join(loc for feed in table.feeds for loc in feed.location),
                date_to_timestamp=table.widen_date_to_timestamp,
                table_widens=not table.log_mode and delta.type_widening_enabled(spark, table.path),
            )
        truncate = Truncate()
        if truncating:
            with scoped_conf(spark, own):  # (it counts the stored rows a truncate removes)
                truncate = _truncate(table, valid, stored)
        if truncate.before is not None:
            valid = valid.filter(
                (F.col(C.OP) != "T") & (F.struct(*[F.col(f"`{c}`") for c in table.sequence_columns]) >= truncate.before)
            )
        snapshot_absent, positions = 0, {}
        for index, pending in selection.snapshots.items():
            feed = table.feeds[index]
            if not valid.filter(F.col(C.SNAPSHOT)).take(1):
                raise InputError(
                    "full snapshot holds no valid row: the sequence it was taken at is unknown, so the keys it "
                    "lacks cannot be deleted; nothing was applied",
                    path=pending.files[0].path,
                )
            scoped = scope_positions(table, feed, pending, valid.filter(F.col(C.SNAPSHOT)), pending.position)
            check_order(index, pending, scoped, _applied(selection.ledger, index), feed)
            positions[str(index)] = {**(_applied(selection.ledger, index) or {}), **scoped}
            absent = absent_deletes(table, feed, valid, stored, data_columns=changes.data_columns)
            absent = absent.persist(StorageLevel.MEMORY_AND_DISK)
            frames.append(absent)
            snapshot_absent += absent.count()
            valid = valid.unionByName(absent, allowMissingColumns=True)
        tombs = tombstones.read(spark, table, selection.ledger.batch_ids)
        keyed = rows_read + snapshot_absent <= key_bound
        # A log batch never broadcasts more keys than its budget, wherever they are broadcast.
        small = rows_read + snapshot_absent <= BROADCAST_ROWS and (keyed or not table.log_mode)
        if tune and truncate.before is None:
            # Only the batch's rows are shuffled from here on (the table is reduced to its keys).
            settings = tuning.small_batch_settings(spark, rows_read)
            tuned.enter_context(scoped_conf(spark, settings))
        elif tune:
            tuned.enter_context(scoped_conf(spark, own))
        partial = table.partial_columns(changes.data_columns)
        history: scd2.History | None = None
        if table.scd2:
            history = scd2.build(
                table, valid, stored, tombstones=tombs.rows, data_columns=changes.data_columns, partial=partial
            )
            classified = history.changes.persist(StorageLevel.MEMORY_AND_DISK)
            frames.append(classified)
            source = history.source.persist(StorageLevel.MEMORY_AND_DISK)
            frames.append(source)
            history = replace(history, changes=classified, source=source)
        else:
            latest = collapse(valid, key=table.key, sequence=table.sequence_columns, partial=partial)
            # Only a batch that can touch nothing but its own keys is pruned (a truncate or a
            # snapshot reaches every stored row), and only on a table that is not small.
            if not whole and truncate.before is None and query is None:
                stored_files = _stored_files(spark, table)
                found_ranges = key_ranges(valid, table.key, span=prune.span_of(stored_files))
                ranges = _paying(stored_files, found_ranges)
            candidates = stored
            if of_keys:
                # Only the batch's keys of the merged view, deletes too: never rank the whole table
                # and log, and one read of the log gives its tombstones of those keys as well.
                keys = valid.select(*[F.col(f"`{k}`") for k in table.key])
                candidates = log.newest_of_keys(spark, table, keys=keys, sides=sides)
            elif table.log_mode and table.tombstones and stored is not None:
                # A log table's deletes are in its log: tombstones committed with their batches
                # (classify reduces them to the batch's keys, like the tombstone table's).
                tombs = tombs.adding(log.tombstones(spark, table))
            # The batch's own keys of sides read within its ranges need no filter by them: its
            # literals would make new code for Spark to compile and the JVM to warm every batch.
            if candidates is not None and ranges is not None and not (of_keys and sides_within):
                candidates = candidates.filter(ranges.predicate())
            if table.log_mode and candidates is not None:
                candidates = log.with_file_column(candidates)
            classified = classify(
                latest,
                candidates,
                key=table.key,
                sequence=table.sequence_columns,
                partition_by=table.partition_by,
                truncate_before=truncate.before,
                tombstones=tombs.latest(table.key, table.sequence_columns),
                truncated_before=tombs.truncated_before,
                compare=_compared(table, changes.data_columns, stored) if selection.snapshots else (),
                broadcast=small,
                keys=valid,
                table_of_keys=of_keys,
                table_deletes=of_keys,
                table_tombstones=of_keys and table.tombstones,
            )
            if counted:
                classified = classified.persist(StorageLevel.MEMORY_AND_DISK)
                frames.append(classified)
        by_op: list[tuple[str, str, int]] = []
        writes = None
        if counted:
            by_op, writes = _outcome_counts(classified, history.source if history is not None else None)
    except BaseException:
        for item in frames:
            item.unpersist()
        raise
    finally:
        tuned.close()
    read = BatchMetrics(
        rows_read=rows_read,
        rows_bad=rows_bad,
        truncates=truncate.records,
        truncated=truncate.stored_rows,
        ignored=ignored,
        snapshot_absent=snapshot_absent,
    )
    metrics = with_outcomes(read, by_op, table=table, truncating=truncate.before is not None) if counted else read
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
        snapshots=positions,
        history=history,
        writes=writes,
        ranges=ranges,
        small=small,
        keyed=keyed,
        stored_columns=tuple(stored_schema.names) if stored_schema is not None else (),
        settings=settings,
        own_settings=own,
        counted=counted,
    )


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


def remembered(table: TableConfig) -> list[str]:
    """The outcomes of a delete that leave a tombstone: applied, of an absent key, and (SCD2, where
    a late delete is placed in history) late."""
    return [Outcome.DELETE.value, Outcome.ABSENT.value] + ([Outcome.LATE.value] if table.scd2 else [])


def _outcome_counts(classified: DataFrame, source: DataFrame | None) -> tuple[list[tuple[str, str, int]], int | None]:
    """How many of the classified changes have each outcome and op, and (with an SCD2 batch's
    ``source``) how many versions it writes, in one Spark action."""
    from pyspark.sql import functions as F

    counted = classified.groupBy(F.col(C.OUTCOME).alias("o"), F.col(C.OP).alias("op")).agg(
        F.count(F.lit(1)).alias("n"), F.lit(False).alias("versions")
    )
    if source is not None:
        versions = source.agg(F.count(F.lit(1)).alias("n")).select(
            F.lit(None).cast("string").alias("o"),
            F.lit(None).cast("string").alias("op"),
            "n",
            F.lit(True).alias("versions"),
        )
        counted = counted.unionByName(versions)
    by_op: list[tuple[str, str, int]] = []
    writes = None
    for row in counted.collect():
        if row["versions"]:
            writes = int(row["n"])
        else:
            by_op.append((str(row["o"]), str(row["op"]), int(row["n"])))
    return by_op, writes


def _small_table(spark: SparkSession, table: TableConfig) -> bool:
    """Whether the table (with its log, in ``log`` mode) holds fewer than
    :data:`prune.MIN_PRUNED_BYTES`, by Delta's commit checksums: such a table is read whole."""
    paths = [table.path, table.log_table] if table.log_mode else [table.path]
    sizes = [delta.table_bytes(spark, path) for path in paths]
    return all(size is not None for size in sizes) and sum(s or 0 for s in sizes) < prune.MIN_PRUNED_BYTES


def _stored_paths(spark: SparkSession, table: TableConfig) -> list[str]:
    """The Delta tables that hold ``table``'s rows: the table, and in ``log`` mode its log where they exist."""
    if not table.log_mode:
        return [table.path]
    return [path for path in (table.path, table.log_table) if delta.table_exists(spark, path)]


def _stored_files(spark: SparkSession, table: TableConfig) -> list[tuple[Any, Any, int]] | None:
    """Each data file of the Delta tables that hold ``table``'s rows (the table, and in ``log`` mode
    its log where they exist) with its smallest and largest key and its size, from Delta's log
    (:func:`delta.file_key_bounds`); ``None`` when a table's statistics cannot tell, or the key has
    several columns."""
    if len(table.key) != 1:
        return None
    files: list[tuple[Any, Any, int]] = []
    for path in _stored_paths(spark, table):
        found = delta.file_key_bounds(spark, path, table.key[0])
        if found is None:
            return None
        files.extend(found)
    return files


def _paying(files: Sequence[tuple[Any, Any, int]] | None, ranges: KeyRanges | None) -> KeyRanges | None:
    """``ranges`` when they leave out at least :data:`prune.MIN_SKIPPED_SHARE` of the bytes of the
    stored ``files`` (:func:`_stored_files`), or when the statistics cannot tell (``files`` is
    ``None``); else ``None``: a predicate that skips nothing only costs the batch."""
    if ranges is None:
        return None
    if files is None:
        return ranges
    share = prune.skipped_share(files, ranges)
    return ranges if share is not None and share >= prune.MIN_SKIPPED_SHARE else None


def _compared(table: TableConfig, data_columns: Sequence[str], stored: DataFrame | None) -> tuple[str, ...]:
    """The columns whose values decide whether a snapshot row equals the stored row: the batch's
    data columns but the key and the file-derived sequence, when the table has them all."""
    if stored is None:
        return ()
    present = set(stored.columns)
    columns = tuple(c for c in data_columns if c not in table.key and c != FILE_SEQUENCE_COLUMN)
    return columns if all(c in present for c in columns) else ()


def _read_changes(
    spark: SparkSession, table: TableConfig, chosen: Sequence[tuple[int, FeedFile]], *, batch_number: int
) -> ChangeSet:
    """Read and normalise each feed's files (file indexes run on across feeds), then union them."""
    from pyspark.sql import functions as F

    parts: list[ChangeSet] = []
    offset = 0
    for index, feed in enumerate(table.feeds):
        group = [f for i, f in chosen if i == index]
        if not group:
            continue
        raw = read_feed(spark, feed, group, offset=offset)
        part = normalize(spark, table, raw, group, batch_number=batch_number, feed=feed, offset=offset)
        parts.append(replace(part, frame=part.frame.withColumn(C.SNAPSHOT, F.lit(feed.snapshot))))
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


def _check_table_columns(table: TableConfig, stored_columns: Sequence[str]) -> None:
    present = {c.lower() for c in stored_columns}
    for role, cols in (("key", table.key), ("sequence", table.sequence_columns)):
        for name in cols:
            if name.lower() not in present:
                raise SchemaError(
                    f"{table.path}: {role} column '{name}' is not in the table ({', '.join(stored_columns)}); "
                    "nothing was applied"
                )
