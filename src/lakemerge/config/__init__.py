"""Typed configuration: pipeline files (TOML), chombo properties files, and their models."""

from __future__ import annotations

from lakemerge.config.feed import FeedConfig
from lakemerge.config.pipeline import GroupConfig, PipelineConfig
from lakemerge.config.records import RecordsConfig
from lakemerge.config.spark import SparkSettings
from lakemerge.config.stream import StreamConfig
from lakemerge.config.table import TableConfig

__all__ = [
    "FeedConfig",
    "GroupConfig",
    "PipelineConfig",
    "RecordsConfig",
    "SparkSettings",
    "StreamConfig",
    "TableConfig",
]
