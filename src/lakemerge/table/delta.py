"""Delta table I/O that a batch needs: existence, stored schema checks, and the commit record.

Each batch's commit carries, in Delta's ``userMetadata``, a JSON record::

    {"lakemerge": 1, "batch_id": "...", "table": "products",
     "metrics": {"rows_read": ..., "inserted": ..., ...},
     "files": [{"path": "file:/...", "size": 123, "modified": 1700000000000}, ...]}

That record is the ledger: files listed in a committed record are never applied again.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakemerge.errors import InputError, SchemaError, TableError
from lakemerge.results import AppliedFile
from lakemerge.spark.jvm import jclass, scala_seq
from lakemerge.spark.scoped import scoped_conf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructField, StructType

    from lakemerge.config.models import TableConfig

#: Delta's JVM class of a table's log (:func:`lakemerge.spark.jvm.jclass`).
DELTA_LOG = "org.apache.spark.sql.delta.DeltaLog"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
#: Delta transaction identifier shared by every lakemerge writer of a table. Each batch commits
#: with the next version of it, so two writers racing for the same batch number cannot both commit:
#: Delta skips or rejects the second (idempotent writes).
TXN_APP_ID = "lakemerge"
RECORD_VERSION = 1

# Widening casts allowed from the feed's type to the table's (PRODUCT.md §Semantics 7).
_WIDENS_TO = {
    "tinyint": {"smallint", "int", "bigint"},
    "smallint": {"int", "bigint"},
    "int": {"bigint"},
    "float": {"double"},
    "date": {"timestamp"},
}


#: Rows per file of what lakemerge appends beside a table (log rows, tombstones): files of about this
#: many rows, not one per shuffle partition.
ROWS_PER_FILE = 1_000_000


def files_for(rows: int) -> int:
    """How many files ``rows`` rows are written in (at least one): see :data:`ROWS_PER_FILE`."""
    return max(1, -(-rows // ROWS_PER_FILE))


def table_exists(spark: SparkSession, path: str) -> bool:
    """True when ``path`` holds a Delta table; an existing non-Delta directory is an error."""
    if is_delta(spark, path):
        return True
    hpath = jclass(spark, "org.apache.hadoop.fs.Path")(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if fs.exists(hpath) and fs.isFile(hpath):
        raise TableError(f"{path}: table path is a file, not a Delta table directory")
    if fs.exists(hpath):
        foreign = _foreign_file(fs, hpath)
        if foreign:
            raise TableError(
                f"{path}: directory exists and is not a Delta table (it holds {foreign}); refusing to write into it"
            )
    return False


def is_delta(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` holds a Delta table (``DeltaTable.isDeltaTable``, without py4j's lookups)."""
    return bool(jclass(spark, "io.delta.tables.DeltaTable").isDeltaTable(spark._jsparkSession, path))


def _foreign_file(fs: Any, directory: Any) -> str | None:
    """A file that no Delta writer would leave in a table directory, or None. Parquet data files
    (also under ``column=value`` folders) and hidden files are what a concurrent or crashed table
    creation leaves, and Delta ignores them."""
    for status in fs.listStatus(directory):
        name = str(status.getPath().getName())
        if name.startswith((".", "_")):
            continue
        if status.isDirectory():
            if "=" not in name:
                return str(status.getPath().toString())
            inner = _foreign_file(fs, status.getPath())
            if inner:
                return inner
        elif not name.endswith(".parquet"):
            return str(status.getPath().toString())
    return None


