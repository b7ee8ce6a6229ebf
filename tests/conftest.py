"""Shared fixtures: one SparkSession for the whole run, small and quiet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import lakemerge


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    session = lakemerge.get_spark(
        lakemerge.SparkSettings(
            master="local[2]",
            app_name="lakemerge-tests",
            conf={
                "spark.sql.shuffle.partitions": "2",
                "spark.default.parallelism": "2",
                "spark.ui.enabled": "false",
            },
        )
    )
    yield session
    session.stop()
