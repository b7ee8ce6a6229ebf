"""Shared fixtures: one SparkSession for the whole run, small and quiet.

Hypothesis: the suite draws the same examples on every run (profile ``suite``, derandomized), so that
its time is the same from run to run and a failure reproduces; ``--hypothesis-profile explore`` draws
new ones on each run, to look for failures the fixed draw misses.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

import lakemerge

settings.register_profile("suite", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile("suite")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from lakemerge.streams.sources import KAFKA_PACKAGE

    session = lakemerge.get_spark(
        lakemerge.SparkSettings(
            master="local[2]",
            app_name="lakemerge-tests",
            packages=(KAFKA_PACKAGE,),  # (the streaming tests read Kafka)
            conf={
                "spark.sql.shuffle.partitions": "2",
                "spark.default.parallelism": "2",
                "spark.ui.enabled": "false",
            },
        )
    )
    yield session
    session.stop()