def conform(
    frame: DataFrame,
    stored: StructType,
    columns: Sequence[str],
    *,
    feed: str,
    date_to_timestamp: bool = False,
    table_widens: bool = False,
) -> DataFrame:
    """Match the batch's column types to the table's (PRODUCT.md §Semantics 7).

    A feed type narrower than the table's is cast up (int → bigint, float → double, and
    date → timestamp when ``date_to_timestamp``). A feed type wider than the table's widens the
    table's column, which Delta does in the batch's own commit when the table has
    ``delta.enableTypeWidening`` (``table_widens``). Anything else fails.

    ``stored``: the table's schema (in ``log`` mode, its merged view's).

    Raises:
        SchemaError: naming the column, both types and the feed.
    """
    from pyspark.sql import functions as F

    stored_types = {f.name.lower(): f.dataType for f in stored.fields}
    incoming = {f.name: f.dataType for f in frame.schema.fields}
    out = frame
    for name in columns:
        want = stored_types.get(name.lower())
        have = incoming[name]
        if want is None or want == have:
            continue
        have_s, want_s = have.simpleString(), want.simpleString()
        if have_s == "void" or _widens(have_s, want_s, date_to_timestamp):
            out = out.withColumn(name, F.col(f"`{name}`").cast(want))
            continue
        if _widens(want_s, have_s, False):
            if table_widens:
                continue
            raise SchemaError(
                f"{feed}: column '{name}' is {have_s.upper()} in the feed but {want_s.upper()} in the table; "
                "widening the table's column needs the table property delta.enableTypeWidening = true; "
                "nothing was applied"
            )
        raise SchemaError(
            f"{feed}: column '{name}' is {have_s.upper()} in the feed but {want_s.upper()} in the table; "
            "only widening (int → bigint, float → double) is allowed; nothing was applied"
        )
    return out


def _widens(narrow: str, wide: str, date_to_timestamp: bool) -> bool:
    if narrow == "date" and wide == "timestamp":
        return date_to_timestamp
    return wide in _WIDENS_TO.get(narrow, set())


def type_widening_enabled(spark: SparkSession, path: str) -> bool:
    """Whether the table allows Delta to widen column types (``delta.enableTypeWidening``).

    Read from the snapshot's metadata (no Spark job, unlike ``DESCRIBE DETAIL``)."""
    return str(table_properties(spark, path).get("delta.enableTypeWidening", "false")).lower() == "true"


def _snapshot(spark: SparkSession, path: str) -> Any:
    """The table's latest Delta snapshot (a JVM object), brought up to date."""
    delta_log = jclass(spark, DELTA_LOG).forTable(spark._jsparkSession, path)
    none = jclass(spark, "scala.Option").empty()
    return delta_log.update(False, none, none)


def table_properties(spark: SparkSession, path: str) -> dict[str, str]:
    """The table's properties, from its latest snapshot's metadata."""
    return _properties(_snapshot(spark, path))


def table_bytes(spark: SparkSession, path: str) -> int | None:
    """The bytes of the data files of the table's latest version, from the checksum Delta writes
    with each commit (no Spark job): 0 when there is no table, ``None`` when that version has no
    checksum."""
    snapshot = _snapshot(spark, path)
    if snapshot.version() < 0:
        return 0
    found = snapshot.checksumOpt()
    return int(found.get().tableSizeBytes()) if found.isDefined() else None


def file_key_bounds(spark: SparkSession, path: str, column: str) -> list[tuple[Any, Any, int]] | None:
    """Each data file of the table's latest version: the smallest and largest value of ``column``
    in its statistics (``None`` when it has none) and its size; read from Delta's log, never from
    the data. A table of few files (Delta keeps the list of a version's files, with their
    statistics, in the checksum it writes beside the commit: up to 50 files by default) is read from
    that checksum without a Spark job; else one small job over the snapshot's file list, whose
    parsed statistics Delta's own file skipping reuses. ``None`` when statistics cannot be trusted
    to bound the column: a type whose statistics Delta truncates or rounds (only integers,
    decimals and dates are kept), a column without statistics, a partition column, column mapping
    (statistics under physical names), or more than :data:`MAX_BOUNDED_FILES` files."""
    snapshot = _snapshot(spark, path)
    bounded = _bounded_field(snapshot, column)
    if bounded is None:
        return None
    listed = _checksum_files(snapshot)
    if listed is None:
        return _statistics_bounds(spark, snapshot, column)
    return _bounds_of([(size, stats) for _, size, stats in listed], bounded.name, bounded.dataType)


def _bounded_field(snapshot: Any, column: str) -> StructField | None:
    """The field of ``column`` in ``snapshot``'s schema when the statistics of its files bound its
    values (see :func:`file_key_bounds`), else ``None``."""
    from pyspark.sql import types as T

    if _properties(snapshot).get("delta.columnMapping.mode", "none") != "none":
        return None
    partitions = snapshot.metadata().partitionColumns().iterator()
    while partitions.hasNext():
        if str(partitions.next()).lower() == column.lower():
            return None
    schema = T.StructType.fromJson(json.loads(str(snapshot.schema().json())))
    fields = [f for f in schema.fields if f.name.lower() == column.lower()]
    if not fields or not isinstance(fields[0].dataType, (T.IntegralType, T.DecimalType, T.DateType)):
        return None
    return fields[0]


