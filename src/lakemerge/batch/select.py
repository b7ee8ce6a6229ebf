"""Select a batch's files: the pending files of each feed, in file order, up to the table's limits.

A file is pending unless a committed batch recorded it (the ledger); a recorded file whose size or
modification time changed is an error (:func:`lakemerge.table.ledger.check_unchanged`). A
snapshot feed contributes its oldest pending snapshot only, whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakemerge.batch.frames import FrameBatch
from lakemerge.changes.snapshot import WHOLE, Pending, check_order, next_snapshot
from lakemerge.config import FeedConfig, TableConfig
from lakemerge.feeds import FeedFile
from lakemerge.feeds.files import list_feed_entries
from lakemerge.table import ledger

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Selection:
    """The files a batch takes, and what the table's history says about earlier batches.

    Attributes:
        chosen: (feed index, file) in batch order.
        skipped: files found but already applied.
        exists: whether the table (or, in ``log`` mode, its change log) exists.
        ledger: the table's history of batches (empty for a new table).
        snapshots: per snapshot feed index, the snapshot the batch applies.
        frame: the batch's records when they are given as a DataFrame (then it has no files).
        ignored: the entries of the landing zones that are not read, each with why (hidden ones,
            names Hadoop cannot read, dangling symbolic links).
    """

    chosen: list[tuple[int, FeedFile]]
    skipped: tuple[str, ...]
    exists: bool
    ledger: ledger.Ledger
    snapshots: dict[int, Pending]
    frame: FrameBatch | None = None
    ignored: tuple[tuple[str, str], ...] = ()

    @property
    def files(self) -> list[FeedFile]:
        """The chosen files, in batch order (a DataFrame batch: the one pseudo-file naming it)."""
        return self.frame.files if self.frame is not None else [f for _, f in self.chosen]

    def applied_snapshot(self, index: int) -> dict[str, Any] | None:
        """The positions of the last snapshot of feed ``index`` that a committed batch applied."""
        return last_snapshot(self.ledger, index)


def last_snapshot(history: ledger.Ledger, index: int) -> dict[str, Any] | None:
    """The positions of the last snapshot of feed ``index`` that ``history`` records as applied."""
    found = history.snapshots.get(index)
    return found if isinstance(found, dict) else None


@dataclass(frozen=True)
class NothingPending:
    """No file is pending; ``skipped`` lists the files found but already applied, ``ignored`` the
    entries not read (see :class:`Selection`). ``applied_before``: a DataFrame batch whose source and
    batch id the table committed already."""

    skipped: tuple[str, ...]
    applied_before: bool = False
    ignored: tuple[tuple[str, str], ...] = ()


def select_frame(spark: SparkSession, table: TableConfig, batch: FrameBatch) -> Selection | NothingPending:
    """A DataFrame batch, unless the table committed its source's batch id (or a later one) already;
    a Kafka stream's, its records that the table's commits from the source did not apply (by their
    offsets: :meth:`FrameBatch.unapplied`), unless none is left."""
    exists, history = ledger.state(spark, table.path, log_path=table.log_table if table.log_mode else None)
    if batch.ranges is not None:
        fresh = batch.unapplied(history.offsets.get(batch.source, {})) if batch.ranges else None
        if fresh is None:
            return NothingPending((), applied_before=bool(batch.ranges))
        return Selection([], (), exists, history, {}, frame=fresh)
    last = history.sources.get(batch.source)
    if last is not None and batch.batch_id <= last:
        return NothingPending((), applied_before=True)
    return Selection([], (), exists, history, {}, frame=batch)


def select_files(
    spark: SparkSession, table: TableConfig, inputs: Sequence[str] | None, *, limited: bool = True
) -> Selection:
    """The batch's files: pending files of each feed in turn, each feed's in file order, up to the
    table's batch limits (at least one file); a snapshot feed contributes its oldest pending
    snapshot only. ``inputs`` replaces the first feed's location (and the other feeds are not read).
    ``limited=False``: every pending file (a new table's batch whose files hold no row yet)."""
    exists, history = ledger.state(spark, table.path, log_path=table.log_table if table.log_mode else None)
    pending: list[tuple[int, FeedFile]] = []
    skipped: list[str] = []
    ignored: dict[str, str] = {}
    snapshots: dict[int, Pending] = {}
    for index, feed in enumerate(table.feeds):
        if inputs and index > 0:
            break
        fresh, seen, unread = _pending(spark, feed, history, inputs or feed.location)
        skipped.extend(seen)
        ignored.update(unread)
        if feed.snapshot and fresh:
            snapshots[index] = next_snapshot(spark, table, feed, fresh)
            if feed.snapshot_scope == "table" and snapshots[index].position is not None:
                position = {WHOLE: snapshots[index].position}
                check_order(index, snapshots[index], position, last_snapshot(history, index), feed)
            fresh = list(snapshots[index].files)
        pending.extend((index, f) for f in fresh)
    chosen = _within_limits(table, pending, snapshot_feeds=set(snapshots)) if limited else pending
    taken = {i for i, _ in chosen}
    chosen_snapshots = {i: p for i, p in snapshots.items() if i in taken}
    return Selection(chosen, tuple(skipped), exists, history, chosen_snapshots, ignored=tuple(sorted(ignored.items())))


def _pending(
    spark: SparkSession, feed: FeedConfig, history: ledger.Ledger, locations: Sequence[str]
) -> tuple[list[FeedFile], list[str], list[tuple[str, str]]]:
    """The files under ``locations`` that no committed batch applied, the paths of those it did, and
    the entries not read."""
    fresh: list[FeedFile] = []
    seen: list[str] = []
    listed, ignored = list_feed_entries(spark, locations, file_order=feed.file_order)
    for f in listed:
        applied = ledger.check_unchanged(history.files, f.path, f.size, f.modified, archived=feed.archive is not None)
        if applied:
            seen.append(f.path)
        else:
            fresh.append(f)
    return fresh, seen, ignored


def _within_limits(
    table: TableConfig, pending: Sequence[tuple[int, FeedFile]], *, snapshot_feeds: set[int]
) -> list[tuple[int, FeedFile]]:
    """The first of ``pending`` that fit the table's limits (at least one file; a snapshot's files
    are never split between batches)."""
    chosen: list[tuple[int, FeedFile]] = []
    size = 0
    for index, item in pending:
        whole_snapshot = index in snapshot_feeds and any(i == index for i, _ in chosen)
        if chosen and not whole_snapshot:
            if table.max_files_per_batch is not None and len(chosen) >= table.max_files_per_batch:
                break
            if table.max_bytes_per_batch is not None and size + item.size > table.max_bytes_per_batch:
                break
        chosen.append((index, item))
        size += item.size
    return chosen
