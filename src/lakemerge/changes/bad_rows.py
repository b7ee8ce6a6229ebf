"""Bad change records: the error naming the first one's file and row (a batch over its quarantine
threshold fails with it), and the quarantine's rows (a batch within it keeps them, with reason, raw
record, file and row: docs/semantics.md §9)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.changes.normalize import ChangeSet
from lakemerge.columns import col
from lakemerge.errors import InputError
from lakemerge.feeds.files import FeedFile

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def first_bad_row(
    changes: ChangeSet, files: Sequence[FeedFile], bad_count: int, *, threshold: bool = False
) -> InputError:
    """Build the error for a batch holding ``bad_count`` bad rows, naming the first one's file and
    row. Two small actions; only called when the batch is already known to be bad."""
    from pyspark.sql import functions as F

    frame = changes.frame
    placed = C.PLACE in frame.columns  # (records given as a DataFrame: the row id is their position)
    first = (
        frame.filter(F.col(C.ERROR).isNotNull())
        .orderBy(C.FILE, C.BLOCK, C.ROW_ID)
        .select(C.FILE, C.BLOCK, C.ROW_ID, C.RAW, C.ERROR, C.HEADER, C.PLACE if placed else F.lit(None))
        .limit(1)
        .collect()[0]
    )
    file_index, block, row_id, raw, reason, header, place = first
    if placed:
        row = int(row_id)
    else:
        before = frame.filter(
            (F.col(C.FILE) == file_index)
            & ((F.col(C.BLOCK) < block) | ((F.col(C.BLOCK) == block) & (F.col(C.ROW_ID) < row_id)))
        ).count()
        row = before + 1 + int(header)
    message = str(reason)
    if raw is not None:
        shown = raw if len(raw) <= 120 else raw[:117] + "..."
        message += f" (record: {shown!r})"
    if bad_count > 1:
        message += f"; {bad_count - 1} more bad row{'s' if bad_count > 2 else ''} in the batch"
    if threshold:
        message += "; more bad rows than the quarantine threshold allows"
    message += "; nothing was applied"
    if placed:  # (the place names its row id: "..., partition 3, offset" and the offset)
        return InputError(message, path=f"{place} {row}")
    return InputError(message, path=files[int(file_index)].path, row=row)


def quarantine_rows(
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
    record = F.coalesce(F.col(C.RAW), F.to_json(F.struct(*[col(c) for c in data_columns if c in frame.columns])))
    if C.PLACE in frame.columns:  # (records given as a DataFrame: where they came from, their position there)
        frame = frame.withColumn("_lm_line", F.col(C.ROW_ID)).withColumn("_lm_where", F.col(C.PLACE))
    else:
        frame = frame.withColumn("_lm_line", F.row_number().over(in_file) + F.col(C.HEADER))
        frame = frame.withColumn("_lm_where", paths[F.col(C.FILE)])
    return frame.filter(F.col(C.ERROR).isNotNull()).select(
        F.lit(batch_id).alias("batch_id"),
        F.lit(table).alias("table"),
        F.col("_lm_where").alias("file"),
        F.col("_lm_line").cast("long").alias("row"),
        F.col(C.ERROR).alias("reason"),
        record.alias("record"),
    )