def _checksum_files(snapshot: Any) -> list[tuple[Any, int, str | None]] | None:
    """Each data file of ``snapshot`` (Delta's ``AddFile``), with its size and statistics (JSON),
    from the version's checksum; ``None`` when the checksum does not list the files (none written,
    or more files than Delta lists there)."""
    files = _listed_files(snapshot)
    if files is None:
        return None
    listed: list[tuple[Any, int, str | None]] = []
    each = files.iterator()
    while each.hasNext():
        add = each.next()
        stats = add.stats()
        listed.append((add, int(add.size()), str(stats) if stats is not None else None))
        if len(listed) > MAX_BOUNDED_FILES:
            return None
    return listed


def _bounds_of(listed: Sequence[tuple[int, str | None]], name: str, kind: Any) -> list[tuple[Any, Any, int]] | None:
    """Each file's bounds of column ``name`` (of type ``kind``) from its statistics as Delta writes
    them (JSON: numbers, and dates as ISO strings); ``None`` when no file has statistics of the
    column (it is not among the columns Delta collects them for, or there are no files to tell)."""
    import datetime
    import decimal

    from pyspark.sql import types as T

    def value(found: Any) -> Any:
        if found is None:
            return None
        if isinstance(kind, T.DateType):
            return datetime.date.fromisoformat(str(found))
        return found

    bounds: list[tuple[Any, Any, int]] = []
    known = False
    for size, stats in listed:
        parsed = json.loads(stats, parse_float=decimal.Decimal) if stats else {}
        low = value((parsed.get("minValues") or {}).get(name))
        high = value((parsed.get("maxValues") or {}).get(name))
        known = known or (low is not None and high is not None)
        bounds.append((low, high, size))
    if not known and any(stats for _, stats in listed):
        # Files have statistics, none of them of this column: Delta does not collect them for it.
        return None
    return bounds


def _statistics_bounds(spark: SparkSession, snapshot: Any, column: str) -> list[tuple[Any, Any, int]] | None:
    """:func:`file_key_bounds` by one Spark job over the snapshot's file list."""
    from pyspark.sql import functions as F
    from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame

    stats = ClassicFrame(snapshot.withStats(), spark)
    bounds = {}
    for side in ("minValues", "maxValues"):
        found = [f for f in stats.schema["stats"].dataType.fields if f.name == side]  # type: ignore[attr-defined]
        fields = [f for f in found[0].dataType.fields if f.name.lower() == column.lower()] if found else []
        if not fields:
            return None
        bounds[side] = F.col(f"stats.{side}").getField(fields[0].name)
    rows = stats.select(bounds["minValues"], bounds["maxValues"], F.col("size")).limit(MAX_BOUNDED_FILES + 1).collect()
    if len(rows) > MAX_BOUNDED_FILES:
        return None
    return [(row[0], row[1], int(row[2])) for row in rows]


#: :func:`file_key_bounds` gives up on tables of more files than this (a few MB of statistics).
MAX_BOUNDED_FILES = 100_000


def read_pinned(spark: SparkSession, path: str) -> DataFrame:
    """The table as of its latest version now, read by that version number.

    Spark refreshes every cached plan that reads a path's latest version when the path is written;
    a batch writes to paths its cached classification read (its tombstones, its log, its own
    commit), which would drop that classification and plan or compute it again. A read of a fixed
    version is a different relation, which those refreshes leave alone."""
    version = int(_snapshot(spark, path).version())
    return spark.read.format("delta").option("versionAsOf", version).load(path)


