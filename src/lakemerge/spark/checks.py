"""Whether a Spark session is one lakemerge can work in: a supported Spark, with Delta Lake's
extension, catalog and jars of the matching build.

A session lakemerge starts has them all; a session a user built (a notebook's, a job's) may lack
any of them, and without this check the first Delta statement fails deep inside Spark with a
``ClassNotFoundException`` or a ``NoSuchMethodError``. Each refusal is one line saying what to add.
"""

from __future__ import annotations

import re
import threading
import weakref
from typing import TYPE_CHECKING

from lakemerge.errors import ConfigError
from lakemerge.spark import versions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

#: A class of Delta's Spark jar, whose jar file names the Spark line it was built for.
_DELTA_CLASS = "org.apache.spark.sql.delta.DeltaLog"
_DELTA_JAR = re.compile(r"delta-spark_(\d+\.\d+)_[\d.]+-([^/]+?)\.jar$")

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
    _check_jar(spark, version, matching)
    catalog = str(spark.conf.get("spark.sql.catalog.spark_catalog", "") or "")
    if catalog != CATALOG:
        current = catalog or "Spark's own"
        raise ConfigError(
            f"the Spark session's catalog is {current}, not Delta Lake's: add "
            f"spark.sql.catalog.spark_catalog={CATALOG} ({settings})"
        )
    with _LOCK:
        _CHECKED.add(spark)


def _check_jar(spark: SparkSession, version: str, matching: versions.Pairing) -> None:
    """Delta's classes are on the session's class path, from the build for its Spark line (a
    Connect session's server is not asked: its client has no JVM to look in)."""
    if not hasattr(spark, "_jvm") or getattr(spark, "_jvm", None) is None:
        return
    from lakemerge.spark.jvm import jclass

    utils = jclass(spark, "org.apache.spark.util.Utils")
    if not utils.classIsLoadable(_DELTA_CLASS):
        raise ConfigError(
            f"the Spark session has Delta Lake's extension but not its jars: add the package {matching.delta} "
            "(spark.jars.packages) when the session starts"
        )
    source = utils.classForName(_DELTA_CLASS, True, False).getProtectionDomain().getCodeSource()
    location = str(source.getLocation()) if source is not None else ""
    found = _DELTA_JAR.search(location)
    if found is not None and found.group(1) != matching.spark:
        raise ConfigError(
            f"the Spark session runs Spark {version} with Delta Lake's build for Spark {found.group(1)} "
            f"(delta-spark_{found.group(1)}, {found.group(2)}): use {matching.delta} instead"
        )
