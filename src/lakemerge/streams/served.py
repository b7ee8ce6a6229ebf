"""Streams whose micro-batches are applied in the Spark Connect server's Python, not in this process.

A Spark Connect client's ``foreachBatch`` function is pickled and run by a Python worker of the
server, itself a Connect client of the server: lakemerge must be installed in the server's Python.
The function (:class:`ServedBatch`) holds only the flow's micro-batch step; what it commits comes
back to this process through the tables' own commit records, read after each micro-batch
(:func:`committed`), and what it raises through the query's failure, where a lakemerge error is
found again by the line the step writes for it (:func:`served_error`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakemerge import errors
from lakemerge.batch.counts import written
from lakemerge.errors import LakemergeError
from lakemerge.results import AppliedFile, BatchMetrics, BatchResult
from lakemerge.table import ledger
from lakemerge.table.snapshots import is_delta, latest_snapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakemerge.config import TableConfig

#: Starts the line that carries a lakemerge error out of the server's Python worker.
MARK = "lakemerge-error:"

#: Commits read beyond those known to be new (commits landing during the read).
_SLACK = 4


@dataclass(frozen=True)
class ServedBatch:
    """A stream's step for each micro-batch, as the server's Python runs it: lakemerge's errors
    leave as one line holding their kind, exit code and message."""

    apply: Callable[[DataFrame, int], object]

    def __call__(self, frame: DataFrame, epoch: int) -> None:
        try:
            self.apply(frame, epoch)
        except LakemergeError as exc:
            carried = {"kind": type(exc).__name__, "exit_code": exc.exit_code, "message": str(exc)}
            raise RuntimeError(MARK + json.dumps(carried)) from None


def served_error(failure: BaseException | str) -> LakemergeError | None:
    """The lakemerge error a served micro-batch raised, from the query's failure; ``None`` when the
    failure holds none (a failure of Spark's own, or of a server whose Python lacks lakemerge)."""
    text = str(failure)
    at = text.rfind(MARK)
    if at < 0:
        return None
    try:
        carried = json.JSONDecoder().raw_decode(text[at + len(MARK) :])[0]
        kind, code, message = str(carried["kind"]), int(carried["exit_code"]), str(carried["message"])
    except (ValueError, KeyError, TypeError):
        return None
    found = getattr(errors, kind, None)
    chosen = found if isinstance(found, type) and issubclass(found, LakemergeError) else LakemergeError
    error = chosen.__new__(chosen)
    LakemergeError.__init__(error, message)  # (the message as the server's error says it, whole)
    error.exit_code = code
    return error


def worker_error(failure: BaseException | str) -> str | None:
    """The exception line of the Python traceback a query's failure holds (a micro-batch that failed
    in the server's Python worker), else ``None``."""
    text = str(failure)
    if "Traceback (most recent call last)" not in text:
        return None
    lines = text.split("Traceback (most recent call last)")[-1].splitlines()
    found = [line.strip() for line in lines if line.strip() and not line.startswith((" ", "\t"))]
    return found[-1][:600] if found else None


def missing_lakemerge(failure: BaseException | str) -> bool:
    """Whether the query failed because the server's Python cannot import lakemerge."""
    text = str(failure)
    return "No module named 'lakemerge" in text


def committed(
    spark: SparkSession, tables: Iterable[TableConfig], source: str | None, seen: dict[str, int]
) -> list[BatchResult]:
    """The batches a stream committed to ``tables`` since the versions ``seen`` (by path; updated),
    oldest first: each table's (or change log's) commits whose records name ``source`` as theirs,
    or (``source`` ``None``: a stream of files) that applied files."""
    found = []
    for table in tables:
        path = table.log_table if table.log_mode else table.path
        if not is_delta(spark, path):
            continue
        after = seen.get(path, -1)
        latest = latest_snapshot(spark, path).version
        if latest <= after:
            continue
        newest = ledger.history_rows(spark, path, limit=latest - after + _SLACK)
        for row in sorted(newest, key=lambda r: int(r["version"])):
            if int(row["version"]) <= after:
                continue
            seen[path] = int(row["version"])
            record = ledger.parse_record(row["userMetadata"]) or {}
            origin = record.get("source") or {}
            mine = origin.get("name") == source if source is not None else not origin and bool(record.get("files"))
            if record.get("batch_id") and mine:
                found.append(_result(table, record, row))
    return found


def versions(spark: SparkSession, tables: Iterable[TableConfig]) -> dict[str, int]:
    """The latest version of each table's (or change log's) path now (-1: none yet)."""
    paths = [t.log_table if t.log_mode else t.path for t in tables]
    return {path: latest_snapshot(spark, path).version for path in paths}


def _result(table: TableConfig, record: dict[str, Any], row: Any) -> BatchResult:
    """A batch's result as its commit records it."""
    metrics = {k: int(v) for k, v in (record.get("metrics") or {}).items() if k in BatchMetrics.__dataclass_fields__}
    started = record.get("started_at")
    seconds = round(max(0, int(row["ts_ms"]) - int(started)) / 1000, 3) if started else 0.0
    figures = written(dict(row["operationMetrics"] or {}))
    return BatchResult(
        table=table.name,
        path=table.path,
        batch_id=str(record.get("batch_id")),
        version=int(row["version"]),
        created=int(row["version"]) == 0,
        files=tuple(AppliedFile(**f) for f in record.get("files", [])),
        skipped_files=(),
        metrics=BatchMetrics(**metrics),
        seconds=seconds,
        source=(record.get("source") or {}).get("name"),
        source_batch=(record.get("source") or {}).get("batch"),
        source_offsets=(record.get("source") or {}).get("offsets") or {},
        files_added=figures["files_added"],
        files_removed=figures["files_removed"],
        bytes_added=figures["bytes_added"],
        bytes_removed=figures["bytes_removed"],
        files_touched=figures["files_removed"],
    )