def read_listed(
    spark: SparkSession, path: str, *, within: tuple[str, Callable[[Any, Any], bool]] | None = None
) -> DataFrame | None:
    """The table as of its latest version now, read from the list of that version's files in the
    checksum Delta writes beside each commit (Delta lists them there for tables of fewer than 50
    files); ``None`` when the checksum does not list them: read the version with
    :func:`read_pinned` then.

    ``within``: (column, overlaps): leave out the files whose statistics bound ``column`` to values
    from ``low`` to ``high`` for which ``overlaps(low, high)`` is false, as Delta's file skipping
    would for a predicate that only such values can meet (a batch's key ranges), but without its
    Spark job over the file list. Files without such statistics are read.

    Reading a version through Delta reconstructs the version's state from its log first (a Spark
    job over the commits since the last checkpoint, and a cached frame of the result) when that
    version was not read before: a table that gains a version with every batch (a ``log`` table's
    change log) paid it on every batch, 0.1-0.25 s of a 1.3 s batch (bench/RESULTS.md). These
    files are read by Delta's own reader, through the file index Delta's MERGE uses for the files
    it touches. Like :func:`read_pinned`, a read of fixed files, which the batch's writes to
    ``path`` leave alone."""
    from pyspark.sql import DataFrame

    snapshot = _snapshot(spark, path)
    files = _listed_files(snapshot) if snapshot.version() >= 0 else None
    if files is None:
        return None
    if within is not None:
        files = _files_within(spark, snapshot, files, *within)
    none = jclass(spark, "scala.Option").empty()
    return DataFrame(snapshot.deltaLog().createDataFrame(snapshot, files, False, none), spark)


def _files_within(
    spark: SparkSession, snapshot: Any, files: Any, column: str, overlaps: Callable[[Any, Any], bool]
) -> Any:
    """``files`` (a Scala sequence of ``snapshot``'s ``AddFile``) but those whose statistics bound
    ``column`` to values that ``overlaps`` refuses (see :func:`read_listed`); ``files`` itself when
    the statistics cannot bound the column or leave out no file."""
    bounded = _bounded_field(snapshot, column)
    listed = _checksum_files(snapshot) if bounded is not None else None
    if bounded is None or listed is None:
        return files
    bounds = _bounds_of([(size, stats) for _, size, stats in listed], bounded.name, bounded.dataType)
    if bounds is None:
        return files
    kept = [
        add
        for (add, _, _), (low, high, _) in zip(listed, bounds, strict=True)
        if low is None or high is None or overlaps(low, high)
    ]
    return files if len(kept) == len(listed) else scala_seq(spark, kept)


def _listed_files(snapshot: Any) -> Any | None:
    """The data files (a Scala sequence of Delta's ``AddFile``) of ``snapshot``'s version as its
    checksum lists them; ``None`` when it lists none (no checksum, more files than Delta lists, a
    schema change in that commit) or a list that disagrees with its own file count (Delta drops
    such a list; a checksum from another writer may not)."""
    found = snapshot.checksumOpt()
    if not found.isDefined():
        return None
    checksum = found.get()
    files = checksum.allFiles()
    if not files.isDefined() or int(files.get().size()) != int(checksum.numFiles()):
        return None
    return files.get()


def _properties(snapshot: Any) -> dict[str, str]:
    configuration = snapshot.metadata().configuration()
    iterator = configuration.iterator()
    found: dict[str, str] = {}
    while iterator.hasNext():
        entry = iterator.next()
        found[str(entry._1())] = str(entry._2())
    return found


@contextlib.contextmanager
def commit_record(
    spark: SparkSession, record: dict[str, Any], *, txn_version: int | None, app_id: str = TXN_APP_ID
) -> Iterator[None]:
    """Attach ``record`` to the Delta commit made inside the block, as userMetadata, and (unless
    ``txn_version`` is None) make the commit idempotent under lakemerge's transaction identifier."""
    settings = {_USER_METADATA: record_metadata(record)}
    if txn_version is not None:
        settings.update({_TXN_APP_ID: app_id, _TXN_VERSION: str(txn_version)})
    with scoped_conf(spark, settings):
        yield


def record_metadata(record: dict[str, Any]) -> str:
    """``record`` as a commit's userMetadata (the JSON that :func:`parse_record` reads back)."""
    return json.dumps({"lakemerge": RECORD_VERSION, **record}, separators=(",", ":"))


def txn_version(spark: SparkSession, path: str, app_id: str = TXN_APP_ID) -> int:
    """The last batch number committed to the table under lakemerge's transaction identifier
    (0 for a new table). Read from Delta's snapshot state, which keeps it across log cleanup."""
    snapshot = _snapshot(spark, path)
    listed = checksum_txn_version(snapshot, app_id)
    if listed is not None:
        return max(listed, 0)
    found = snapshot.transactions().get(app_id)
    return int(found.get()) if found.isDefined() else 0


