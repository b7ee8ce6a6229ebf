"""Which backend a Spark session has (:mod:`lakemerge.spark.backend`), chosen once per session."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from lakemerge.spark.backend import Backend

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_LOCK = threading.Lock()
_CHOSEN: weakref.WeakKeyDictionary[Any, Backend] = weakref.WeakKeyDictionary()


def backend(spark: SparkSession) -> Backend:
    """The backend of ``spark``, chosen once per session."""
    with _LOCK:
        found = _CHOSEN.get(spark)
        if found is None:
            found = _CHOSEN[spark] = _choose(spark)
    return found


def _choose(spark: SparkSession) -> Backend:
    from lakemerge.spark.remote import is_connect

    if is_connect(spark):
        from lakemerge.spark.connect import ConnectBackend

        return ConnectBackend(spark)
    from lakemerge.spark.classic import ClassicBackend

    return ClassicBackend(spark)
