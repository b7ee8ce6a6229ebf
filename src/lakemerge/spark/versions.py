"""The Spark releases lakemerge runs on, and the Maven artifacts that match each one.

Delta names its Spark artifact after Spark's major and minor version (``delta-spark_4.2_2.13``), and
Spark's own Kafka and Avro sources are released with Spark: a session needs the builds of all three
that match the Spark it runs on. This module holds the one table of them, and reads which Spark is
installed without starting a JVM, so that an unsupported release is refused before any JVM work.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from lakemerge.errors import ConfigError


@dataclass(frozen=True)
class Pairing:
    """The artifacts of one Spark release line (``major.minor``).

    Attributes:
        spark: the release line, ``"4.2"``.
        delta: Delta Lake's Spark artifact for it.
        kafka: Spark's Kafka source (Structured Streaming) of that line.
        avro: Spark's Avro data source of that line.
        hadoop: the Hadoop release that line's PySpark bundles (its ``hadoop-client-api`` jar).
    """

    spark: str
    delta: str
    kafka: str
    avro: str
    hadoop: str


#: Delta Lake's release, the same for every Spark line below (its PyPI package is ``delta-spark``).
DELTA_VERSION = "4.4.0"

#: Every Spark line lakemerge supports, newest first. The Kafka and Avro sources are the newest
#: patch release of each line whose artifact resolves whole (4.1.2 and 4.1.3 published a Kafka
#: source without its token provider dependency; 4.1 published no later Avro source than 4.1.1).
PAIRINGS: dict[str, Pairing] = {
    "4.2": Pairing(
        spark="4.2",
        delta=f"io.delta:delta-spark_4.2_2.13:{DELTA_VERSION}",
        kafka="org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
        avro="org.apache.spark:spark-avro_2.13:4.2.0",
        hadoop="3.5.0",
    ),
    "4.1": Pairing(
        spark="4.1",
        delta=f"io.delta:delta-spark_4.1_2.13:{DELTA_VERSION}",
        kafka="org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1",
        avro="org.apache.spark:spark-avro_2.13:4.1.1",
        hadoop="3.4.2",
    ),
}

#: The AWS SDK (v2) release each ``hadoop-aws`` release is built against (the version of the SDK's
#: ``bundle`` its POM declares). S3A needs only the SDK's S3 client and transfer manager from it: those
#: two (about 15 MB with what they pull) instead of the bundle (over 600 MB).
AWS_SDK: dict[str, str] = {"3.5.0": "2.35.4", "3.4.2": "2.29.52"}

#: Hadoop's S3A filesystem, and the artifact it pulls that :data:`AWS_SDK`'s two replace.
HADOOP_AWS = "org.apache.hadoop:hadoop-aws"
AWS_BUNDLE = "software.amazon.awssdk:bundle"

#: The PyPI distributions that provide the ``pyspark`` module: the whole of Spark, or its Connect
#: client alone (which must not be installed beside the other).
_DISTRIBUTIONS = ("pyspark", "pyspark-client", "pyspark-connect")

_LINE = re.compile(r"(\d+)\.(\d+)")
_DECLARED = re.compile(r"__version__[^=]*=\s*[\"']([^\"']+)[\"']")
_CORE_JAR = re.compile(r"spark-core_[\d.]+-(\d+\.\d+\.\d+[^/]*)\.jar$")
_HADOOP_JAR = re.compile(r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar$")


def supported() -> str:
    """The supported Spark lines as a user reads them: ``4.2 and 4.1``."""
    lines = list(PAIRINGS)
    return lines[0] if len(lines) == 1 else f"{', '.join(lines[:-1])} and {lines[-1]}"


def pairing(version: str) -> Pairing:
    """The artifacts for Spark ``version`` (``4.2.0``, ``4.1.4``, ``4.2.0-SNAPSHOT``).

    Raises:
        ConfigError: the version is not one lakemerge supports (exit code 2).
    """
    match = _LINE.match(version.strip())
    line = f"{match.group(1)}.{match.group(2)}" if match else None
    if line not in PAIRINGS:
        raise ConfigError(
            f"Spark {version.strip() or '(unknown version)'} is not supported: lakemerge runs on Spark {supported()} "
            f"(pip install 'pyspark>=4.1,<=4.2.0')"
        )
    return PAIRINGS[line]


def installed_spark() -> str:
    """The version of the Spark a new session would start, read without a JVM: the Spark under
    ``$SPARK_HOME`` when it points at a Spark installation (PySpark's launcher starts that one),
    else the installed ``pyspark`` distribution's.

    Raises:
        ConfigError: no PySpark is installed.
    """
    home = os.environ.get("SPARK_HOME")
    if home:
        found = _home_version(Path(home))
        if found is not None:
            return found
    for name in _DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    found = _module_version()
    if found is not None:
        return found
    raise ConfigError(
        f"PySpark is not installed: lakemerge runs on Spark {supported()} (pip install 'lakemerge[spark]')"
    )


def _module_version() -> str | None:
    """The version a ``pyspark`` module on the path declares (a platform's Spark, not pip-installed),
    read from its ``version.py`` without importing PySpark."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        source = Path(folder) / "version.py"
        if source.is_file():
            match = _DECLARED.search(source.read_text(encoding="utf-8", errors="replace"))
            if match:
                return match.group(1)
    return None


def _home_version(home: Path) -> str | None:
    """The version of the Spark installed at ``home``, from its ``spark-core`` jar's name."""
    jars = home / "jars"
    if not jars.is_dir():
        return None
    for jar in jars.glob("spark-core_*.jar"):
        match = _CORE_JAR.search(jar.name)
        if match:
            return match.group(1)
    return None


def installed_pairing() -> Pairing:
    """The artifacts for the installed Spark (:func:`installed_spark`).

    Raises:
        ConfigError: PySpark is missing, or its version is not supported.
    """
    return pairing(installed_spark())


def s3_packages(hadoop: str) -> tuple[str, ...]:
    """The Maven coordinates that give a Spark on Hadoop ``hadoop`` its ``s3a:`` filesystem:
    ``hadoop-aws`` of that release and the AWS SDK's S3 client and transfer manager at the release
    it was built against (the SDK's bundle excluded: :data:`AWS_BUNDLE`).

    Raises:
        ConfigError: a Hadoop release whose SDK lakemerge does not know (name your own
            ``hadoop-aws`` in ``spark.jars.packages`` then).
    """
    sdk = AWS_SDK.get(hadoop)
    if sdk is None:
        raise ConfigError(
            f"Hadoop {hadoop} (of the installed Spark) is not one whose S3 jars lakemerge knows "
            f"({', '.join(AWS_SDK)}): name {HADOOP_AWS}:{hadoop} and its AWS SDK in spark.jars.packages"
        )
    return (
        f"{HADOOP_AWS}:{hadoop}",
        f"software.amazon.awssdk:s3:{sdk}",
        f"software.amazon.awssdk:s3-transfer-manager:{sdk}",
    )


def installed_hadoop(matching: Pairing | None = None) -> str:
    """The Hadoop release of the Spark a new session would start, from its ``hadoop-client-api``
    jar (under ``$SPARK_HOME``, else the ``pyspark`` module's); ``matching``'s (default: the
    installed Spark's pairing) when no jar says."""
    folders = [Path(os.environ["SPARK_HOME"]) / "jars"] if os.environ.get("SPARK_HOME") else []
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.submodule_search_locations:
        folders.extend(Path(f) / "jars" for f in spec.submodule_search_locations)
    for folder in folders:
        if folder.is_dir():
            for jar in sorted(folder.glob("hadoop-client-api-*.jar")):
                match = _HADOOP_JAR.search(jar.name)
                if match:
                    return match.group(1)
    return (matching or installed_pairing()).hadoop
