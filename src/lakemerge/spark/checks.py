"""Whether a Spark session is one lakemerge can work in: a supported Spark, with Delta Lake's
extension, catalog and jars of the matching build.

A session lakemerge starts has them all; a session a user built (a notebook's, a job's) may lack
any of them, and without this check the first Delta statement fails deep inside Spark with a
``ClassNotFoundException`` or a ``NoSuchMethodError``. Each refusal is one line saying what to add.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from lakemerge.errors import ConfigError
from lakemerge.spark import versions
from lakemerge.spark.backends import backend

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

_LOCK = threading.Lock()
_CHECKED: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def check_session(spark: SparkSession) -> None:
    """Refuse (once per session) a session lakemerge cannot write Delta tables in.

    Raises:
        ConfigError: the session's Spark is not supported, or it lacks Delta's extension, catalog
            or jars, or its Delta jar was built for another Spark line; the message says what to add.
    """
    with _LOCK:
        if spark in _CHECKED:
            return
    version = str(spark.version)
    matching = versions.pairing(version)
    settings = "start it with lakemerge, or add the settings `lakemerge conf` prints"
    extensions = [e.strip() for e in str(spark.conf.get("spark.sql.extensions", "") or "").split(",")]
    if EXTENSION not in extensions:
        raise ConfigError(
            f"the Spark session has no Delta Lake extension: add spark.sql.extensions={EXTENSION} "
            f"and the package {matching.delta} ({settings})"
        )
    backend(spark).check_delta(version, matching)
    catalog = str(spark.conf.get("spark.sql.catalog.spark_catalog", "") or "")
    if catalog != CATALOG:
        current = catalog or "Spark's own"
        raise ConfigError(
            f"the Spark session's catalog is {current}, not Delta Lake's: add "
            f"spark.sql.catalog.spark_catalog={CATALOG} ({settings})"
        )
    with _LOCK:
        _CHECKED.add(spark)
