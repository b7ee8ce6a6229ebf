"""Where a table's change records come from and how to read them: a ``feed`` section."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from lakemerge.config.base import Model, absolute

FeedFormat = Literal["csv", "text", "json", "parquet", "orc", "avro", "debezium"]
Envelope = Literal["none", "dms"]
FileOrder = Literal["name", "name_number", "mtime"]
SnapshotOrder = Literal["name_number", "mtime", "column"]
SnapshotScope = Literal["table", "partitions"]


class FeedConfig(Model):
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
            the truncate record is removed (docs/semantics.md §4 Truncate).
        op_codes_ignore_case: compare op codes ignoring case.
        delete_file_prefix: every row of a file whose name starts with this prefix is a delete.
        file_order: how files are ordered: by ``name`` (full path), by the number after the last
            ``_`` in the name (``name_number``, chombo's convention), or by modification time
            (``mtime``); ties by path.
        null_value: the string read as null in delimited files.
        archive: a directory where ``lakemerge run`` moves files once their batch is committed.
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
