"""Session settings for the length of a block."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextlib.contextmanager
def scoped_conf(spark: SparkSession, settings: Mapping[str, str | None]) -> Iterator[None]:
    """Set ``settings`` on the session for the block (``None``: unset), then put back what was
    there (unset what was not set)."""
    conf = spark.conf
    previous = {key: conf.get(key, None) for key in settings}
    for key, value in settings.items():
        if value is None:
            conf.unset(key)
        else:
            conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                conf.unset(key)
            else:
                conf.set(key, old)
