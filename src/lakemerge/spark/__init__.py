"""Starting Spark with Delta Lake."""

from __future__ import annotations

from lakemerge.spark.session import get_spark

__all__ = ["get_spark"]
