"""lakemerge: apply batches of change records to Delta Lake tables, atomically and exactly once."""

from __future__ import annotations

from importlib import metadata as _metadata

from lakemerge.api import (
    apply,
    apply_table,
    changed_records,
    compact,
    history,
    quarantine,
    read_current,
    register,
    rollback,
    run,
    show,
    snapshot,
    vacuum,
)
from lakemerge.apply.log import merged_view_sql, read_merged, register_view
from lakemerge.config.models import FeedConfig, GroupConfig, PipelineConfig, SparkSettings, TableConfig
from lakemerge.config.pipeline_file import load_pipeline
from lakemerge.config.properties_file import load_properties
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
from lakemerge.groups import GroupPoint
from lakemerge.results import AppliedFile, BatchMetrics, BatchResult, CommitInfo, CompactionResult, TableSummary
from lakemerge.spark import get_spark
from lakemerge.table.catalog import Registered
from lakemerge.table.quarantine import QuarantinedRow
from lakemerge.table.rollback import RollbackResult
from lakemerge.table.vacuum import VacuumResult

try:  # the version is written once, in pyproject.toml
    __version__ = _metadata.version("lakemerge")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AccountingError",
    "AppliedFile",
    "BatchMetrics",
    "BatchResult",
    "CommitInfo",
    "CompactionResult",
    "ConfigError",
    "ConflictError",
    "FeedConfig",
    "GroupConfig",
    "GroupPoint",
    "InputError",
    "InstallationError",
    "LakemergeError",
    "PipelineConfig",
    "QuarantinedRow",
    "Registered",
    "RollbackResult",
    "SchemaError",
    "SparkSettings",
    "TableConfig",
    "TableError",
    "TableSummary",
    "VacuumResult",
    "__version__",
    "apply",
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
    "rollback",
    "run",
    "show",
    "snapshot",
    "vacuum",
]
