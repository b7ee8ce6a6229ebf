"""One Delta table maintained by lakemerge, and its feeds: a ``[tables.NAME]`` section."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import Field, field_validator, model_validator

from lakemerge.config.base import Model, absolute
from lakemerge.config.feed import FeedConfig
from lakemerge.config.records import RecordsConfig
from lakemerge.config.schema_changes import SchemaChanges
from lakemerge.config.stream import StreamConfig

History = Literal["latest", "scd2"]
WriteMode = Literal["copy_on_write", "deletion_vectors", "log"]
Clustering = Literal["none", "zorder", "liquid"]

#: A catalog object name: ``table`` or ``database.table``.
_CATALOG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")

#: Columns lakemerge adds to SCD type 2 tables (docs/semantics.md §6): the sequence at which a
#: version starts, where it ends (null while it is current), and whether it is current.
START_AT, END_AT, CURRENT = "__start_at", "__end_at", "__current"
SCD2_COLUMNS = (START_AT, END_AT, CURRENT)

#: Name of the column holding the sequence when the feed has no ordering field and lakemerge
#: derives it from the order of files. Stored so later batches can compare.
FILE_SEQUENCE_COLUMN = "_lm_sequence"

#: Name of the column that orders a DMS table's full load before its changes: 0 for rows of
#: full-load files, 1 for every change, compared before the sequence columns and stored with them
#: (docs/semantics.md §10 Operation codes). A table without sequence columns gives full-load files
#: ``_lm_sequence`` 0 instead.
LOAD_PHASE_COLUMN = "_lm_phase"


class TableConfig(Model):
    """One Delta table maintained by lakemerge, and its feed.

    Attributes:
        name: the table's name in the pipeline.
        path: where the Delta table lives (local path or Hadoop URI).
        key: the column(s) identifying a record.
        sequence: the column(s) ordering versions of a record, compared left to right. Empty: the
            files' order is the sequence (see ``feed.file_order``): the number after the last
            ``_`` of the name, the modification time, or, ordering by name, the batch's number
            (later batches are newer). It is stored in the ``_lm_sequence`` column so that later
            batches compare against it; within a batch, file order then row position break ties.
        partition_by: partition columns of the table (used when lakemerge creates it).
        feed: where the change files come from; none for a table fed only by DataFrames
            (``lakemerge.apply_changes``, transactions) or by a stream.
        more_feeds: further feeds of the same table (regional systems feeding one table),
            each with its own format settings. Files arriving together are applied in one batch,
            ordered feed by feed (``feed`` first), then by each feed's file order. In TOML, list
            them all as ``[[tables.NAME.feeds]]`` instead of one ``[tables.NAME.feed]``.
        records: how change records given as DataFrames (``lakemerge.apply_changes``,
            transactions) say what they do: the op column and codes, the types, the format
            (``rows``, ``json``, ``debezium``); without it, the first feed's settings, else every
            record is an upsert.
        stream: the table's change stream, run by ``lakemerge stream``: a Kafka topic of change
            events, or the feed's landing zone as a stream of files.
        ignore_null_updates: partial updates (docs/semantics.md §3 Partial updates): a null in an upsert means
            "unchanged". ``true`` for every column but key and sequence, or a list of columns.
        widen_date_to_timestamp: accept a DATE feed column into a TIMESTAMP table column.
        schema_changes: what a batch does with new and dropped columns and changed types.
        quarantine_path: where bad records go (default: the table's path + ``__quarantine``).
        max_bad_rows / max_bad_fraction: the quarantine threshold. A batch with more bad rows than
            ``max_bad_rows`` (default 0), or, when ``max_bad_fraction`` is set, a greater fraction
            of bad rows than it, fails without committing anything; otherwise its bad rows are
            quarantined and its good rows committed.
        max_files_per_batch / max_bytes_per_batch: limits of one batch (at least one file is taken);
            later files wait for the next batch.
        commit_attempts: how many times a batch is planned and committed again when a concurrent
            writer wins the race, with exponential backoff, before giving up with a ConflictError.
        history: ``latest`` keeps the latest version of each record; ``scd2`` keeps every version
            (docs/semantics.md §6 SCD type 2 history) with ``__start_at``, ``__end_at`` (null while
            current) and ``__current``.
        track_columns: with ``scd2``, the columns whose changes open a new version (default: all
            but key and sequence); changes to other columns update the version they fall in.
        tombstones: remember deleted keys with the delete's sequence, so that a late update older
            than the delete cannot bring the record back (docs/semantics.md §12 Tombstones).
        tombstone_path: where tombstones are kept, a Delta table beside the table (default: the
            table's path + ``__tombstones``).
        write_mode: how batches reach the table (docs/modes.md): ``copy_on_write`` (Delta MERGE
            rewriting the files it touches), ``deletion_vectors`` (MERGE marking rows in deletion
            vectors instead of rewriting files), or ``log`` (each batch appended to a change-log
            table beside the table, ``<path>__log``; read the merged view, fold with compaction).
        clustering: how ``lakemerge compact`` lays out the table by key: ``none`` (bin-packing
            only), ``zorder`` (OPTIMIZE ZORDER BY the key) or ``liquid`` (Delta liquid clustering
            by the key; unpartitioned tables only).
        compact_after_batches: compact automatically after every N-th batch (``None``: never).
        compact_after_log_rows: in ``log`` mode, compact automatically once the log holds at least
            this many rows (``None``: never).
        tombstone_retention_days: ``lakemerge vacuum`` removes tombstones older than this (wall
            time since the batch that wrote them). Until then every tombstone is honoured.
        catalog_name: the name (``table`` or ``database.table``) under which the table is
            registered in the Spark catalog after each batch; with ``[spark] catalog = "hive"`` it
            defaults to ``<database>.<name>``. Unset elsewhere: the table is not registered.
    """

    name: str
    path: str
    key: tuple[str, ...]
    sequence: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()
    feed: FeedConfig | None = None
    more_feeds: tuple[FeedConfig, ...] = ()
    records: RecordsConfig | None = None
    stream: StreamConfig | None = None
    ignore_null_updates: bool | tuple[str, ...] = False
    widen_date_to_timestamp: bool = False
    schema_changes: SchemaChanges = Field(default_factory=SchemaChanges)
    quarantine_path: str | None = None
    max_bad_rows: int = Field(default=0, ge=0)
    max_bad_fraction: float | None = Field(default=None, ge=0, le=1)
    max_files_per_batch: int | None = Field(default=None, ge=1)
    max_bytes_per_batch: int | None = Field(default=None, ge=1)
    commit_attempts: int = Field(default=5, ge=1)
    history: History = "latest"
    track_columns: tuple[str, ...] = ()
    tombstones: bool = True
    tombstone_path: str | None = None
    tombstone_retention_days: float = Field(default=7.0, ge=0)
    write_mode: WriteMode = "copy_on_write"
    clustering: Clustering = "none"
    compact_after_batches: int | None = Field(default=None, ge=1)
    compact_after_log_rows: int | None = Field(default=None, ge=1)
    catalog_name: str | None = None

    @field_validator("catalog_name")
    @classmethod
    def _catalog_name(cls, value: str | None) -> str | None:
        if value is not None and not _CATALOG_NAME.fullmatch(value):
            raise ValueError(f"'{value}' is not a catalog name: 'table' or 'database.table' (letters, digits, _)")
        return value

    @field_validator("key", "sequence", "partition_by", "track_columns", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @field_validator("path")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return absolute(value)

    @field_validator("key")
    @classmethod
    def _some_key(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("needs at least one key column")
        return value

    @model_validator(mode="after")
    def _columns_consistent(self) -> TableConfig:
        for group in ("key", "sequence", "partition_by"):
            cols: tuple[str, ...] = getattr(self, group)
            dupes = sorted({c for c in cols if cols.count(c) > 1})
            if dupes:
                raise ValueError(f"'{group}' lists {dupes} more than once")
        overlap = set(self.key) & set(self.sequence)
        if overlap:
            raise ValueError(f"columns {sorted(overlap)} cannot be both key and sequence")
        for rules in self.record_rules:
            if rules.op_column and rules.op_column in (*self.key, *self.sequence, *self.partition_by):
                raise ValueError(f"op_column '{rules.op_column}' cannot also be a key, sequence or partition column")
            kept = [*self.key, *self.sequence, *self.partition_by]
            dropped = [
                c for c in kept if c in rules.drop_columns or (rules.keep_columns and c not in rules.keep_columns)
            ]
            if dropped:
                raise ValueError(f"key, sequence and partition columns cannot be dropped: {dropped}")
        if self.more_feeds and self.feed is None:
            raise ValueError("more_feeds needs a first feed")
        if self.stream is not None and self.stream.source == "files" and (self.feed is None or self.more_feeds):
            raise ValueError("a stream with source = 'files' reads the table's feed: give the table one feed")
        self._check_history()
        self._check_mode()
        if sum(feed.snapshot for feed in self.feeds) > 1:
            raise ValueError("a table can have at most one full-snapshot feed (snapshot = true)")
        for feed in self.feeds:
            if feed.snapshot_scope == "partitions" and not self.partition_by:
                raise ValueError("snapshot_scope = 'partitions' needs a partitioned table (partition_by)")
        if not isinstance(self.ignore_null_updates, bool):
            bad = [c for c in self.ignore_null_updates if c in (*self.key, *self.sequence)]
            if bad:
                raise ValueError(f"ignore_null_updates cannot list key or sequence columns: {bad}")
        return self

    def _check_history(self) -> None:
        named = (*self.key, *self.sequence, *self.partition_by, *self.track_columns)
        reserved = [c for c in named if c in SCD2_COLUMNS]
        if reserved:
            raise ValueError(f"{reserved} are reserved for SCD type 2 history columns")
        if self.history != "scd2":
            if self.track_columns:
                raise ValueError("track_columns needs history = 'scd2'")
            return
        if len(self.sequence_columns) != 1:
            more = (
                "; a DMS feed orders its full load before its changes with a second one (_lm_phase): "
                "use sequence = [] (full-load files are then sequence 0)"
                if self.sequence and self.load_phase
                else ""
            )
            raise ValueError(
                f"history = 'scd2' needs a single sequence column (it becomes __start_at / __end_at){more}"
            )
        fixed = [c for c in self.track_columns if c in (*self.key, *self.sequence)]
        if fixed:
            raise ValueError(f"track_columns cannot list key or sequence columns: {fixed}")
        if any(f.truncate_codes for f in self.feeds):
            raise ValueError(
                "history = 'scd2' does not support truncate codes: a truncate would have to close every "
                "version at once; send deletes (or a full snapshot feed) instead"
            )

    def _check_mode(self) -> None:
        if self.write_mode == "log":
            if self.scd2:
                raise ValueError(
                    "write_mode = 'log' cannot be combined with history = 'scd2': SCD type 2 rewrites closed "
                    "versions in place; use copy_on_write or deletion_vectors for history tables"
                )
            if any(f.truncate_codes for f in self.feeds):
                raise ValueError(
                    "write_mode = 'log' does not support truncate codes (the merged view cannot express a "
                    "truncate); use copy_on_write or deletion_vectors, or send deletes"
                )
            if self.schema_changes.dropped_column == "drop":
                raise ValueError("schema_changes.dropped_column = 'drop' needs a table without a change log")
        elif self.compact_after_log_rows is not None:
            raise ValueError("compact_after_log_rows needs write_mode = 'log'")
        if self.clustering == "liquid" and self.partition_by:
            raise ValueError("clustering = 'liquid' cannot be used with partition_by (Delta forbids both)")

    @field_validator("quarantine_path", "tombstone_path")
    @classmethod
    def _absolute_quarantine(cls, value: str | None) -> str | None:
        return absolute(value) if value else None

    @model_validator(mode="before")
    @classmethod
    def _feeds_list(cls, data: object) -> object:
        if isinstance(data, dict) and "feeds" in data:
            feeds = data["feeds"]
            if "feed" in data:
                raise ValueError("give either 'feed' or 'feeds', not both")
            if not isinstance(feeds, (list, tuple)) or not feeds:
                raise ValueError("'feeds' needs at least one feed")
            data = {**{k: v for k, v in data.items() if k != "feeds"}, "feed": feeds[0], "more_feeds": feeds[1:]}
        return data

    def unknown_column(self, found: Sequence[Sequence[str] | None] | None = None) -> tuple[str, str] | None:
        """The first configuration key that names a column its feed lacks, and why: ``(key,
        message)``, ``key`` relative to the table (``keep_columns`` of a second feed is
        ``feeds.1.keep_columns``); ``None`` when every reference is known. ``found``: each feed's
        columns (``None`` where they are not known), by default those the configuration declares
        (``schema`` or ``columns``). Key, sequence and partition columns, the op column, types,
        kept and dropped columns and the snapshot column are looked for in their feed; with every
        feed's columns known, ``track_columns`` and the columns of ``ignore_null_updates`` in any
        of them (:meth:`unknown_shared`)."""
        columns = [f.declared_columns for f in self.feeds] if found is None else list(found)
        several = len(self.feeds) > 1
        for index, (feed, names) in enumerate(zip(self.feeds, columns, strict=True)):
            if names is None:
                continue
            where = f"feeds.{index}." if several else "feed."
            references: list[tuple[str, Sequence[str]]] = [
                ("key", self.key),
                ("sequence", self.sequence),
                ("partition_by", self.partition_by),
                (where + "op_column", (feed.op_column,) if feed.op_column else ()),
                (where + "types", tuple(feed.types)),
                (where + "keep_columns", feed.keep_columns),
                (where + "drop_columns", feed.drop_columns),
                (where + "snapshot_column", (feed.snapshot_column,) if feed.snapshot_column else ()),
            ]
            for key, wanted in references:
                missing = [c for c in wanted if c not in names]
                if missing:
                    return key, _not_in(missing[0], names, "the feed's columns")
        if found is None and all(names is not None for names in columns):
            return self.unknown_shared([c for names in columns for c in names or ()])
        return None

    def unknown_shared(self, known: Sequence[str]) -> tuple[str, str] | None:
        """Like :meth:`unknown_column` for the columns any feed (or the table) may hold:
        ``track_columns`` and the columns of ``ignore_null_updates``, looked for in ``known``."""
        names = set(known) | {FILE_SEQUENCE_COLUMN}
        partial = () if isinstance(self.ignore_null_updates, bool) else self.ignore_null_updates
        for key, wanted in (("track_columns", self.track_columns), ("ignore_null_updates", partial)):
            missing = [c for c in wanted if c not in names]
            if missing:
                shown = sorted(dict.fromkeys(c for c in known if c != FILE_SEQUENCE_COLUMN))
                return key, _not_in(missing[0], shown, "the columns of the feeds and the table")
        return None

    @property
    def feeds(self) -> tuple[FeedConfig, ...]:
        """Every feed of the table, the first one first (none for a table fed only by DataFrames)."""
        return (self.feed, *self.more_feeds) if self.feed is not None else ()

    @property
    def record_rules(self) -> tuple[FeedConfig | RecordsConfig, ...]:
        """Everything that says how the table's change records are read: its feeds, its records
        section and its stream."""
        found: list[FeedConfig | RecordsConfig] = list(self.feeds)
        found += [r for r in (self.records, self.stream) if r is not None]
        return tuple(found)

    @property
    def frame_rules(self) -> RecordsConfig | FeedConfig:
        """How change records given as DataFrames are read when the caller names no rules: the
        ``records`` section, else the first feed's, else every record an upsert."""
        return self.records or self.feed or RecordsConfig()

    @property
    def quarantine(self) -> str:
        """Where this table's bad records are kept."""
        return self.quarantine_path or f"{self.path.rstrip('/')}__quarantine"

    @property
    def tombstone_table(self) -> str:
        """Where this table's tombstones are kept."""
        return self.tombstone_path or f"{self.path.rstrip('/')}__tombstones"

    @property
    def log_table(self) -> str:
        """Where a ``log``-mode table's change log is kept: the table's path + ``__log``."""
        return f"{self.path.rstrip('/')}__log"

    @property
    def log_mode(self) -> bool:
        """Whether batches go to the change log (``write_mode = 'log'``)."""
        return self.write_mode == "log"

    @property
    def scd2(self) -> bool:
        """Whether the table keeps SCD type 2 history."""
        return self.history == "scd2"

    def too_many_bad(self, bad: int, read: int) -> bool:
        """Whether ``bad`` rows out of ``read`` exceed the quarantine threshold."""
        if bad == 0:
            return False
        if self.max_bad_fraction is not None:
            return bad / max(read, 1) > self.max_bad_fraction
        return bad > self.max_bad_rows

    def partial_columns(self, columns: Sequence[str]) -> tuple[str, ...]:
        """The columns among ``columns`` where a null in an upsert means "unchanged"."""
        if self.ignore_null_updates is False:
            return ()
        fixed = {*self.key, *self.sequence_columns}
        chosen = columns if self.ignore_null_updates is True else self.ignore_null_updates
        return tuple(c for c in columns if c in chosen and c not in fixed)

    @property
    def load_phase(self) -> bool:
        """Whether a feed's full load precedes its changes whatever their sequence (a DMS feed)."""
        return any(f.envelope == "dms" for f in self.feeds)

    @property
    def sequence_columns(self) -> tuple[str, ...]:
        """The columns stored in the table that order versions of a record: ``sequence`` (behind
        ``_lm_phase`` for a DMS feed), or ``_lm_sequence`` without it."""
        if not self.sequence:
            return (FILE_SEQUENCE_COLUMN,)
        return (LOAD_PHASE_COLUMN, *self.sequence) if self.load_phase else self.sequence


def _not_in(name: str, names: Sequence[str], where: str) -> str:
    return f"column '{name}' is not among {where} ({', '.join(names)}); names are compared exactly"