def checksum_txn_version(snapshot: Any, app_id: str) -> int | None:
    """The version of the idempotent transaction ``app_id`` in ``snapshot`` (a JVM Delta snapshot;
    -1 when it has none), from the checksum Delta writes beside each commit with the table's
    transactions in it; ``None`` when the checksum does not list them (no checksum for that
    version, or a writer that leaves them out). Delta's own lookup
    (``snapshot.transactions``) reconstructs the snapshot's whole state first: a Spark job over
    the log, some 0.2-0.3 s per batch on a warm local session (bench/RESULTS.md)."""
    found = snapshot.checksumOpt()
    if not found.isDefined():
        return None
    listed = found.get().setTransactions()
    if not listed.isDefined():
        return None
    each = listed.get().iterator()
    while each.hasNext():
        txn = each.next()
        if str(txn.appId()) == app_id:
            return int(txn.version())
    return -1


def parse_record(user_metadata: str | None) -> dict[str, Any] | None:
    """The lakemerge record in a commit's userMetadata, or ``None`` for other commits."""
    if not user_metadata:
        return None
    try:
        record = json.loads(user_metadata)
    except ValueError:
        return None
    if not isinstance(record, dict) or "lakemerge" not in record:
        return None
    return record


def history_rows(spark: SparkSession, path: str, limit: int | None = None) -> list[Any]:
    """Delta's history of ``path``, newest first (commit metadata only; no table data)."""
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, path)
    frame = table.history(limit) if limit else table.history()
    return list(
        frame.selectExpr(
            "version", "unix_millis(timestamp) AS ts_ms", "operation", "operationMetrics", "userMetadata"
        ).collect()
    )


def commit_rows(spark: SparkSession, path: str, first: int, last: int) -> list[dict[str, Any]] | None:
    """The commit metadata of versions ``first`` to ``last`` (version, ``userMetadata`` and
    ``operationMetrics``, like :func:`history_rows`' rows), read from their commit files through
    Delta's log store: no Spark job, where Delta's history costs one per call. ``None`` when one of
    them cannot be read so (a commit not yet written to the log directory, a file cleaned up, an
    action this reader does not know): the caller reads the history instead."""
    rows: list[dict[str, Any]] = []
    try:
        delta_log = jclass(spark, DELTA_LOG).forTable(spark._jsparkSession, path)
        store, conf = delta_log.store(), delta_log.newDeltaHadoopConf()
        for version in range(first, last + 1):
            file = jclass(spark, "org.apache.hadoop.fs.Path")(delta_log.logPath(), f"{version:020d}.json")
            lines = store.read(file, conf).iterator()
            info: dict[str, Any] | None = None
            while lines.hasNext():
                action = json.loads(lines.next())
                if isinstance(action, dict) and "commitInfo" in action:
                    info = action["commitInfo"]
                    break
            if not isinstance(info, dict):
                return None
            metrics = info.get("operationMetrics") or {}
            rows.append(
                {
                    "version": version,
                    "userMetadata": info.get("userMetadata"),
                    "operationMetrics": {str(k): str(v) for k, v in metrics.items()},
                }
            )
    except Exception:  # any failure: read Delta's history instead
        return None
    return rows


@dataclass
class Ledger:
    """What the table's history says lakemerge committed (PRODUCT.md §Semantics 8).

    Attributes:
        files: every file recorded by a committed batch: path → (file as applied, version).
        batch_ids: the ids of the batches whose commits the table's content still holds.
        snapshots: per feed index, the position of the last full snapshot applied (§Semantics 5).
        last_batch: the greatest batch number a record in the history carries (rolled-back
            batches included: Delta's transaction state keeps their numbers too), or ``None``
            when the history holds no batch record (a new table, or log cleanup removed them all).
    """

    files: dict[str, tuple[AppliedFile, int]] = field(default_factory=dict)
    batch_ids: set[str] = field(default_factory=set)
    snapshots: dict[int, list[Any]] = field(default_factory=dict)
    last_batch: int | None = None


def state(spark: SparkSession, path: str, *, log_path: str | None = None) -> tuple[bool, Ledger]:
    """Whether the table (or its change log at ``log_path``, for ``log``-mode tables) exists, and
    the ledger of the batches committed to either. The log's snapshot positions are the later ones."""
    exists = table_exists(spark, path)
    found = ledger(spark, path) if exists else Ledger()
    if log_path is None or not table_exists(spark, log_path):
        return exists, found
    logged = ledger(spark, log_path)
    numbers = [n for n in (found.last_batch, logged.last_batch) if n is not None]
    return True, Ledger(
        files={**found.files, **logged.files},
        batch_ids=found.batch_ids | logged.batch_ids,
        snapshots={**found.snapshots, **logged.snapshots},
        last_batch=max(numbers) if numbers else None,
    )


