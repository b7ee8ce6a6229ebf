"""Where a table's change records come from and how to read them: a ``feed`` section."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from lakemerge.config.base import Model, absolute

FeedFormat = Literal["csv", "text", "json", "parquet", "orc", "avro", "debezium"]
Envelope = Literal["none", "dms"]
Container = Literal["json", "avro", "parquet"]
DecimalHandling = Literal["precise", "double", "string"]
TimePrecision = Literal["adaptive", "adaptive_time_microseconds", "connect", "isostring", "microseconds", "nanoseconds"]
BinaryHandling = Literal["bytes", "base64", "base64-url-safe", "hex"]

#: Op codes a Debezium feed gives the events that change no row: a tombstone (a null value after a
#: delete), a heartbeat, a schema change, a transaction's BEGIN or END, and a logical decoding
#: message (op ``m``). They are always ignored records (docs/semantics.md §10 Operation codes).
DEBEZIUM_NON_CHANGES = ("tombstone", "heartbeat", "schema_change", "transaction", "m")


class DebeziumSettings(Model):
    """How the Debezium connector that wrote a ``format = "debezium"`` feed encodes values: its
    settings of the same names (``decimal.handling.mode``, ``time.precision.mode``,
    ``binary.handling.mode``). They matter for events without their schema (the JSON converter
    with ``schemas.enable=false``), read by the feed's declared ``types``; an event's own schema
    says how its values are encoded, except the text of bytes in a column declared ``binary``.

    Attributes:
        decimal_handling_mode: ``precise`` (the default: a column declared ``decimal(p,s)`` holds
            base64 text of the unscaled value's bytes), ``double`` or ``string``.
        time_precision_mode: how integers in columns declared ``timestamp`` or ``timestamp_ntz``
            count time: ``connect`` in milliseconds, ``microseconds``, ``nanoseconds``, and
            ``adaptive`` / ``adaptive_time_microseconds`` by the column's fractional digits (see
            ``fractional_digits``); ``isostring`` writes ISO-8601 text.
        binary_handling_mode: how a column declared ``binary`` is written: ``bytes`` and
            ``base64`` as base64 text, ``base64-url-safe``, or ``hex``.
        fractional_digits: the fractional-second precision of timestamp columns in the source
            database (``{ created_at = 6 }``), which ``adaptive`` modes need: up to 3 digits
            Debezium writes milliseconds, 4 to 6 microseconds.
    """

    decimal_handling_mode: DecimalHandling = "precise"
    time_precision_mode: TimePrecision = "adaptive"
    binary_handling_mode: BinaryHandling = "bytes"
    fractional_digits: dict[str, int] = Field(default_factory=dict)

    @field_validator("fractional_digits")
    @classmethod
    def _digits(cls, value: dict[str, int]) -> dict[str, int]:
        bad = sorted(name for name, digits in value.items() if not 0 <= digits <= 9)
        if bad:
            raise ValueError(f"fractional digits are 0 to 9; wrong for {bad}")
        return value


class DmsSettings(Model):
    """The AWS DMS S3 target endpoint's settings that shape its files (``envelope = "dms"``), under
    their DMS names in snake case.

    Attributes:
        include_op_for_full_load: ``IncludeOpForFullLoad``: full-load files start with the ``Op``
            column too (``I``).
        cdc_inserts_only / cdc_inserts_and_updates: ``CdcInsertsOnly`` / ``CdcInsertsAndUpdates``:
            change files hold inserts only (or inserts and updates), and CSV change files carry the
            ``Op`` column only with ``IncludeOpForFullLoad``. Parquet files name their columns, so
            there the ``Op`` column is found by name.
        timestamp_column_name: ``TimestampColumnName``: the column DMS adds with each row's time
            (a full load's transfer time, a change's commit time), read as a timestamp. Name it in
            ``schema`` where DMS writes it (CSV files without a header).
        preserve_transactions: ``PreserveTransactions``: change files in transaction order for
            every table (``CDC_TXN-…`` under ``CdcPath``); not read by lakemerge, which reads
            DMS's per-table change files.
    """

    include_op_for_full_load: bool = False
    cdc_inserts_only: bool = False
    cdc_inserts_and_updates: bool = False
    timestamp_column_name: str | None = None
    preserve_transactions: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> DmsSettings:
        if self.cdc_inserts_only and self.cdc_inserts_and_updates:
            raise ValueError("DMS sets CdcInsertsOnly or CdcInsertsAndUpdates, not both")
        if self.preserve_transactions:
            raise ValueError(
                "PreserveTransactions writes every table's changes into CDC_TXN-… files under CdcPath, "
                "which lakemerge does not read: point the feed at the table's folder of LOAD and change "
                "files written without PreserveTransactions"
            )
        return self

    @property
    def load_op(self) -> bool:
        """Whether CSV full-load files carry the ``Op`` column."""
        return self.include_op_for_full_load

    @property
    def changes_op(self) -> bool:
        """Whether CSV change files carry the ``Op`` column."""
        return self.include_op_for_full_load or not (self.cdc_inserts_only or self.cdc_inserts_and_updates)


FileOrder = Literal["name", "name_number", "mtime"]
SnapshotOrder = Literal["name_number", "mtime", "column"]
SnapshotScope = Literal["table", "partitions"]
ArchiveConflict = Literal["suffix", "fail"]


class FeedConfig(Model):
    """Where a table's change records come from and how to read them.

    Attributes:
        location: files or directories (local paths or Hadoop URIs) holding change files.
        format: ``csv`` (quoted, single-character delimiter), ``text`` (lines split by a regular
            expression, as chombo does), ``json`` (JSON lines), ``parquet``, ``orc``, ``avro``, or
            ``debezium`` (Debezium change events, with or without their schema, in ``container``).
        container: with ``format = "debezium"``, the files holding the events: ``json`` (JSON
            lines, as Kafka Connect's JSON converter writes them), ``avro`` or ``parquet`` (as
            Kafka Connect's S3 and HDFS sinks write them with the Avro converter).
        debezium: the connector's encoding settings (:class:`DebeziumSettings`).
        dms: the DMS endpoint's settings (:class:`DmsSettings`), with ``envelope = "dms"``.
        header: whether delimited files start with a header line naming the columns.
        delimiter: the field delimiter of ``csv`` files.
        quote / escape: the quote character of ``csv`` files and the one escaping it inside
            quotes (``"`` twice by default, as RFC 4180 writes it).
        multiline: ``csv`` records may span lines (quoted newlines); such files are not split.
        encoding: the character set of ``csv`` and ``json`` files (gzip and bzip2 compression is
            recognised by the file extension for every text format).
        envelope: ``dms`` reads AWS DMS output (``csv`` or ``parquet``): the ``Op`` column
            (I/U/D) first in change files, and full-load files (named ``LOAD…``) as inserts that
            precede every change of the table (docs/semantics.md §10 Operation codes).
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
            the truncate record is removed (docs/semantics.md §4 Truncate).
        op_codes_ignore_case: compare op codes ignoring case.
        delete_file_prefix: every row of a file whose name starts with this prefix is a delete.
        file_order: how files are ordered: by ``name`` (full path), by the number after the last
            ``_`` in the name (``name_number``, chombo's convention), or by modification time
            (``mtime``); ties by path.
        null_value: the string read as null in delimited files.
        archive: a directory where ``lakemerge run`` moves files once their batch is committed.
        archive_conflict: what an applied file whose archive name is taken already gets: ``suffix``
            (the first free ``.1``, ``.2``, ...: both kept) or ``fail`` (nothing of the batch is
            moved, and the run stops naming the file and the entry in its way).
        keep_columns / drop_columns: keep only the listed feed columns, or all but the listed ones
            (e.g. CDC metadata). Key, sequence and partition columns are always kept.
        snapshot: every file is (part of) a full snapshot of the table (docs/semantics.md §5 Full snapshots):
            keys it lacks are deleted, as of the snapshot's greatest sequence, and rows it repeats
            unchanged are not rewritten. A batch applies at most one snapshot of the feed.
        snapshot_order: what orders snapshots: the number after the last ``_`` of the file name
            (files sharing the number form one snapshot), the file's modification time, or the
            greatest value of ``snapshot_column`` in the file. A snapshot older than the last one
            applied is an error.
        snapshot_scope: ``table``: the snapshot covers the whole table; ``partitions``: it covers
            only the table partitions its rows fall in (one snapshot per partition, as Gobblin's compaction takes them).
        snapshot_column: with ``snapshot_order = "column"``, the column whose greatest value in a
            file orders that file's snapshot.
    """

    location: tuple[str, ...]
    format: FeedFormat = "csv"
    container: Container = "json"
    debezium: DebeziumSettings = Field(default_factory=DebeziumSettings)
    dms: DmsSettings = Field(default_factory=DmsSettings)
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
    archive_conflict: ArchiveConflict = "suffix"
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

    @property
    def declared_columns(self) -> tuple[str, ...] | None:
        """The feed's columns as its configuration names them (``schema``, else ``columns``), when
        they are known before a file is read: plain formats only (a change-feed envelope adds its
        own columns); ``None`` otherwise."""
        if self.format == "debezium" or self.envelope != "none":
            return None
        if self.schema_ddl:
            return ddl_names(self.schema_ddl)
        return self.columns or None

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
            defaults = {"op_column": "__op", "upsert_codes": ("c", "u", "r"), "delete_codes": ("d",)}
            given = data.get("ignore_codes") or ()
            given = (given,) if isinstance(given, str) else tuple(given)
            data = {**data, "ignore_codes": (*given, *[c for c in DEBEZIUM_NON_CHANGES if c not in given])}
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
        if self.container != "json" and self.format != "debezium":
            raise ValueError('container is the files of format = "debezium" (json, avro or parquet)')
        if self.truncate_codes and not self.op_column:
            raise ValueError("truncate_codes need an op_column")
        if self.columns and self.header:
            raise ValueError("'columns' names headerless columns; it cannot be combined with header = true")
        return self


def ddl_names(ddl: str) -> tuple[str, ...]:
    """The column names of a Spark DDL schema (``id INT, `first name` STRING, m MAP<STRING, INT>``),
    read without Spark: a name in backticks (a doubled backtick inside it), else the first word."""
    names: list[str] = []
    depth, quote, start = 0, "", 0
    parts: list[str] = []
    for i, ch in enumerate(ddl):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "`'\"":
            quote = ch
        elif ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(ddl[start:i])
            start = i + 1
    parts.append(ddl[start:])
    for part in (p.strip() for p in parts):
        if not part:
            continue
        if part.startswith("`"):
            name, i = "", 1
            while i < len(part):
                if part[i] == "`":
                    if part[i + 1 : i + 2] == "`":
                        name, i = name + "`", i + 2
                        continue
                    break
                name, i = name + part[i], i + 1
            names.append(name)
        else:
            names.append(re.split(r"[\s:]", part, maxsplit=1)[0])
    return tuple(names)
