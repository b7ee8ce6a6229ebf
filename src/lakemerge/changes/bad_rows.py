"""Bad change records: the error naming the first one's file and row (a batch over its quarantine
threshold fails with it), and the quarantine's rows (a batch within it keeps them, with reason, raw
record, file and row: docs/semantics.md §9)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakemerge import columns as C
from lakemerge.changes.normalize import ChangeSet
from lakemerge.columns import col
from lakemerge.errors import InputError
from lakemerge.feeds.files import FeedFile

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def first_bad_row(
    changes: ChangeSet, files: Sequence[FeedFile], bad_count: int, *, threshold: bool = False
) -> InputError:
    """Build the error for a batch holding ``bad_count`` bad rows, naming the first one's file and
    row. Two small actions; only called when the batch is already known to be bad."""
    from pyspark.sql import functions as F

    found = first_row(changes.frame, F.col(C.ERROR).isNotNull(), files, C.RAW, C.ERROR)
    assert found is not None
    (raw, reason), path, row = found
    message = str(reason)
    if raw is not None:
        shown = raw if len(raw) <= 120 else raw[:117] + "..."
        message += f" (record: {shown!r})"
    if bad_count > 1:
        message += f"; {bad_count - 1} more bad row{'s' if bad_count > 2 else ''} in the batch"
    if threshold:
        message += "; more bad rows than the quarantine threshold allows"
    message += "; nothing was applied"
    return InputError(message, path=path, row=row)


def first_row(
    frame: DataFrame, condition: Column, files: Sequence[FeedFile], *columns: str
) -> tuple[tuple[Any, ...], str, int | None] | None:
    """The first row of ``frame`` (in file and row order) meeting ``condition``: its ``columns``,
    and where it is: its file and 1-based line (header lines counted), or, for records given as a
    DataFrame, their place with the row id in it (a Kafka record's offset) and no line. ``None``
    when no row meets it. One or two small actions."""
    from pyspark.sql import functions as F

    placed = C.PLACE in frame.columns  # (records given as a DataFrame: the row id is their position)
    rows = (
        frame.filter(condition)
        .orderBy(C.FILE, C.BLOCK, C.ROW_ID)
        .select(
            C.FILE,
            C.BLOCK,
            C.ROW_ID,
            C.HEADER if C.HEADER in frame.columns else F.lit(0),
            C.PLACE if placed else F.lit(None),
            *[col(c) for c in columns],
        )
        .limit(1)
        .collect()
    )
    if not rows:
        return None
    file_index, block, row_id, header, place, *values = rows[0]
    if placed:  # (the place names its row id: "..., partition 3, offset" and the offset)
        return tuple(values), f"{place} {int(row_id)}", None
    before = frame.filter(
        (F.col(C.FILE) == file_index)
        & ((F.col(C.BLOCK) < block) | ((F.col(C.BLOCK) == block) & (F.col(C.ROW_ID) < row_id)))
    ).count()
    return tuple(values), files[int(file_index)].path, before + 1 + int(header)


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
