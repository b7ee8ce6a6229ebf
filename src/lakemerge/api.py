"""The Python API: the CLI's operations as functions, for orchestrators (Airflow, Dagster, ...).

Every function takes keyword arguments after the first, starts (or reuses) a SparkSession when
none is given, and returns typed results.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakemerge import batch
from lakemerge.config.models import PipelineConfig, SparkSettings, TableConfig
from lakemerge.config.pipeline_file import load_pipeline
from lakemerge.results import BatchResult, CommitInfo, TableSummary
from lakemerge.spark import get_spark
from lakemerge.table import inspect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def apply(
    pipeline: PipelineConfig | str | os.PathLike[str],
    *,
    tables: Sequence[str] | None = None,
    spark: SparkSession | None = None,
) -> list[BatchResult]:
    """Apply the pending change files of each table of a pipeline (or of ``tables``), one batch
    and one commit per table, in the pipeline's order.

    Raises:
        LakemergeError: (a subclass) at the first table that fails; earlier tables stay committed.
    """
    config = pipeline if isinstance(pipeline, PipelineConfig) else load_pipeline(pipeline)
    chosen = [config.table(name) for name in tables] if tables else list(config.tables.values())
    session = spark or get_spark(config.spark)
    return [batch.apply_table(table, spark=session) for table in chosen]


def apply_table(
    table: TableConfig,
    *,
    inputs: Sequence[str] | None = None,
    spark: SparkSession | None = None,
) -> BatchResult:
    """Apply the pending change files of one table's feed (or ``inputs``) in one commit."""
    return batch.apply_table(table, spark=spark or get_spark(SparkSettings()), inputs=inputs)


def history(path: str, *, limit: int | None = None, spark: SparkSession | None = None) -> list[CommitInfo]:
    """The table's commits, newest first, with each batch's metrics and applied files."""
    return inspect.history(spark or get_spark(), path, limit=limit)


def show(path: str, *, sample: int = 10, spark: SparkSession | None = None) -> TableSummary:
    """The table's schema, row and file counts, size and a few rows."""
    return inspect.show(spark or get_spark(), path, sample=sample)


def changed_records(
    path: str, version: int, *, key: Sequence[str], limit: int = 20, spark: SparkSession | None = None
) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    """(before, after) pairs of rows that ``version`` changed, ordered by key."""
    return inspect.changed_records(spark or get_spark(), path, version, key=key, limit=limit)
