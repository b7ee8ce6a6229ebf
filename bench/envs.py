"""Python environments of other Spark lines, for the peers that cannot run on the installed one.

Hudi publishes no bundle for Spark 4 that this machine's Maven repository serves, so the Hudi peers
run on PySpark 3.5 (:mod:`bench.hudi`). Iceberg publishes its Spark runtime per Spark line, and none
for Spark 4.2 resolves here (``iceberg-spark-runtime-4.2_2.13`` 1.10.0 to 1.14.0 are refused), while
the 4.1 runtime fails on Spark 4.2 as the first table is created (an ``IncompatibleClassChangeError``:
Spark's ``View`` of the catalog API is no longer an interface): on Spark 4.2 the Iceberg peers run
on PySpark 4.1 with lakemerge's own session builder, Delta's 4.1 build and Iceberg's 4.1 runtime.

The harness makes each environment under its data folder on first use (``python -m venv`` and
``pip install``) and starts the peer's worker with that environment's Python (:func:`interpreter`,
:func:`process_env`); everything else about the peer is as in-process peers have it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass

#: The checkout holding ``bench`` (and lakemerge's ``src``).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Environment:
    """A PySpark release in a virtual environment of its own.

    Attributes:
        spark: the PySpark version installed there.
        lakemerge: whether lakemerge's source and Python dependencies are there too (its peers'
            sessions are built by lakemerge's session builder, as on the installed Spark).
    """

    spark: str
    lakemerge: bool

    @property
    def line(self) -> str:
        """The Spark line, ``major.minor``."""
        return ".".join(self.spark.split(".")[:2])


#: Hudi's newest Spark line with a bundle that resolves here (:mod:`bench.hudi`); PySpark only.
SPARK35 = Environment(spark="3.5.7", lakemerge=False)
#: The newest Spark line with an Iceberg runtime that resolves here, with lakemerge and Delta.
SPARK41 = Environment(spark="4.1.4", lakemerge=True)

ICEBERG_VERSION = "1.12.0"
#: Iceberg's Spark runtime per Spark line.
ICEBERG = {
    "4.1": f"org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:{ICEBERG_VERSION}",
    "3.5": f"org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:{ICEBERG_VERSION}",
}


def line(version: str) -> str:
    """``4.2`` for Spark ``4.2.0``."""
    return ".".join(version.split(".")[:2])


def iceberg_package(spark_version: str) -> str:
    """Iceberg's runtime for the Spark of ``spark_version``.

    Raises:
        KeyError: Iceberg publishes none here for that line (the harness then runs the peer in
            :data:`SPARK41`).
    """
    return ICEBERG[line(spark_version)]


def iceberg_environment(installed: str) -> Environment | None:
    """Where the Iceberg peers run beside the installed Spark ``installed``: in its own
    interpreter (``None``) when Iceberg has a runtime for it, else in :data:`SPARK41`."""
    return None if line(installed) in ICEBERG else SPARK41


def requirements(environment: Environment) -> list[str]:
    """What ``pip install`` puts in ``environment``: its PySpark, and with lakemerge, Delta's Python
    API of the release whose jars lakemerge takes and lakemerge's dependencies as the checkout's
    ``pyproject.toml`` declares them."""
    found = [f"pyspark=={environment.spark}"]
    if environment.lakemerge:
        from lakemerge.spark.versions import DELTA_VERSION

        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
            project = tomllib.load(fh)["project"]
        found += [f"delta-spark=={DELTA_VERSION}", *project["dependencies"]]
    return found


def interpreter(root: str, environment: Environment, timeout: float = 1800) -> str:
    """The Python of ``environment`` under ``root``, made on first use (a half-made one, or one made
    with other requirements, is made again: its marker is written last). Raises ``OSError`` or
    ``subprocess.SubprocessError`` when it cannot be made."""
    folder = os.path.join(root, f"spark-{environment.spark}")
    python = os.path.join(folder, "bin", "python")
    ready = os.path.join(folder, "ready")
    wanted = "\n".join(requirements(environment)) + "\n"
    if os.path.exists(python) and os.path.exists(ready):
        with open(ready) as fh:
            if fh.read() == wanted:
                return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", folder], check=True, timeout=timeout)
    install = [python, "-m", "pip", "install", "--quiet", *requirements(environment)]
    subprocess.run(install, check=True, timeout=timeout)
    with open(ready, "w") as fh:
        fh.write(wanted)
    return python


#: Variables that would point another PySpark at this Spark or Python; left out of its environment.
FOREIGN = ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")


def process_env(base: dict[str, str], environment: Environment, root: str = ROOT) -> dict[str, str]:
    """The variables of a worker process in ``environment``: ``base`` without :data:`FOREIGN`, with
    only ``root`` (the folder holding ``bench``) on its Python path, and its ``src`` with lakemerge."""
    env = {k: v for k, v in base.items() if k not in FOREIGN}
    paths = [root, os.path.join(root, "src")] if environment.lakemerge else [root]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env
