"""Pydantic models for everything a pipeline can configure.

The models are frozen: a configuration is a value, built once (from TOML, from a chombo
``.properties`` file, or in Python) and passed down the data's path unchanged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lakemerge.config.loading import is_uri

FeedFormat = Literal["csv", "text", "json", "parquet", "orc", "avro", "debezium"]
Envelope = Literal["none", "dms"]
FileOrder = Literal["name", "name_number", "mtime"]
SnapshotOrder = Literal["name_number", "mtime", "column"]
SnapshotScope = Literal["table", "partitions"]
History = Literal["latest", "scd2"]
WriteMode = Literal["copy_on_write", "deletion_vectors", "log"]
Clustering = Literal["none", "zorder", "liquid"]
Catalog = Literal["in-memory", "hive"]

#: A catalog object name: ``table`` or ``database.table``.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CATALOG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")

#: Columns lakemerge adds to SCD type 2 tables (PRODUCT.md §Semantics 6): the sequence at which a
#: version starts, where it ends (null while it is current), and whether it is current.
START_AT, END_AT, CURRENT = "__start_at", "__end_at", "__current"
SCD2_COLUMNS = (START_AT, END_AT, CURRENT)

#: Name of the column holding the sequence when the feed has no ordering field and lakemerge
#: derives it from the number at the end of each file's name. Stored so later batches can compare.
FILE_SEQUENCE_COLUMN = "_lm_sequence"

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def absolute(path: str) -> str:
    """A local path made absolute against the current directory; URIs (``s3a://...``) unchanged.

    Spark resolves relative paths against the JVM's directory, which need not be Python's."""
    return path if not path or is_uri(path) or os.path.isabs(path) else os.path.abspath(path)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SparkSettings(_Model):
    """How lakemerge starts (or joins) Spark.

    Attributes:
        master: Spark master URL; ``local[*]`` runs embedded on this machine.
        app_name: the application name shown by Spark.
        conf: extra Spark settings, passed through unchanged (``spark.executor.memory`` ...).
        packages: extra Maven coordinates added to ``spark.jars.packages`` beside Delta's.
        log_file: where Spark's own log goes; ``None`` picks a file under the temp directory.
        catalog: where table names live. ``in-memory``: the session's own catalog (names vanish
            with it). ``hive``: a Hive metastore, so that ``spark-sql``, the Thrift server and other
            metastore clients find the tables by name (docs/deploy.md).
        metastore_uri: with ``hive``, a running metastore service (``thrift://host:9083``). Without
            it, an embedded Derby metastore in ``metastore_dir`` (one process at a time).
        metastore_dir: the embedded Derby metastore's folder (default ``metastore`` beside the
            pipeline file, or in the current directory).
        warehouse: ``spark.sql.warehouse.dir`` for the catalog's databases (default: Spark's).
        database: the database tables are registered in when they name none.
    """

    master: str = "local[*]"
    app_name: str = "lakemerge"
    conf: dict[str, str] = Field(default_factory=dict)
    packages: tuple[str, ...] = ()
    log_file: str | None = None
    catalog: Catalog = "in-memory"
    metastore_uri: str | None = None
    metastore_dir: str | None = None
    warehouse: str | None = None
    database: str = "default"

    @field_validator("database")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not _IDENTIFIER.fullmatch(value):
            raise ValueError(f"'{value}' is not a database name (letters, digits and _, not starting with a digit)")
        return value

    @model_validator(mode="after")
    def _hive_settings(self) -> SparkSettings:
        if self.catalog != "hive" and (self.metastore_uri or self.metastore_dir):
            raise ValueError("metastore_uri and metastore_dir need catalog = 'hive'")
        if self.metastore_uri and self.metastore_dir:
            raise ValueError("give metastore_uri (a metastore service) or metastore_dir (embedded Derby), not both")
        return self

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, value: object) -> object:
        if isinstance(value, dict):
            return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
        return value


class FeedConfig(_Model):
    """Where a table's change records come from and how to read them.

    Attributes:
        location: files or directories (local paths or Hadoop URIs) holding change files.
        format: ``csv`` (quoted, single-character delimiter), ``text`` (lines split by a regular
            expression, as chombo does), ``json`` (JSON lines), ``parquet``, ``orc``, ``avro``, or
            ``debezium`` (JSON lines of Debezium change events, with or without their schema).
        header: whether delimited files start with a header line naming the columns.
        delimiter: the field delimiter of ``csv`` files.
        quote / escape: the quote character of ``csv`` files and the one escaping it inside
            quotes (``"`` twice by default, as RFC 4180 writes it).
        multiline: ``csv`` records may span lines (quoted newlines); such files are not split.
        encoding: the character set of ``csv`` and ``json`` files (gzip and bzip2 compression is
            recognised by the file extension for every text format).
        envelope: ``dms`` reads AWS DMS output (``csv`` or ``parquet``): the ``Op`` column
            (I/U/D) first in change files, and full-load files (named ``LOAD…``) as inserts.
        delimiter_regex: the regular expression splitting ``text`` lines.
        schema_ddl: column names and types as a Spark DDL string (``id STRING, price INT``);
            for headerless files it names the columns by position.
        columns: names for headerless columns by position, all read as strings unless
            ``schema_ddl`` says otherwise. Without either, columns are named ``c0``, ``c1``, ...
        types: Spark SQL types for named columns (``{ price = "int" }``), cast after reading.
        op_column: column holding the operation code; it is never stored in the table.
        delete_codes: op codes meaning delete.
        upsert_codes: op codes meaning insert/update. Empty: every code that is not a delete code
            is an upsert (chombo's rule). Non-empty: any other code is an error.
        ignore_codes: op codes of records to skip and count as ignored (Debezium tombstones).
        truncate_codes: op codes meaning truncate: every stored row and every change older than
            the truncate record is removed (PRODUCT.md §Semantics 4).
        op_codes_ignore_case: compare op codes ignoring case.
        delete_file_prefix: every row of a file whose name starts with this prefix is a delete.
        file_order: how files are ordered: by ``name`` (full path), by the number after the last
            ``_`` in the name (``name_number``, seed 000's convention), or by modification time
            (``mtime``); ties by path.
        null_value: the string read as null in delimited files.
        archive: a directory where ``lakemerge run`` moves files once their batch is committed.
        keep_columns / drop_columns: keep only the listed feed columns, or all but the listed ones
            (e.g. CDC metadata). Key, sequence and partition columns are always kept.
        snapshot: every file is (part of) a full snapshot of the table (PRODUCT.md §Semantics 5):
            keys it lacks are deleted, as of the snapshot's greatest sequence, and rows it repeats
            unchanged are not rewritten. A batch applies at most one snapshot of the feed.
        snapshot_order: what orders snapshots: the number after the last ``_`` of the file name
            (files sharing the number form one snapshot), the file's modification time, or the
            greatest value of ``snapshot_column`` in the file. A snapshot older than the last one
            applied is an error.
        snapshot_scope: ``table``: the snapshot covers the whole table; ``partitions``: it covers
            only the table partitions its rows fall in (one snapshot per partition, seed 002).
    """

    location: tuple[str, ...]
    format: FeedFormat = "csv"
    header: bool = False
    delimiter: str = ","
    quote: str = '"'
    escape: str = '"'
    multiline: bool = False
    encoding: str = "UTF-8"
    envelope: Envelope = "none"
    delimiter_regex: str = ","
    schema_ddl: str | None = Field(default=None, alias="schema")
    columns: tuple[str, ...] = ()
    types: dict[str, str] = Field(default_factory=dict)
    op_column: str | None = None
    delete_codes: tuple[str, ...] = ("D",)
    upsert_codes: tuple[str, ...] = ()
    truncate_codes: tuple[str, ...] = ()
    ignore_codes: tuple[str, ...] = ()
    op_codes_ignore_case: bool = False
    delete_file_prefix: str | None = None
    file_order: FileOrder = "name"
    null_value: str | None = None
    archive: str | None = None
    keep_columns: tuple[str, ...] = ()
    drop_columns: tuple[str, ...] = ()
    snapshot: bool = False
    snapshot_order: SnapshotOrder = "name_number"
    snapshot_column: str | None = None
    snapshot_scope: SnapshotScope = "table"

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _snapshot_settings(self) -> FeedConfig:
        if self.snapshot_order == "column" and not self.snapshot_column:
            raise ValueError("snapshot_order = 'column' needs snapshot_column")
        if self.snapshot and (self.truncate_codes or self.delete_file_prefix):
            raise ValueError("a snapshot feed holds rows, not changes: it cannot have truncate codes or delete files")
        return self

    @field_validator("location", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _envelope_defaults(cls, data: object) -> object:
        """Debezium and DMS feeds know their op column and codes."""
        if not isinstance(data, dict):
            return data
        if data.get("format") == "debezium":
            defaults = {
                "op_column": "__op",
                "upsert_codes": ("c", "u", "r"),
                "delete_codes": ("d",),
                "ignore_codes": ("tombstone",),
            }
        elif data.get("envelope") == "dms":
            defaults = {"op_column": "Op", "upsert_codes": ("I", "U"), "delete_codes": ("D",)}
        else:
            return data
        return {**defaults, **{k: v for k, v in data.items() if v is not None}}

    @field_validator("location")
    @classmethod
    def _non_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or any(not v.strip() for v in value):
            raise ValueError("needs at least one non-empty path")
        return tuple(absolute(v) for v in value)

    @field_validator("archive")
    @classmethod
    def _absolute_archive(cls, value: str | None) -> str | None:
        return absolute(value) if value else None

    @field_validator("delimiter")
    @classmethod
    def _single_char(cls, value: str) -> str:
        if len(value) != 1:
            raise ValueError(f"must be exactly one character, got {value!r}")
        return value

    @field_validator("delimiter_regex")
    @classmethod
    def _valid_regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"is not a valid regular expression: {exc}") from exc
        return value

    @field_validator("delete_codes")
    @classmethod
    def _some_delete_code(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("needs at least one code")
        return value

    @model_validator(mode="after")
    def _codes_disjoint(self) -> FeedConfig:
        def fold(code: str) -> str:
            return code.lower() if self.op_codes_ignore_case else code

        groups = {
            "delete_codes": self.delete_codes,
            "upsert_codes": self.upsert_codes,
            "truncate_codes": self.truncate_codes,
            "ignore_codes": self.ignore_codes,
        }
        names = list(groups)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                both = {fold(c) for c in groups[first]} & {fold(c) for c in groups[second]}
                if both:
                    raise ValueError(f"op codes {sorted(both)} are both {first} and {second}")
        if self.keep_columns and self.drop_columns:
            raise ValueError("use keep_columns or drop_columns, not both")
        if self.envelope == "dms" and self.format not in ("csv", "parquet"):
            raise ValueError('envelope = "dms" reads csv or parquet files')
        if self.truncate_codes and not self.op_column:
            raise ValueError("truncate_codes need an op_column")
        if self.columns and self.header:
            raise ValueError("'columns' names headerless columns; it cannot be combined with header = true")
        return self


class TableConfig(_Model):
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
        feed: where the changes come from.
        more_feeds: further feeds of the same table (seed 001: regional systems feeding one table),
            each with its own format settings. Files arriving together are applied in one batch,
            ordered feed by feed (``feed`` first), then by each feed's file order. In TOML, list
            them all as ``[[tables.NAME.feeds]]`` instead of one ``[tables.NAME.feed]``.
        ignore_null_updates: partial updates (PRODUCT.md §Semantics 3): a null in an upsert means
            "unchanged". ``true`` for every column but key and sequence, or a list of columns.
        widen_date_to_timestamp: accept a DATE feed column into a TIMESTAMP table column.
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
            (SCD type 2, PRODUCT.md §Semantics 6) with ``__start_at``, ``__end_at`` (null while
            current) and ``__current``.
        track_columns: with ``scd2``, the columns whose changes open a new version (default: all
            but key and sequence); changes to other columns update the version they fall in.
        tombstones: remember deleted keys with the delete's sequence, so that a late update older
            than the delete cannot bring the record back (PRODUCT.md §Semantics 1).
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
    feed: FeedConfig
    more_feeds: tuple[FeedConfig, ...] = ()
    ignore_null_updates: bool | tuple[str, ...] = False
    widen_date_to_timestamp: bool = False
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
        if self.feed.op_column and self.feed.op_column in (*self.key, *self.sequence, *self.partition_by):
            raise ValueError(f"op_column '{self.feed.op_column}' cannot also be a key, sequence or partition column")
        kept = [*self.key, *self.sequence, *self.partition_by]
        dropped = [
            c
            for c in kept
            if c in self.feed.drop_columns or (self.feed.keep_columns and c not in self.feed.keep_columns)
        ]
        if dropped:
            raise ValueError(f"key, sequence and partition columns cannot be dropped: {dropped}")
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
            raise ValueError("history = 'scd2' needs a single sequence column (it becomes __start_at / __end_at)")
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

    @property
    def feeds(self) -> tuple[FeedConfig, ...]:
        """Every feed of the table, the first one first."""
        return (self.feed, *self.more_feeds)

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
    def sequence_columns(self) -> tuple[str, ...]:
        """The columns stored in the table that order versions of a record."""
        return self.sequence or (FILE_SEQUENCE_COLUMN,)


class GroupConfig(_Model):
    """Tables applied together (seed 003): each run applies one batch to every table of the group,
    then records the group's point, ``{table: version}``, in one commit to a small Delta table at
    ``state``. Readers time-travel each table to the last recorded point to see all of them at once.

    Attributes:
        tables: the group's tables, applied in this order.
        state: where the group's points are recorded (a Delta table).
    """

    tables: tuple[str, ...]
    state: str

    @field_validator("tables")
    @classmethod
    def _some_tables(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("a group needs at least one table")
        return value

    @field_validator("state")
    @classmethod
    def _absolute_state(cls, value: str) -> str:
        return absolute(value)


class PipelineConfig(_Model):
    """A whole pipeline file: Spark settings, the tables, and groups of tables applied together."""

    spark: SparkSettings = Field(default_factory=SparkSettings)
    tables: dict[str, TableConfig] = Field(default_factory=dict, validate_default=True)
    groups: dict[str, GroupConfig] = Field(default_factory=dict)
    source: str | None = None

    @model_validator(mode="after")
    def _groups_name_tables(self) -> PipelineConfig:
        owner: dict[str, str] = {}
        for group, config in self.groups.items():
            for name in config.tables:
                if name not in self.tables:
                    raise ValueError(f"group '{group}' names table '{name}', which the pipeline does not define")
                if name in owner:
                    raise ValueError(f"table '{name}' is in both groups '{owner[name]}' and '{group}'")
                owner[name] = group
        return self

    def group_of(self, table: str) -> str | None:
        """The group a table belongs to, if any."""
        return next((g for g, c in self.groups.items() if table in c.tables), None)

    @model_validator(mode="before")
    @classmethod
    def _name_tables(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("tables"), dict):
            tables = {}
            for name, table in data["tables"].items():
                if isinstance(table, dict):
                    table = {"name": name, **table}
                tables[name] = table
            data = {**data, "tables": tables}
        return data

    @model_validator(mode="after")
    def _catalog_names(self) -> PipelineConfig:
        if self.spark.catalog != "hive":
            return self
        named = {
            name: t if t.catalog_name else t.model_copy(update={"catalog_name": f"{self.spark.database}.{name}"})
            for name, t in self.tables.items()
        }
        return self.model_copy(update={"tables": named})

    @field_validator("tables")
    @classmethod
    def _some_table(cls, value: dict[str, TableConfig]) -> dict[str, TableConfig]:
        if not value:
            raise ValueError("the pipeline defines no table: add a [tables.NAME] section")
        for name in value:
            if not _IDENTIFIER.match(name):
                raise ValueError(f"table name {name!r} must be letters, digits and underscores")
        return value

    def table(self, name: str) -> TableConfig:
        """Return the table called ``name``, or raise a ConfigError listing the known ones."""
        from lakemerge.errors import ConfigError

        try:
            return self.tables[name]
        except KeyError:
            raise ConfigError(
                f"no table named '{name}'; the pipeline has: {', '.join(sorted(self.tables))}",
                key="tables",
                source=self.source,
            ) from None
