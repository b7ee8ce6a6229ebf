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
from lakemerge.groups import GroupPoint
from lakemerge.groups import snapshot as group_snapshot
from lakemerge.results import BatchResult, CommitInfo, CompactionResult, TableSummary
from lakemerge.run import run_pipeline
from lakemerge.spark import get_spark
from lakemerge.table import inspect, maintenance
from lakemerge.table.catalog import Registered, register_tables
from lakemerge.table.quarantine import QuarantinedRow, list_quarantine
from lakemerge.table.rollback import RollbackResult
from lakemerge.table.rollback import rollback as rollback_table
from lakemerge.table.vacuum import VacuumResult
from lakemerge.table.vacuum import vacuum as vacuum_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def apply(
    pipeline: PipelineConfig | str | os.PathLike[str],
    *,
    tables: Sequence[str] | None = None,
    dry_run: bool = False,
    spark: SparkSession | None = None,
) -> list[BatchResult]:
    """Apply the next batch of each table of a pipeline (or of ``tables``), one commit per table,
    in the pipeline's order. With ``dry_run``, plan and report only.

    Raises:
        LakemergeError: (a subclass) at the first table that fails; earlier tables stay committed.
    """
    config, chosen = _tables(pipeline, tables)
    session = spark or get_spark(config.spark)
    return [batch.apply_table(table, spark=session, dry_run=dry_run) for table in chosen]


def run(
    pipeline: PipelineConfig | str | os.PathLike[str],
    *,
    tables: Sequence[str] | None = None,
    max_batches: int | None = None,
    spark: SparkSession | None = None,
) -> list[BatchResult]:
    """Apply every pending batch of each table until none is left; the committed batches' results."""
    config, chosen = _tables(pipeline, tables)
    return run_pipeline(
        config, spark=spark or get_spark(config.spark), tables=[t.name for t in chosen], max_batches=max_batches
    )


def snapshot(
    pipeline: PipelineConfig | str | os.PathLike[str], group: str, *, spark: SparkSession | None = None
) -> GroupPoint | None:
    """The group's consistent point ``{table: version}`` (``None`` before its first complete run)."""
    config, _ = _tables(pipeline, None)
    return group_snapshot(config, group, spark=spark or get_spark(config.spark))


def apply_table(
    table: TableConfig,
    *,
    inputs: Sequence[str] | None = None,
    dry_run: bool = False,
    spark: SparkSession | None = None,
) -> BatchResult:
    """Apply the next batch of one table's feed (or of ``inputs``) in one commit (or plan it only)."""
    return batch.apply_table(table, spark=spark or get_spark(SparkSettings()), inputs=inputs, dry_run=dry_run)


def rollback(
    path: str,
    *,
    to_version: int | None = None,
    to_timestamp: str | None = None,
    reapply: bool,
    spark: SparkSession | None = None,
) -> RollbackResult:
    """Restore the table to an earlier version; ``reapply`` makes the undone batches' files pending again."""
    return rollback_table(spark or get_spark(), path, to_version=to_version, to_timestamp=to_timestamp, reapply=reapply)


def register(
    pipeline: PipelineConfig | str | os.PathLike[str],
    *,
    tables: Sequence[str] | None = None,
    spark: SparkSession | None = None,
) -> list[Registered]:
    """Register the pipeline's existing tables (or ``tables``) and their views in the Spark catalog,
    under each table's ``catalog_name`` (default ``<database>.<name>``). Batches register their
    table themselves when it has a ``catalog_name``; this is for tables made before, or a new
    metastore."""
    config, chosen = _tables(pipeline, tables)
    session = spark or get_spark(config.spark)
    named = [
        t if t.catalog_name else t.model_copy(update={"catalog_name": f"{config.spark.database}.{t.name}"})
        for t in chosen
    ]
    return register_tables(session, named)


def _tables(
    pipeline: PipelineConfig | str | os.PathLike[str], names: Sequence[str] | None
) -> tuple[PipelineConfig, list[TableConfig]]:
    config = pipeline if isinstance(pipeline, PipelineConfig) else load_pipeline(pipeline)
    return config, [config.table(n) for n in names] if names else list(config.tables.values())


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


def quarantine(
    table: TableConfig, *, limit: int | None = 100, spark: SparkSession | None = None
) -> list[QuarantinedRow]:
    """The table's quarantined bad records (of committed batches), newest batch first."""
    return list_quarantine(spark or get_spark(), table_path=table.path, quarantine_path=table.quarantine, limit=limit)


def vacuum(
    table: TableConfig,
    *,
    retain_hours: float | None = None,
    now_ms: int | None = None,
    spark: SparkSession | None = None,
) -> VacuumResult:
    """Drop expired and orphaned tombstones, then VACUUM the table's unneeded files (Delta's
    retention safety applies). ``now_ms`` moves the clock tombstone retention is measured against."""
    return vacuum_table(spark or get_spark(SparkSettings()), table, retain_hours=retain_hours, now_ms=now_ms)


def compact(
    pipeline: PipelineConfig | str | os.PathLike[str],
    *,
    tables: Sequence[str] | None = None,
    spark: SparkSession | None = None,
) -> list[CompactionResult]:
    """Compact the pipeline's tables (or the named ones): fold ``log`` tables' change logs,
    bin-pack and cluster by key, purge deletion vectors (docs/modes.md)."""
    config, chosen = _tables(pipeline, tables)
    session = spark or get_spark(config.spark)
    return [maintenance.compact(t, spark=session) for t in chosen]


def read_current(spark: SparkSession, table: TableConfig) -> DataFrame:
    """The table's current rows as a DataFrame: for SCD2 tables the rows with ``__current``, without
    the history columns; for ``log`` tables the merged view over table and change log; for other
    tables the table itself."""
    from lakemerge.apply.log import read_merged
    from lakemerge.apply.scd2 import current

    if table.log_mode:
        merged = read_merged(spark, table)
        if merged is None:
            from lakemerge.errors import TableError

            raise TableError(f"table '{table.name}' has neither a Delta table nor a change log at {table.path}")
        return merged

    frame = spark.read.format("delta").load(table.path)
    return current(frame) if table.scd2 else frame
