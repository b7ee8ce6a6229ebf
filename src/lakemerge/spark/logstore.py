"""The log store that makes a table on S3 safe for writers in several drivers (``[spark]
s3_commits = "conditional"``): Delta's commit of each version a put-if-absent through S3's
conditional write (``java/ConditionalPutLogStore.java``), instead of Delta's default S3 log store,
which checks that the version's file does not exist and then writes it, so that two drivers
committing one version at once can both succeed and one commit is lost.

The class ships compiled (``java/conditional-log-store.jar``, Java 17 bytecode, which every Spark
4 runs), so that a JRE is enough. The jar records the SHA-256 of the source it was built from; where
the two differ (a source edited in a checkout), the class is compiled instead, once per Delta and
Hadoop release, with the JDK's ``javac`` against the installed Spark's Hadoop jars and Delta's
``delta-storage`` jar (which Spark's package resolution put in its Ivy cache).
:func:`rebuild` builds the shipped jar again from the source.

Either jar is copied to the user's cache folder and handed to the session through ``spark.jars``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from lakemerge import packaged
from lakemerge.errors import ConfigError
from lakemerge.spark import versions

#: The log store's class, and the settings that put it in charge of ``s3a:`` tables.
CLASS = "lakemerge.storage.ConditionalPutLogStore"
SOURCE = "java/ConditionalPutLogStore.java"


#: The Spark settings of the conditional log store (beside its jar in ``spark.jars``).
SETTINGS = {
    "spark.delta.logStore.s3a.impl": CLASS,
    "spark.hadoop.fs.s3a.create.conditional.enabled": "true",
}


def with_log_store(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the conditional log store in charge of ``s3a:`` tables: its settings, and its
    jar (:func:`jar`) first in ``spark.jars``."""
    jars = [j for j in conf.get("spark.jars", "").split(",") if j.strip()]
    return {**conf, **SETTINGS, "spark.jars": ",".join([str(jar()), *jars])}


def cache_folder() -> Path:
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(home) / "lakemerge" / "jars"


#: The compiled class as shipped, and the manifest attribute naming the source it was built from.
SHIPPED = "java/conditional-log-store.jar"
SOURCE_ATTRIBUTE = "Lakemerge-Source-SHA256"


def jar() -> Path:
    """The log store's jar in the user's cache: the shipped one when it was built from the
    packaged source, else one compiled the first time (see the module).

    Raises:
        ConfigError: the shipped jar does not match the source, and there is no ``javac`` (a JDK
            is needed once), no ``delta-storage`` jar in Spark's Ivy cache, or the class does not
            compile against the installed jars.
    """
    source = packaged.read_text("lakemerge.spark", SOURCE)
    digest = hashlib.sha256(source.encode()).hexdigest()
    shipped = packaged.read_bytes("lakemerge.spark", SHIPPED)
    if built_from(shipped) == digest:
        target = cache_folder() / f"lakemerge-conditional-log-store-{digest[:16]}.jar"
        if not target.is_file():
            _place(shipped, target)
        return target
    hadoop = versions.installed_hadoop()
    tag = hashlib.sha256(f"{source}\0{versions.DELTA_VERSION}\0{hadoop}".encode()).hexdigest()[:16]
    target = cache_folder() / f"lakemerge-conditional-log-store-{tag}.jar"
    if not target.is_file():
        _place(build(source), target)
    return target


def built_from(jar_bytes: bytes) -> str | None:
    """The SHA-256 of the source a jar of this module's was built from (its manifest says)."""
    with zipfile.ZipFile(io.BytesIO(jar_bytes)) as archive:
        manifest = archive.read("META-INF/MANIFEST.MF").decode("utf-8")
    for line in manifest.splitlines():
        name, _, value = line.partition(": ")
        if name == SOURCE_ATTRIBUTE:
            return value.strip()
    return None


def build(source: str) -> bytes:
    """The jar of ``source`` compiled for Java 17 against the installed Spark's Hadoop and Delta's
    ``delta-storage``, its manifest naming the source's SHA-256.

    Raises:
        ConfigError: no ``javac``, no ``delta-storage`` jar, or the class does not compile.
    """
    javac = _javac()
    classpath = [*_spark_jars(), _delta_storage()]
    digest = hashlib.sha256(source.encode()).hexdigest()
    with tempfile.TemporaryDirectory(prefix="lakemerge-log-store-") as work:
        folder = Path(work)
        (folder / "ConditionalPutLogStore.java").write_text(source, encoding="utf-8")
        command = [
            javac,
            "-nowarn",
            "--release",
            "17",
            "-d",
            str(folder / "classes"),
            "-cp",
            os.pathsep.join(classpath),
        ]
        done = subprocess.run([*command, str(folder / "ConditionalPutLogStore.java")], capture_output=True, text=True)
        if done.returncode != 0:
            reason = (done.stderr or done.stdout).strip().splitlines()
            raise ConfigError(
                f"s3_commits = 'conditional': its log store did not compile: {reason[0] if reason else '?'}"
            )
        staged = io.BytesIO()
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as archive:
            manifest = f"Manifest-Version: 1.0\r\n{SOURCE_ATTRIBUTE}: {digest}\r\n\r\n"
            archive.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", _FIXED_TIME), manifest)
            for compiled in sorted((folder / "classes").rglob("*.class")):
                name = compiled.relative_to(folder / "classes").as_posix()
                archive.writestr(zipfile.ZipInfo(name, _FIXED_TIME), compiled.read_bytes())
        return staged.getvalue()


#: The time stamped on a built jar's entries (a jar built twice from one source is the same bytes).
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def _place(jar_bytes: bytes, target: Path) -> None:
    """Write ``jar_bytes`` to ``target`` at once (a session starting meanwhile sees the jar whole
    or none)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    partial.write_bytes(jar_bytes)
    partial.replace(target)


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "javac") if home else None
    if found and os.access(found, os.X_OK):
        return found
    found = shutil.which("javac")
    if found is None:
        raise ConfigError(
            "s3_commits = 'conditional' builds its log store once with a JDK's javac, and there is none "
            "(install a JDK 17 or newer, or set JAVA_HOME to one)"
        )
    return found


def _spark_jars() -> list[str]:
    """Hadoop's and Spark's jars of the installed Spark, as a ``javac`` classpath."""
    folders = [Path(os.environ["SPARK_HOME"]) / "jars"] if os.environ.get("SPARK_HOME") else []
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.submodule_search_locations:
        folders.extend(Path(f) / "jars" for f in spec.submodule_search_locations)
    return [str(folder / "*") for folder in folders if folder.is_dir()]


def _delta_storage() -> str:
    """Delta's ``delta-storage`` jar of :data:`~lakemerge.spark.versions.DELTA_VERSION` in Spark's
    Ivy cache (``spark.jars.ivy``'s default folders)."""
    name = f"io.delta_delta-storage-{versions.DELTA_VERSION}.jar"
    home = Path(os.path.expanduser("~"))
    for folder in (home / ".ivy2.5.2" / "jars", home / ".ivy2" / "jars"):
        if (folder / name).is_file():
            return str(folder / name)
    raise ConfigError(
        f"s3_commits = 'conditional' builds its log store against Delta's {name}, which is not in Spark's Ivy "
        "cache yet: run any lakemerge command once without it (Spark downloads Delta's jars as it starts)"
    )


def rebuild() -> Path:
    """Build the shipped jar again from the source (after editing it, in a checkout); its path."""
    shipped = Path(__file__).with_name("java") / "conditional-log-store.jar"
    shipped.write_bytes(build(packaged.read_text("lakemerge.spark", SOURCE)))
    return shipped
