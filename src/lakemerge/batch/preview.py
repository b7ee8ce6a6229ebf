"""A dry run: what committing a planned batch would do, committing nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col
from lakemerge.results import BatchResult
from lakemerge.write import Outcome, scd2

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakemerge.batch.plan import BatchPlan


def preview(plan: BatchPlan, *, spark: SparkSession) -> BatchResult:
    """What committing ``plan`` would do, committing nothing: the metrics, and how many stored
    files and partitions the changes touch."""
    from pyspark.sql import functions as F

    if plan.history is not None:
        return _preview_history(plan, plan.history)
    frame = plan.classified
    outcome = F.col(C.OUTCOME)
    matched = outcome.isin(Outcome.UPDATE.value, Outcome.DELETE.value)
    partition_by = plan.table.partition_by
    aggregates = [F.count_distinct(F.when(matched, F.col(C.STORED_FILE))).alias("files")] if plan.exists else []
    if partition_by:
        new = F.when(
            outcome.isin(Outcome.INSERT.value, Outcome.UPDATE.value),
            F.to_json(F.struct(*[col(c) for c in partition_by])),
        )
        old = F.when(matched, F.col(C.STORED_PARTITION)) if plan.exists else F.lit(None).cast("string")
        touched = frame.select(F.explode(F.array(new, old)).alias("p")).filter("p IS NOT NULL")
        partitions = touched.distinct().count()
    else:
        partitions = 1 if plan.metrics.inserted + plan.metrics.updated + plan.metrics.deleted else 0
    files = int(frame.agg(*aggregates).collect()[0]["files"]) if aggregates else 0
    return _dry_result(plan, files_touched=files, partitions_touched=partitions)


def _preview_history(plan: BatchPlan, history: scd2.History) -> BatchResult:
    """A dry run of an SCD2 batch: the versions it writes, and the partitions they fall in."""

    partition_by = plan.table.partition_by
    if partition_by:
        partitions = history.source.select(*[col(c) for c in partition_by]).distinct().count()
    else:
        partitions = 1 if plan.writes else 0
    return _dry_result(plan, partitions_touched=partitions)


def _dry_result(plan: BatchPlan, *, partitions_touched: int, files_touched: int | None = None) -> BatchResult:
    """The result of a dry run of ``plan``: what it would write, nothing committed."""
    return plan.result(version=None, dry_run=True, partitions_touched=partitions_touched, files_touched=files_touched)
