"""The quarantine: bad records kept with their reason, never dropped (PRODUCT.md §Semantics 9).

Bad rows of a batch within the table's threshold are appended, before the batch's own commit, to a
Delta table beside it (``<table path>__quarantine`` unless configured), each with the batch id,
reason, raw record, source file and row number. A crash between the two commits leaves rows of a
batch that never committed; listing shows only rows of committed batches, so a rerun never shows
a bad row twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lakemerge.feeds import columns as C
from lakemerge.feeds.files import FeedFile
from lakemerge.table.delta import history_rows, parse_record

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class QuarantinedRow:
    """One bad record."""

    batch_id: str
    table: str
    file: str
    row: int
    reason: str
    record: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return asdict(self)


def bad_rows(
    frame: DataFrame,
    *,
    files: Sequence[FeedFile],
    data_columns: Sequence[str],
    batch_id: str,
    table: str,
) -> DataFrame:
    """The bad rows of ``frame`` in quarantine form, with their 1-based row number in their file."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    paths = F.create_map(*[x for i, f in enumerate(files) for x in (F.lit(i), F.lit(f.path))])
    in_file = Window.partitionBy(C.FILE).orderBy(C.BLOCK, C.ROW_ID)
    record = F.coalesce(
        F.col(C.RAW), F.to_json(F.struct(*[F.col(f"`{c}`") for c in data_columns if c in frame.columns]))
    )
    return (
        frame.withColumn("_lm_line", F.row_number().over(in_file) + F.col(C.HEADER))
        .filter(F.col(C.ERROR).isNotNull())
        .select(
            F.lit(batch_id).alias("batch_id"),
            F.lit(table).alias("table"),
            paths[F.col(C.FILE)].alias("file"),
            F.col("_lm_line").cast("long").alias("row"),
            F.col(C.ERROR).alias("reason"),
            record.alias("record"),
        )
    )


def write_bad_rows(rows: DataFrame, path: str) -> None:
    """Append quarantined rows to the quarantine table at ``path``."""
    rows.coalesce(1).write.format("delta").mode("append").save(path)


def list_quarantine(
    spark: SparkSession, *, table_path: str, quarantine_path: str, limit: int | None = 100
) -> list[QuarantinedRow]:
    """Quarantined rows of the table's committed batches, newest batch first, then by file and row."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not DeltaTable.isDeltaTable(spark, quarantine_path):
        return []
    committed = []
    order = {}
    for row in history_rows(spark, table_path):
        record = parse_record(row["userMetadata"])
        if record and record.get("batch_id"):
            order[record["batch_id"]] = int(row["version"])
            committed.append(record["batch_id"])
    if not committed:
        return []
    frame = spark.read.format("delta").load(quarantine_path).filter(F.col("batch_id").isin(committed))
    version = F.create_map(*[x for b, v in order.items() for x in (F.lit(b), F.lit(v))])
    frame = frame.orderBy(version[F.col("batch_id")].desc(), "file", "row")
    if limit is not None:
        frame = frame.limit(limit)
    return [QuarantinedRow(**r.asDict()) for r in frame.collect()]
