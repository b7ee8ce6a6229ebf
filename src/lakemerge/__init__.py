"""lakemerge: apply batches of change records to Delta Lake tables, atomically and exactly once."""

from __future__ import annotations

from importlib import metadata as _metadata

from lakemerge.api import (
    apply,
    apply_changes,
    apply_table,
    changed_records,
    compact,
    history,
    quarantine,
    read_current,
    register,
    report,
    rollback,
    run,
    show,
    skip,
    snapshot,
    snapshots,
    spark_session,
    stream,
    transaction,
    vacuum,
)
from lakemerge.config import FeedConfig, GroupConfig, PipelineConfig, SparkSettings, TableConfig
from lakemerge.config.pipeline_file import load_pipeline
from lakemerge.config.properties_file import load_properties
from lakemerge.config.records import RecordsConfig
from lakemerge.config.stream import StreamConfig
from lakemerge.errors import (
    AccountingError,
    ConfigError,
    ConflictError,
    InputError,
    InstallationError,
    LakemergeError,
    SchemaError,
    TableError,
)
from lakemerge.results import (
    AppliedFile,
    BatchMetrics,
    BatchResult,
    ChangedRecord,
    CommitInfo,
    CompactionResult,
    DemoResult,
    GroupPoint,
    QuarantinedRow,
    Registered,
    ReportResult,
    RollbackResult,
    TableSummary,
    TransactionResult,
    VacuumResult,
)
from lakemerge.spark import get_spark
from lakemerge.table.logview import merged_view_sql, read_merged, register_view

try:  # the version is written once, in pyproject.toml
    __version__ = _metadata.version("lakemerge")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AccountingError",
    "AppliedFile",
    "BatchMetrics",
    "BatchResult",
    "ChangedRecord",
    "CommitInfo",
    "CompactionResult",
    "ConfigError",
    "ConflictError",
    "DemoResult",
    "FeedConfig",
    "GroupConfig",
    "GroupPoint",
    "InputError",
    "InstallationError",
    "LakemergeError",
    "PipelineConfig",
    "QuarantinedRow",
    "RecordsConfig",
    "Registered",
    "ReportResult",
    "RollbackResult",
    "SchemaError",
    "SparkSettings",
    "StreamConfig",
    "TableConfig",
    "TableError",
    "TableSummary",
    "TransactionResult",
    "VacuumResult",
    "__version__",
    "apply",
    "apply_changes",
    "apply_table",
    "changed_records",
    "compact",
    "get_spark",
    "history",
    "load_pipeline",
    "load_properties",
    "merged_view_sql",
    "quarantine",
    "read_current",
    "read_merged",
    "register",
    "register_view",
    "report",
    "rollback",
    "run",
    "show",
    "skip",
    "snapshot",
    "snapshots",
    "spark_session",
    "stream",
    "transaction",
    "vacuum",
]
