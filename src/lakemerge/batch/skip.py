"""``lakemerge skip``: an operator records files as skipped, so that a file no batch can apply (a
header that cannot be used, a file that cannot be read) stops blocking the files after it.

The record is a batch's record that applies nothing: a commit on the table (in ``log`` mode, on its
change log) under the next batch number, listing the files with the operator's reason, so that the
ledger treats them as applied and ``lakemerge history`` and the report show why
(docs/semantics.md §8 Atomicity and exactly once). A table that does not exist yet is created empty
with the columns its feeds declare, to hold the record.
"""

from __future__ import annotations

import getpass
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from lakemerge.config import TableConfig
from lakemerge.config.table import CURRENT, END_AT, FILE_SEQUENCE_COLUMN, START_AT
from lakemerge.errors import ConfigError, ConflictError, InputError
from lakemerge.feeds import FeedFile
from lakemerge.feeds.files import list_feed_entries, qualified
from lakemerge.results import AppliedFile, BatchMetrics, SkipResult
from lakemerge.spark import localfs
from lakemerge.table import ledger, store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

#: How often a skip is recorded again when a concurrent writer took its batch number.
ATTEMPTS = 5


def skip_files(spark: SparkSession, table: TableConfig, files: Sequence[str], *, reason: str) -> SkipResult:
    """Record ``files`` (pending files of ``table``'s feeds) as skipped by an operator for ``reason``.

    Raises:
        ConfigError: no reason, no file, or a file that is not one of the table's feeds'.
        InputError: a file was already applied (or skipped), or changed since.
        TableError: the table does not exist yet and its feeds declare no columns.
    """
    if not reason.strip():
        raise ConfigError("give the reason the files are skipped (--reason TEXT): it is kept in the ledger")
    if not files:
        raise ConfigError("give the files to skip")
    chosen = _pending(spark, table, files)
    with localfs.writing(spark, localfs.tables_of(table)):
        for _ in range(ATTEMPTS):
            log_path = table.log_table if table.log_mode else None
            exists, history = ledger.state(spark, table.path, log_path=log_path)
            for f in chosen:
                if ledger.check_unchanged(history.files, f.path, f.size, f.modified):
                    version = history.files[f.path][1]
                    raise InputError(f"file was already applied (or skipped) in version {version}", path=f.path)
            number = ledger.last_batch(spark, table.path, log_path=log_path, known=history) + 1
            record = _record(table, chosen, number, reason)
            target = _write(spark, table, record, number, exists=exists)
            found = ledger.find_commit(spark, target, record["batch_id"])
            if found is not None:
                applied = tuple(AppliedFile(**item) for item in record["files"])
                return SkipResult(table.name, table.path, found[0], applied, reason, record["skipped"]["by"])
    raise ConflictError(
        f"{table.path}: concurrent writers took the batch number {ATTEMPTS} times; nothing was recorded"
    )


def _pending(spark: SparkSession, table: TableConfig, files: Sequence[str]) -> list[FeedFile]:
    """The listed files of ``table``'s feeds that ``files`` name (any spelling of their paths)."""
    listed: dict[str, FeedFile] = {}
    unread: dict[str, str] = {}
    for feed in table.feeds:
        found, ignored = list_feed_entries(spark, feed.location, file_order="name")
        listed.update((f.path, f) for f in found)
        unread.update(ignored)
    chosen = []
    for name in files:
        path = qualified(spark, name)
        if path in unread:
            raise ConfigError(f"{name}: lakemerge does not read this entry ({unread[path]}); nothing to skip")
        if path not in listed:
            where = ", ".join(loc for feed in table.feeds for loc in feed.location)
            raise ConfigError(f"{name}: not a file of the feeds of table '{table.name}' ({where})")
        chosen.append(listed[path])
    return chosen


def _record(table: TableConfig, files: Sequence[FeedFile], number: int, reason: str) -> dict[str, Any]:
    try:
        user = getpass.getuser()
    except Exception:  # (no user name in some containers)
        user = "unknown"
    return {
        "batch_id": uuid.uuid4().hex,
        "table": table.name,
        "started_at": int(time.time() * 1000),
        "txn_version": number,
        "metrics": asdict(BatchMetrics()),
        "files": [asdict(AppliedFile(path=f.path, size=f.size, modified=f.modified)) for f in files],
        "skipped": {"reason": reason, "by": user},
    }


def _write(spark: SparkSession, table: TableConfig, record: dict[str, Any], number: int, *, exists: bool) -> str:
    """Commit ``record`` (on the log of a ``log`` table when it has one); the path committed to."""
    target = table.path
    if table.log_mode and store.table_exists(spark, table.log_table):
        target = table.log_table
    with ledger.commit_record(spark, record, txn_version=number):
        if exists:
            store.record_only(spark, target, number)
        else:
            schema = declared_schema(spark, table)
            if schema is None:
                from lakemerge.errors import TableError

                raise TableError(
                    f"{table.path}: the table does not exist yet and its feeds declare no columns (schema or "
                    "columns), so there is no table to keep the record in: declare the feed's schema, or move "
                    "the files out of the landing zone (no record is kept then)"
                )
            store.create_table(spark.createDataFrame([], schema), table)
    return target


def declared_schema(spark: SparkSession, table: TableConfig) -> StructType | None:
    """The table's columns as its feeds declare them (``schema``, ``columns``, ``types``), as its first
    batch would create them; ``None`` when a feed declares none."""
    from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType, _parse_datatype_string

    from lakemerge.feeds.formats import ddl_schema

    fields: dict[str, Any] = {}
    for feed in table.feeds:
        names = feed.declared_columns
        if names is None:
            return None
        declared = {f.name: f.dataType for f in ddl_schema(feed.schema_ddl).fields} if feed.schema_ddl else {}
        for name in names:
            fixed = name in (*table.key, *table.sequence, *table.partition_by)
            kept = fixed or (
                name != feed.op_column
                and name not in feed.drop_columns
                and (not feed.keep_columns or name in feed.keep_columns)
            )
            if kept and name not in fields:
                typed = feed.types.get(name)
                fields[name] = _parse_datatype_string(typed) if typed else declared.get(name, StringType())
    if not table.sequence:
        fields[FILE_SEQUENCE_COLUMN] = LongType()
    if table.scd2:
        seq = fields[table.sequence_columns[0]]
        fields.update({START_AT: seq, END_AT: seq, CURRENT: BooleanType()})
    return StructType([StructField(name, kind) for name, kind in fields.items()])
