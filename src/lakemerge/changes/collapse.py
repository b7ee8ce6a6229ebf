"""Collapse a batch to one change per key (docs/semantics.md §1-§3).

Within a key, the change with the greatest sequence wins; ties go to the later file in file order,
then to the later row in its file. The order is total, so the same input always gives the same
result, however Spark splits the files.

With partial updates, a null in an upsert means "unchanged": each column of the winning upsert
takes the last non-null value among the upserts after the key's last delete in the batch, in
sequence order, and ``_lm_after_delete`` tells the merge whether the stored row may fill the
remaining nulls (it may not once the batch deleted the key).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col, quoted

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def _order(sequence: Sequence[str], *, descending: bool) -> list[Column]:
    from pyspark.sql import functions as F

    names = [quoted(c) for c in sequence] + [C.FILE, C.BLOCK, C.ROW_ID]
    return [F.col(n).desc() if descending else F.col(n).asc() for n in names]


def collapse(
    frame: DataFrame, *, key: Sequence[str], sequence: Sequence[str], partial: Sequence[str] = ()
) -> DataFrame:
    """Keep the latest change of each key in ``frame`` (valid rows only), folding ``partial`` columns."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = [col(k) for k in key]
    if partial:
        upto = Window.partitionBy(*keys).orderBy(*_order(sequence, descending=False))
        running = upto.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        frame = frame.withColumn("_lm_epoch", F.sum(F.when(F.col(C.OP) == "D", 1).otherwise(0)).over(running))
        in_epoch = (
            Window.partitionBy(*keys, F.col("_lm_epoch"))
            .orderBy(*_order(sequence, descending=False))
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        for name in partial:
            upserted = F.when(F.col(C.OP) == "U", col(name))
            frame = frame.withColumn(name, F.last(upserted, ignorenulls=True).over(in_epoch))
        frame = frame.withColumn(C.AFTER_DELETE, F.col("_lm_epoch") > 0).drop("_lm_epoch")
    window = Window.partitionBy(*keys).orderBy(*_order(sequence, descending=True))
    return frame.withColumn("_lm_rank", F.row_number().over(window)).filter("_lm_rank = 1").drop("_lm_rank")
