"""Collapse a batch to one change per key (PRODUCT.md §Semantics 1 and 2).

Within a key, the change with the greatest sequence wins; ties go to the later file in file order,
then to the later row in its file. The order is total, so the same input always gives the same
result, however Spark splits the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakemerge.feeds import columns as C

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def collapse(frame: DataFrame, *, key: Sequence[str], sequence: Sequence[str]) -> DataFrame:
    """Keep the latest change of each key in ``frame`` (valid rows only)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    latest_first = [F.col(f"`{c}`").desc() for c in sequence] + [
        F.col(C.FILE).desc(),
        F.col(C.BLOCK).desc(),
        F.col(C.ROW_ID).desc(),
    ]
    window = Window.partitionBy(*[F.col(f"`{k}`") for k in key]).orderBy(*latest_first)
    return frame.withColumn("_lm_rank", F.row_number().over(window)).filter("_lm_rank = 1").drop("_lm_rank")