def last_batch(spark: SparkSession, path: str, *, log_path: str | None = None, known: Ledger | None = None) -> int:
    """The last batch number committed to the table or to its change log (0 when neither exists).

    With ``known`` (the ledger :func:`state` just read), the number comes from its records when
    they carry one, which spares the Spark job that Delta's transaction state costs; the batch
    commit's idempotent transaction still settles any race."""
    if known is not None and known.last_batch is not None:
        return known.last_batch
    found = txn_version(spark, path) if table_exists(spark, path) else 0
    if log_path is not None and table_exists(spark, log_path):
        found = max(found, txn_version(spark, log_path))
    return found


def ledger(spark: SparkSession, path: str) -> Ledger:
    """Walk the table's history (commit metadata only) into a :class:`Ledger`.

    A rollback undoes the batches of the versions after its target: their ids and snapshot
    positions are forgotten (the table no longer holds their changes), and, when recorded with
    ``reapply``, their files too, so that they are pending again.

    The walk is kept per table for the life of the process, and the next call reads only the
    commits made since (Delta's history is append-only): a table applied to every few minutes
    gathers thousands of commits, and reading all of them for every batch would make a batch's
    cost grow with the table's age. A table recreated at the same path (another Delta table id),
    or history that does not continue the walk, is walked again from its start."""
    snapshot = _snapshot(spark, path)
    latest, table_id = int(snapshot.version()), str(snapshot.metadata().id())
    with _WALKS_LOCK:
        kept = _WALKS.get(path)
    walk: _Walk | None = None
    if kept is not None and kept.table_id == table_id and kept.version <= latest:
        walk = kept.copy()
        if latest > walk.version:
            fresh = commit_rows(spark, path, walk.version + 1, latest)
            if fresh is None:
                # A few more than the versions known to be new: a commit may land meanwhile.
                rows = history_rows(spark, path, limit=latest - walk.version + _HISTORY_SLACK)
                fresh = sorted((r for r in rows if int(r["version"]) > walk.version), key=lambda r: int(r["version"]))
            numbers = [int(r["version"]) for r in fresh]
            expected = list(range(walk.version + 1, walk.version + 1 + len(numbers)))
            if not numbers or numbers != expected or numbers[-1] < latest:
                walk = None  # not a continuation of the walk: walk again
            else:
                for row in fresh:
                    walk.add(row)
    if walk is None:
        walk = _Walk(table_id=table_id)
        for row in reversed(history_rows(spark, path)):
            walk.add(row)
    with _WALKS_LOCK:
        _WALKS[path] = walk
    return walk.ledger()


#: Extra history rows read beyond the versions known to be new (commits landing during the read).
_HISTORY_SLACK = 4


@dataclass
class _Walk:
    """The ledger walk's state after the commits up to ``version`` (-1: none), in version order."""

    table_id: str
    version: int = -1
    files: dict[str, tuple[AppliedFile, int]] = field(default_factory=dict)
    batches: dict[str, int] = field(default_factory=dict)
    snapshot_versions: dict[int, list[tuple[int, list[Any]]]] = field(default_factory=dict)
    last_batch: int | None = None

    def copy(self) -> _Walk:
        return _Walk(
            table_id=self.table_id,
            version=self.version,
            files=dict(self.files),
            batches=dict(self.batches),
            snapshot_versions={feed: list(items) for feed, items in self.snapshot_versions.items()},
            last_batch=self.last_batch,
        )

    def add(self, row: Any) -> None:
        """Fold one history row (the next version) into the walk."""
        version = int(row["version"])
        self.version = max(self.version, version)
        record = parse_record(row["userMetadata"])
        if record is None:
            return
        rollback = record.get("rollback")
        if rollback:
            undone = int(rollback["to_version"])
            if rollback.get("reapply"):
                self.files = {p: (f, v) for p, (f, v) in self.files.items() if v <= undone}
            self.batches = {i: v for i, v in self.batches.items() if v <= undone}
            self.snapshot_versions = {
                feed: [(v, pos) for v, pos in items if v <= undone] for feed, items in self.snapshot_versions.items()
            }
        for item in record.get("files", []):
            self.files[item["path"]] = (AppliedFile(**item), version)
        if record.get("batch_id"):
            self.batches[str(record["batch_id"])] = version
            if isinstance(record.get("txn_version"), int):
                self.last_batch = max(self.last_batch or 0, record["txn_version"])
        for feed, position in (record.get("snapshots") or {}).items():
            self.snapshot_versions.setdefault(int(feed), []).append((version, position))

    def ledger(self) -> Ledger:
        return Ledger(
            files=dict(self.files),
            batch_ids=set(self.batches),
            snapshots={feed: items[-1][1] for feed, items in self.snapshot_versions.items() if items},
            last_batch=self.last_batch,
        )


