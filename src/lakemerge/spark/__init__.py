"""Starting Spark with Delta Lake."""

from __future__ import annotations

from lakemerge.spark.session import DELTA_PACKAGE, get_spark

__all__ = ["DELTA_PACKAGE", "get_spark"]
