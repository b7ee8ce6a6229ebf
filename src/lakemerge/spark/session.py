"""Build the SparkSession lakemerge works in: Delta's jars and extensions, quiet console.

Delta's jars come through ``spark.jars.packages`` and are resolved on the first start (then
cached by Spark). Spark's console output (dependency resolution, warnings, progress bars) goes to
a log file unless ``verbose`` is set.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from lakemerge import packaged
from lakemerge.config.spark import SparkSettings
from lakemerge.errors import ConfigError, LakemergeError
from lakemerge.spark import checks, localfs, logstore, remote, startup, versions
from lakemerge.spark.backends import backend

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: PySpark's setting for recording the Python call site of every column expression.
DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"

_DEFAULTS: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.databricks.delta.schema.autoMerge.enabled": "false",
    # Spark keeps the classes it compiles for a query's generated code in a cache of 100 by default;
    # one batch compiles about as many (its queries, Delta's snapshot and commit queries), so each
    # batch evicted the last one's and compiled them all again: 0.7-1.1 s of a 4 s batch
    # (bench/RESULTS.md, "Generated-code cache"). A batch now compiles little more than the code its
    # literals change.
    "spark.sql.codegen.cache.maxEntries": "1000",
    # PySpark records, for every column expression built in Python (`F.col`, `==`, `.alias`, ...),
    # the Python call site, for the "DataFrame context" of runtime errors: a stack walk and four
    # more calls into the JVM each time. A batch builds about a thousand such expressions, so this
    # cost 0.5-1 s of a 3-4 s batch (bench/RESULTS.md, "PySpark DataFrame debugging"); lakemerge names the
    # file, row and column of its errors itself. PySpark reads the setting once per process.
    DEBUGGING: "false",
}


_DRIVER_OPTIONS = "spark.driver.extraJavaOptions"

#: The garbage collector of a local session's JVM (driver and executors in one), unless the JVM's
#: options name one already (see :func:`_with_local_jvm`): the parallel collector made batches
#: 3-10 % faster than the JVM's default G1 on 2 cores (bench/RESULTS.md, "Garbage collector"): its
#: pauses are short at a local session's heap sizes, and G1's barriers and concurrent threads cost
#: more there.
LOCAL_COLLECTOR = "-XX:+UseParallelGC"

#: When a local session's JVM compiles a method with its optimising compiler (C2): after five times
#: HotSpot's default counts of calls and loop turns, unless the JVM's options already say when or
#: whether it compiles (:data:`COMPILER_OPTIONS`). Spark's planner is a large body of code that
#: each batch runs a few thousand times; at the defaults, C2 kept compiling it through every batch of
#: a short-lived process (about 1 s of compiler CPU in each warm batch of 1,500 changes, on 2 cores
#: that also run the batch), while a job's per-row code still reaches C2 within its first hundred
#: thousand rows or so. In interleaved fresh processes, batches 3-6 of 1,500 changes used 13-32 %
#: less of the JVM's CPU and 3-17 % less time, of 150,000 13 % less time, and the hand-written
#: MERGE 3-8 %; a process of twenty batches ran as fast with 17 % less CPU, and one JVM that plans
#: thousands of different queries (the test suite) took 13 % longer (bench/RESULTS.md, "C2 compile
#: thresholds").
LOCAL_COMPILER = (
    "-XX:Tier4InvocationThreshold=25000",
    "-XX:Tier4MinInvocationThreshold=3000",
    "-XX:Tier4CompileThreshold=75000",
    "-XX:Tier4BackEdgeThreshold=200000",
)

#: HotSpot options (``-XX:`` names, or prefixes ending in ``*``) that say when or whether the JVM
#: compiles; with any of them, or ``-Xint`` or ``-Xcomp``, :data:`LOCAL_COMPILER` is left out.
COMPILER_OPTIONS = ("Tier*", "CompileThreshold", "CompileThresholdScaling", "CompilationMode", "UseCompiler")

#: Where else the driver JVM's options come from: Spark's own default options (before the extra
#: ones on its command line), and the environment variables the JVM reads before its command line.
_DEFAULT_OPTIONS = "spark.driver.defaultJavaOptions"
_OPTION_VARIABLES = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS")


def _xx_name(option: str) -> str | None:
    """The name of a ``-XX:`` option (``-XX:+UseG1GC`` → ``UseG1GC``), else ``None``."""
    if not option.startswith("-XX:"):
        return None
    return option[4:].lstrip("+-").split("=", 1)[0]


def _sets_compiler(option: str) -> bool:
    name = _xx_name(option)
    if name is None:
        return option in ("-Xint", "-Xcomp") or option.startswith("-Djava.compiler=")
    return any(name.startswith(o[:-1]) if o.endswith("*") else name == o for o in COMPILER_OPTIONS)


def _with_local_jvm(options: str, elsewhere: str = "") -> str:
    """``options`` (the driver's extra JVM options) with :data:`LOCAL_COLLECTOR` first unless these
    or the JVM's options from ``elsewhere`` choose a collector, and :data:`LOCAL_COMPILER` unless
    they set when or whether the JVM compiles (HotSpot takes the last of two values, and refuses two
    collectors)."""
    chosen = _split(f"{elsewhere} {options}")
    own: list[str] = []
    if not any((_xx_name(o) or "").startswith("Use") and o.endswith("GC") for o in chosen):
        own.append(LOCAL_COLLECTOR)
    if not any(_sets_compiler(o) for o in chosen):
        own.extend(LOCAL_COMPILER)
    return " ".join([*own, options]).strip()


def _split(options: str) -> list[str]:
    """JVM options as Spark splits them (quotes group words); by whitespace if they do not parse."""
    try:
        return shlex.split(options)
    except ValueError:
        return options.split()


def _quoted_option(option: str) -> str:
    """``option`` (``-Dname=value``) as one JVM option on Spark's command line, quoted if it holds
    whitespace."""
    return f'"{option}"' if any(c.isspace() for c in option) else option


def default_log_file() -> str:
    """Where Spark's log goes when the settings name no file: ``$LAKEMERGE_SPARK_LOG``, else a
    file under the temp directory."""
    if os.environ.get("LAKEMERGE_SPARK_LOG"):
        return os.environ["LAKEMERGE_SPARK_LOG"]
    return os.path.join(_own_folder(), "spark.log")


def _own_folder() -> str:
    """lakemerge's folder of the user under the temp directory (Spark's log, an empty warehouse)."""
    return os.path.join(tempfile.gettempdir(), f"lakemerge-{os.getuid() if hasattr(os, 'getuid') else 'user'}")


def session_conf(settings: SparkSettings, matching: versions.Pairing | None = None) -> dict[str, str]:
    """Every Spark setting lakemerge starts a session with, the user's ``conf`` last; Delta's and
    Avro's packages those of ``matching`` (default: the installed Spark's).

    The same settings serve ``spark-submit --conf`` and ``spark-defaults.conf`` on a cluster
    (``lakemerge conf PIPELINE`` prints them), so that a job submitted by a scheduler sees the
    tables exactly as ``lakemerge run`` does.
    """
    conf = dict(_DEFAULTS)
    derby: str | None = None
    if settings.master.startswith("local"):
        conf.update(
            {
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "8",
                # Delta rebuilds a table's file list with one Spark job the first time each new
                # version is read, in this many partitions: one is the fastest for the logs a local
                # session sees (bench/RESULTS.md, `python -m bench.snapshots`); clusters keep Delta's.
                "spark.databricks.delta.snapshotPartitions": "1",
                # Delta's commits without Hadoop's checksum side files: half the processes Hadoop
                # starts per commit (lakemerge.spark.localfs).
                localfs.SETTING: localfs.RAW,
            }
        )
    if settings.catalog == "hive":
        conf["spark.sql.catalogImplementation"] = "hive"
        if settings.metastore_uri:
            conf["spark.hadoop.hive.metastore.uris"] = settings.metastore_uri
        else:
            folder = os.path.abspath(settings.metastore_dir or "metastore")
            conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
                f"jdbc:derby:;databaseName={folder}/metastore_db;create=true"
            )
            # Derby writes derby.log into the JVM's working directory unless told otherwise.
            derby = _quoted_option(f"-Dderby.system.home={folder}")
            conf[_DRIVER_OPTIONS] = derby
        if settings.warehouse:
            conf["spark.sql.warehouse.dir"] = settings.warehouse
    elif settings.warehouse:
        conf["spark.sql.warehouse.dir"] = settings.warehouse
    elif settings.master.startswith("local"):
        # Spark's in-memory catalog makes its default database's folder, ./spark-warehouse, in the
        # working directory the first time a statement names a table: not where a scheduler runs.
        conf["spark.sql.warehouse.dir"] = os.path.join(_own_folder(), "spark-warehouse")
    conf.update(settings.conf)
    if derby is not None and "-Dderby.system.home=" not in conf[_DRIVER_OPTIONS]:
        conf[_DRIVER_OPTIONS] = f"{derby} {conf[_DRIVER_OPTIONS]}"  # (the user's own options keep it)
    if settings.master.startswith("local"):
        elsewhere = [str(conf.get(_DEFAULT_OPTIONS, "")), *(os.environ.get(name, "") for name in _OPTION_VARIABLES)]
        options = _with_local_jvm(conf.pop(_DRIVER_OPTIONS, ""), " ".join(elsewhere))
        if options:
            conf[_DRIVER_OPTIONS] = options
    matching = matching or versions.installed_pairing()
    packages = [matching.delta, matching.avro, *settings.packages]
    extra = conf.get("spark.jars.packages")
    if extra:
        packages.extend(p.strip() for p in extra.split(",") if p.strip())
    conf["spark.jars.packages"] = ",".join(dict.fromkeys(packages))
    if settings.s3_commits == "conditional":
        conf = logstore.with_log_store(conf)
    return conf


def get_spark(settings: SparkSettings | None = None, *, verbose: bool = False) -> SparkSession:
    """Return the active SparkSession, or start one configured for Delta.

    With a Spark Connect URL (the settings' ``remote``, or ``$SPARK_REMOTE``), a session on that
    server (:mod:`lakemerge.spark.remote`). An already running session (a notebook's, a test
    fixture's, a cluster job's) is reused as it is: it must have been started with Delta's jars
    and extension (``lakemerge conf`` prints the settings lakemerge would start it with).

    Raises:
        ConfigError: the installed Spark is not supported (before any JVM starts), the JVM did not
            start (a package that does not resolve, no Java), or the active session lacks Delta.
    """
    versions.installed_spark()  # (PySpark is there: its import below would fail without a word on what to do)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        checks.check_session(active)
        return active
    settings = settings or SparkSettings()
    url = remote.remote_url(settings)
    if url is not None:
        spark = remote.connect(url, settings)
        checks.check_session(spark)
        return spark
    if remote.client_only():
        raise ConfigError(
            "the installed PySpark is Spark Connect's client alone (pyspark-client), which starts no Spark here: "
            "give a Spark Connect server (--remote sc://HOST:PORT, [spark] remote, or SPARK_REMOTE), "
            "or install lakemerge[spark]"
        )
    log_file = settings.log_file or default_log_file()
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)

    conf = session_conf(settings)
    if not verbose:
        log_conf = _log_configuration(Path(log_file).parent)
        java_opts = " ".join(
            _quoted_option(o) for o in (f"-Dlog4j2.configurationFile={log_conf}", f"-Dlakemerge.log.file={log_file}")
        )
        previous = conf.get("spark.driver.extraJavaOptions")
        conf["spark.driver.extraJavaOptions"] = f"{previous} {java_opts}" if previous else java_opts

    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    if verbose:
        spark = builder.getOrCreate()
    else:
        offset = startup.log_offset(log_file)
        try:
            with _stderr_to(log_file):
                spark = builder.getOrCreate()
        except LakemergeError:
            raise
        except Exception as exc:
            reason = startup.diagnose(log_file, offset, conf["spark.jars.packages"], exc)
            if reason is None:
                raise
            raise reason from None
        backend(spark).quiet()
    checks.check_session(spark)
    return spark


def _log_configuration(folder: Path) -> Path:
    """The packaged log4j configuration as a file the JVM can read, written into ``folder`` (beside
    the log): the package itself may be a zip archive, whose members the JVM cannot open."""
    text = packaged.read_text("lakemerge.spark", "log4j2.properties")
    target = folder / "log4j2.properties"
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        staged = folder / f".log4j2.properties.{os.getpid()}"
        staged.write_text(text, encoding="utf-8")
        staged.replace(target)  # atomic: a JVM starting meanwhile reads the old file or the new one
    return target


@contextlib.contextmanager
def _stderr_to(log_file: str) -> Iterator[None]:
    """Point file descriptor 2 at the log while the JVM starts, so that the JVM (which inherits
    it) writes its dependency resolution and warnings there, not on the user's terminal."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(log_file, "ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