_WALKS: dict[str, _Walk] = {}
_WALKS_LOCK = threading.Lock()


def applied_files(spark: SparkSession, path: str) -> dict[str, tuple[AppliedFile, int]]:
    """Every file recorded by a committed batch: path → (file as applied, version) (see :func:`ledger`)."""
    return ledger(spark, path).files


def check_unchanged(
    ledger: dict[str, tuple[AppliedFile, int]], path: str, size: int, modified: int, *, archived: bool = False
) -> bool:
    """True if ``path`` was applied before; raise if it was applied with another size or time.

    With ``archived`` (the feed moves applied files away), a file at an applied path but with
    another size or time is new content that arrived under a recurring name, not an error.

    Raises:
        InputError: the file changed after it was applied.
    """
    if path not in ledger:
        return False
    applied, version = ledger[path]
    if applied.size != size or applied.modified != modified:
        if archived:
            return False
        raise InputError(
            f"file was applied in table version {version} (size {applied.size}) and has changed since "
            f"(size {size}); a changed file is never re-applied silently: give the new content a new name",
            path=path,
        )
    return True


def find_commit(spark: SparkSession, path: str, batch_id: str) -> tuple[int, dict[str, str]] | None:
    """The version and Delta operation metrics of the commit recorded for ``batch_id``, or ``None``
    when Delta skipped the write because a concurrent writer committed the same batch number.

    The batch's commit is almost always the newest: its commit file is read first (no Spark job),
    then the newest few commits of the history, and the newest 50 only when it is not there either
    (concurrent writers, or a skipped write)."""
    latest = int(_snapshot(spark, path).version())
    for row in commit_rows(spark, path, latest, latest) or []:
        record = parse_record(row["userMetadata"])
        if record and record.get("batch_id") == batch_id:
            return latest, dict(row["operationMetrics"])
    for limit in (_FIND_FIRST, 50):
        for row in history_rows(spark, path, limit=limit):
            record = parse_record(row["userMetadata"])
            if record and record.get("batch_id") == batch_id:
                return int(row["version"]), dict(row["operationMetrics"] or {})
    return None


#: History rows :func:`find_commit` reads first.
_FIND_FIRST = 3


def create_table(frame: DataFrame, table: TableConfig) -> None:
    """Write ``frame`` as the table's first commit (partitioned, and with deletion vectors enabled
    for ``deletion_vectors`` tables). Call inside :func:`commit_record`."""
    writer = frame.write.format("delta").mode("append")
    if table.write_mode == "deletion_vectors":
        writer = writer.option("delta.enableDeletionVectors", "true")
    if table.partition_by:
        writer = writer.partitionBy(*table.partition_by)
    writer.save(table.path)


def append_rows(frame: DataFrame, table: TableConfig) -> None:
    """Append ``frame`` to the existing table, adding its new columns (Delta fills the table's
    columns it lacks with nulls). Call inside :func:`commit_record`."""
    frame.write.format("delta").mode("append").option("mergeSchema", "true").save(table.path)


def record_only(spark: SparkSession, path: str, txn_version: int) -> None:
    """A metadata-only commit recording a batch that writes no row (Delta would make no commit for
    an empty MERGE). It sets ``lakemerge.batch`` to the batch number, so that two such commits
    racing conflict in Delta. Call inside :func:`commit_record`."""
    quoted = path.replace("`", "``")
    spark.sql(f"ALTER TABLE delta.`{quoted}` SET TBLPROPERTIES ('lakemerge.batch' = '{txn_version}')")
