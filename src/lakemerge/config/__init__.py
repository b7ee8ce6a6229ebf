"""Typed configuration: pipeline files (TOML), chombo properties files, and their models."""

from __future__ import annotations

from lakemerge.config.models import FeedConfig, PipelineConfig, SparkSettings, TableConfig

__all__ = ["FeedConfig", "PipelineConfig", "SparkSettings", "TableConfig"]
