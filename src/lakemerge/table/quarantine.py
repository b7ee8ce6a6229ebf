"""The quarantine: bad records kept with their reason, never dropped (docs/semantics.md §9 Bad records and quarantine).

Bad rows of a batch within the table's threshold are appended, before the batch's own commit, to a
Delta table beside it (``<table path>__quarantine`` unless configured), each with the batch id,
reason, raw record, source file and row number. A crash between the two commits leaves rows of a
batch that never committed; listing shows only rows of committed batches, so a rerun never shows
a bad row twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakemerge.results import QuarantinedRow
from lakemerge.table.ledger import history_rows, parse_record
from lakemerge.table.snapshots import is_delta

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def write_bad_rows(rows: DataFrame, path: str) -> None:
    """Append quarantined rows to the quarantine table at ``path``."""
    rows.coalesce(1).write.format("delta").mode("append").save(path)


def list_quarantine(
    spark: SparkSession, *, table_path: str, quarantine_path: str, limit: int | None = 100
) -> list[QuarantinedRow]:
    """Quarantined rows of the table's committed batches, newest batch first, then by file and row."""
    from pyspark.sql import functions as F

    if not is_delta(spark, quarantine_path):
        return []
    committed = []
    order = {}
    # A log table's batches commit to its change log (docs/semantics.md §14); its table's own
    # commits are compactions. Batches are ordered by their number.
    log = f"{table_path.rstrip('/')}__log"
    for path in [table_path, *([log] if is_delta(spark, log) else [])]:
        if not is_delta(spark, path):
            continue
        for row in history_rows(spark, path):
            record = parse_record(row["userMetadata"])
            if record and record.get("batch_id"):
                order[record["batch_id"]] = int(record.get("txn_version") or row["version"])
                committed.append(record["batch_id"])
    if not committed:
        return []
    frame = spark.read.format("delta").load(quarantine_path).filter(F.col("batch_id").isin(committed))
    version = F.create_map(*[x for b, v in order.items() for x in (F.lit(b), F.lit(v))])
    frame = frame.orderBy(version[F.col("batch_id")].desc(), "file", "row")
    if limit is not None:
        frame = frame.limit(limit)
    return [QuarantinedRow(**r.asDict()) for r in frame.collect()]
