"""Read-only views of a table: its history with lakemerge's records, a summary, and what a commit
changed. Only metadata, counts and small bounded samples reach the driver."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lakemerge.columns import col
from lakemerge.config import TableConfig
from lakemerge.errors import TableError
from lakemerge.results import AppliedFile, ChangedRecord, CommitInfo, SchemaChange, TableSummary
from lakemerge.table.ledger import history_rows, parse_record
from lakemerge.table.snapshots import is_delta, latest_snapshot
from lakemerge.table.store import sql_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def require_table(spark: SparkSession, path: str) -> None:
    """Raise a TableError unless ``path`` holds a Delta table."""
    if not is_delta(spark, path):
        raise TableError(f"{path}: no Delta table here")


def change_log(spark: SparkSession, path: str) -> str | None:
    """The change log beside the table at ``path`` (a ``log`` table's ``PATH__log``), if there is one."""
    log = f"{path.rstrip('/')}__log"
    return log if is_delta(spark, log) else None


def history(spark: SparkSession, path: str, *, limit: int | None = None) -> list[CommitInfo]:
    """Commits of the table at ``path``, newest first, with lakemerge's batch records; for a ``log``
    table, its change log's commits too (its batches, ``change_log`` set), by commit time."""
    require_table(spark, path)
    commits = _commits(spark, path, limit)
    log = change_log(spark, path)
    if log is not None:
        logged = [replace(c, change_log=True) for c in _commits(spark, log, limit)]
        commits = sorted([*commits, *logged], key=lambda c: (c.timestamp, c.change_log), reverse=True)
        commits = commits[:limit] if limit else commits
    return commits


def _commits(spark: SparkSession, path: str, limit: int | None) -> list[CommitInfo]:
    commits = []
    for row in history_rows(spark, path, limit):
        record = parse_record(row["userMetadata"]) or {}
        committed_ms = int(row["ts_ms"])
        started = record.get("started_at")
        commits.append(
            CommitInfo(
                version=int(row["version"]),
                timestamp=datetime.fromtimestamp(committed_ms / 1000, tz=UTC).isoformat(),
                operation=str(row["operation"]),
                batch_id=record.get("batch_id"),
                table=record.get("table"),
                seconds=round(max(0, committed_ms - int(started)) / 1000, 3) if started else None,
                metrics={k: int(v) for k, v in (record.get("metrics") or {}).items()},
                files=tuple(AppliedFile(**f) for f in record.get("files", [])),
                operation_metrics=dict(row["operationMetrics"] or {}),
                source=(record.get("source") or {}).get("name"),
                source_batch=(record.get("source") or {}).get("batch"),
                source_offsets=(record.get("source") or {}).get("offsets") or {},
                skip_reason=(record.get("skipped") or {}).get("reason"),
                skipped_by=(record.get("skipped") or {}).get("by"),
                schema_changes=tuple(SchemaChange(**c) for c in record.get("schema_changes") or ()),
            )
        )
    return commits


def show(spark: SparkSession, path: str, *, sample: int = 10) -> TableSummary:
    """Schema, row count, file count and size, and up to ``sample`` rows of the latest version."""
    require_table(spark, path)
    described = spark.sql(f"DESCRIBE DETAIL {sql_path(path)}")
    detail = described.select("numFiles", "sizeInBytes", "partitionColumns").collect()[0]
    version = latest_snapshot(spark, path).version
    frame = spark.read.format("delta").load(path)
    rows = frame.count()
    log = change_log(spark, path)
    return TableSummary(
        log_rows=spark.read.format("delta").load(log).count() if log is not None else None,
        path=path,
        version=version,
        schema=tuple((f.name, f.dataType.simpleString()) for f in frame.schema.fields),
        partition_by=tuple(detail["partitionColumns"] or ()),
        rows=rows,
        files=int(detail["numFiles"] or 0),
        bytes=int(detail["sizeInBytes"] or 0),
        sample=tuple(_plain(r.asDict(recursive=True)) for r in frame.limit(sample).collect()),
    )


def changed_records(
    spark: SparkSession, path: str, version: int, *, key: Sequence[str], limit: int = 20
) -> list[ChangedRecord]:
    """Up to ``limit`` rows that differ between ``version - 1`` and ``version``, before and after,
    ordered by key; ``None`` stands for an absent row (insert or delete)."""
    from pyspark.sql import functions as F

    after = spark.read.format("delta").option("versionAsOf", version).load(path)
    if version == 0:
        before = spark.createDataFrame([], after.schema)
    else:
        before = spark.read.format("delta").option("versionAsOf", version - 1).load(path)
    cols = [c for c in after.columns if c in before.columns]
    b = before.select(
        *[col(c).alias(f"b_{i}") for i, c in enumerate(before.columns)],
        F.hash(*[col(c) for c in cols]).alias("b_hash"),
    )
    a = after.select(
        *[col(c).alias(f"a_{i}") for i, c in enumerate(after.columns)],
        F.hash(*[col(c) for c in cols]).alias("a_hash"),
    )
    bk = [f"b_{before.columns.index(k)}" for k in key]
    ak = [f"a_{after.columns.index(k)}" for k in key]
    cond = None
    for x, y in zip(bk, ak, strict=True):
        part = F.col(x).eqNullSafe(F.col(y))
        cond = part if cond is None else cond & part
    joined = b.join(a, on=cond, how="full_outer").filter(
        F.col("b_hash").isNull() | F.col("a_hash").isNull() | (F.col("b_hash") != F.col("a_hash"))
    )
    order = [F.coalesce(F.col(x), F.col(y)) for x, y in zip(bk, ak, strict=True)]
    pairs = []
    for row in joined.orderBy(*order).limit(limit).collect():
        old = None if row["b_hash"] is None else {c: row[f"b_{i}"] for i, c in enumerate(before.columns)}
        new = None if row["a_hash"] is None else {c: row[f"a_{i}"] for i, c in enumerate(after.columns)}
        pairs.append(ChangedRecord(before=_plain(old) if old else None, after=_plain(new) if new else None))
    return pairs


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """Make values JSON-friendly (dates and decimals as strings)."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        out[k] = v if v is None or isinstance(v, (bool, int, float, str, list, dict)) else str(v)
    return out


def read_current(spark: SparkSession, table: TableConfig) -> DataFrame:
    """The table's current rows (see :func:`lakemerge.api.read_current`)."""
    from lakemerge.table.logview import read_merged
    from lakemerge.write.scd2 import current

    if table.log_mode:
        merged = read_merged(spark, table)
        if merged is None:
            raise TableError(f"table '{table.name}' has neither a Delta table nor a change log at {table.path}")
        return merged
    frame = spark.read.format("delta").load(table.path)
    return current(frame) if table.scd2 else frame
