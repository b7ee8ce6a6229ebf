"""A Delta transaction over the data files a batch touches, committed without Delta's MERGE.

Delta's MERGE joins its source with the table to find the files holding matched rows, then
rewrites them (with deletion vectors it writes the changed rows, then joins again to mark the old
ones). A lakemerge batch has joined each change with its key's stored row already, to classify it,
and kept that row's data file and row index: the files to touch are known before anything is
written. So the batch opens a transaction on the very snapshot it classified against, writes what
it knows (:mod:`lakemerge.write.direct` says what), and commits with its record:

- new data files through the transaction's own writer (the table's partitioning, column mapping,
  statistics and constraints, as any Delta write);
- the touched files removed, or given a deletion vector marking the rows replaced (built from the
  row indexes by Delta's own bitmap writer: no read of the table), their statistics taken from the
  files the version's checksum lists (no read of the table's log either, where they allow it);
- lakemerge's idempotent transaction identifier at the batch number, as every batch commits it.

Delta checks the commit against every commit since that snapshot, as it checks a MERGE: the
transaction reads the whole table, so a concurrent change of its data fails the commit. The
commit is a ``MERGE`` in the table's history, with a MERGE's operation metrics.

Driven through Delta's JVM classes as delta-spark 4.4 has them (``OptimisticTransaction``,
``DMLWithDeletionVectorsHelper``, ``DeletionVectorBitmapGenerator``, ``DeltaOperations.Merge``):
:func:`supported` checks their shapes once per Spark application (and that
``spark.lakemerge.directWrite`` is not ``false``); batches run a MERGE when they are not there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakemerge.errors import AccountingError
from lakemerge.spark.backends import backend
from lakemerge.spark.jvm import jclass, scala_seq
from lakemerge.spark.scoped import scoped_conf
from lakemerge.spark.tail import in_tail
from lakemerge.table.ledger import USER_METADATA
from lakemerge.table.snapshot import Snapshot
from lakemerge.table.transaction import committed_version

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: Session setting that turns writes without MERGE off (``false``): every batch then runs a MERGE.
ENABLED_CONF = "spark.lakemerge.directWrite"

_DELTA = "org.apache.spark.sql.delta"
_HELPER = f"{_DELTA}.commands.DMLWithDeletionVectorsHelper"
_BITMAPS = f"{_DELTA}.commands.DeletionVectorBitmapGenerator"
_MERGE = f"{_DELTA}.DeltaOperations$Merge"
_checked: dict[str, bool] = {}


def supported(spark: SparkSession) -> bool:
    """Whether batches can commit through :func:`open_on` in this session."""
    if (spark.conf.get(ENABLED_CONF, "true") or "true").strip().lower() == "false":
        return False
    if not backend(spark).jvm:
        return False  # (Delta's transaction is driven in the session's JVM)
    key = str(spark.sparkContext.applicationId)
    if key not in _checked:
        _checked[key] = _shapes_match(spark)
    return _checked[key]


def _shapes_match(spark: SparkSession) -> bool:
    jvm: Any = spark.sparkContext._jvm
    wanted = {
        _HELPER: {"generateCandidateFileMap": 2, "getTouchedFile": 3, "findFilesWithMatchingRows": 3},
        _BITMAPS: {"buildRowIndexSetsForFilesMatchingCondition": 8},
        f"{_DELTA}.OptimisticTransaction": {"writeFiles": 1, "trackFilesRead": 1, "registerSQLMetrics": 2},
        f"{_DELTA}.DeltaLog": {"startTransaction": 2, "createDataFrame": 4},
        f"{_DELTA}.commands.TouchedFileWithDV": {
            "fileLogEntry": 0,
            "newDeletionVector": 0,
            "isFullyReplaced": 0,
            "numberOfModifiedRows": 0,
        },
        f"{_DELTA}.actions.AddFile": {"removeRows": 3, "removeWithTimestamp": 2, "numDeletedRecords": 0},
    }
    try:
        utils = jvm.org.apache.spark.util.Utils
        for name, methods in wanted.items():
            found = {
                (m.getName(), len(m.getParameterTypes())) for m in utils.classForName(name, True, False).getMethods()
            }
            if any((method, arity) not in found for method, arity in methods.items()):
                return False
        merge = utils.classForName(_MERGE, True, False)
        return 7 in [len(c.getParameterTypes()) for c in merge.getConstructors()]
    except Exception:
        return False


class Direct:
    """An open transaction on one snapshot of a table, over the files a batch touches."""

    def __init__(self, spark: SparkSession, txn: Any, touched: Any) -> None:
        self.spark, self.txn, self.touched = spark, txn, touched
        self.actions: list[Any] = []  # Scala sequences of Delta actions
        self.written: set[int] = set()  # the positions in ``actions`` of new data files
        self.started = time.monotonic()

    def read_touched(self) -> DataFrame:
        """The rows of the touched files as the snapshot holds them (deletion vectors applied)."""
        from pyspark.sql import DataFrame

        none = jclass(self.spark, "scala.Option").empty()
        frame = self.txn.deltaLog().createDataFrame(self.txn.snapshot(), self.touched, False, none)
        return DataFrame(frame, self.spark)

    def write(self, rows: DataFrame, *, then: DataFrame | None = None) -> None:
        """Write ``rows`` (the table's columns, in its order) as new data files of the commit; with
        ``then``, those rows too, in a write of their own whose tasks run in the idle tail of the
        first's (:func:`lakemerge.spark.tail.in_tail`: for a first write of uneven tasks). That
        write goes through a transaction of its own on the same snapshot, never committed: Delta's
        transaction keeps state of its writes (metrics, post-commit hooks) that two threads must
        not change at once; its files are this commit's."""
        if then is None:
            written = [self.txn.writeFiles(rows._jdf)]
        else:
            option = jclass(self.spark, "scala.Option")
            beside = self.txn.deltaLog().startTransaction(option.empty(), option.apply(self.txn.snapshot()))
            written = list(
                in_tail(self.spark, lambda: self.txn.writeFiles(rows._jdf), lambda: beside.writeFiles(then._jdf))
            )
        for files in written:
            self.written.add(len(self.actions))
            self.actions.append(files)

    def remove_touched(self) -> None:
        """Remove the touched files in the commit."""
        now = int(time.time() * 1000)
        each = self.touched.iterator()
        removed = []
        while each.hasNext():
            removed.append(each.next().removeWithTimestamp(now, True))
        self.actions.append(scala_seq(self.spark, removed))

    def mark_rows(self, rows: DataFrame, *, file: Column, row: Column) -> dict[str, int]:
        """Give each touched file a deletion vector marking its rows in ``rows`` (``file``: the
        row's data file as Spark names it; ``row``: its row index there); Delta's counts of what it
        changed (``numModifiedRows``, ``numRemovedFiles``, ``numDeletionVectors…``)."""
        session: Any = self.spark._jsparkSession
        option = jclass(self.spark, "scala.Option")
        true = jclass(self.spark, "org.apache.spark.sql.catalyst.expressions.Literal").TrueLiteral()
        found = jclass(self.spark, _BITMAPS).buildRowIndexSetsForFilesMatchingCondition(
            session, self.txn, True, rows._jdf, self.touched, true, option.apply(file._jc), option.apply(row._jc)
        )
        helper = jclass(self.spark, _HELPER)
        by_name = helper.generateCandidateFileMap(self.txn.deltaLog().dataPath(), self.touched)
        files = helper.findFilesWithMatchingRows(self.txn, by_name, found)
        marked = _marked(self.spark, files)
        if marked is not None:
            self.actions.append(marked[0])
            return marked[1]
        prefix = jclass(self.spark, f"{_DELTA}.stats.StatsCollectionUtils").getDataSkippingStringPrefixLength(
            session, self.txn.metadata()
        )
        done = helper.processUnmodifiedData(session, files, self.txn.snapshot(), prefix)
        self.actions.append(done._1())
        counts = done._2().iterator()
        figures: dict[str, int] = {}
        while counts.hasNext():
            entry = counts.next()
            figures[str(entry._1())] = int(entry._2())
        return figures

    def file_figures(self) -> tuple[int, int, int]:
        """The data files the commit adds (new files, not files given a deletion vector) and their
        bytes, and the bytes of the files it removes for good."""
        added = added_bytes = 0
        removed: dict[str, int] = {}
        kept: set[str] = set()
        for index, actions in enumerate(self.actions):
            each = actions.iterator()
            while each.hasNext():
                action = each.next()
                kind = action.getClass().getSimpleName()
                if kind == "AddFile" and index in self.written:
                    added, added_bytes = added + 1, added_bytes + int(action.size())
                elif kind == "AddFile":
                    kept.add(str(action.path()))
                elif kind == "RemoveFile":
                    size = action.size()
                    removed[str(action.path())] = int(size.get()) if size.isDefined() else 0
        return added, added_bytes, sum(size for path, size in removed.items() if path not in kept)

    def commit(self, *, app_id: str, txn_version: int, metrics: Mapping[str, int], record: str) -> int:
        """Commit the files written and removed, with lakemerge's transaction identifier at
        ``txn_version``, a MERGE's operation ``metrics`` and the batch's ``record`` as the commit's
        userMetadata (set for this call only: the session may be writing elsewhere meanwhile); the
        version committed."""
        spark = self.spark
        option = jclass(spark, "scala.Option")
        none = option.empty()
        now = jclass(spark, "java.lang.Long")(int(time.time() * 1000))
        identifier = jclass(spark, f"{_DELTA}.actions.SetTransaction")(app_id, txn_version, option.apply(now))
        actions = scala_seq(spark, [identifier])
        for written in self.actions:
            actions = actions.concat(written)
        empty = scala_seq(spark, [])
        operation = jclass(spark, _MERGE)(none, none, none, none, empty, empty, empty)
        figures = {**metrics, "executionTimeMs": int((time.monotonic() - self.started) * 1000)}
        self.txn.registerSQLMetrics(spark._jsparkSession, _sql_metrics(spark, figures))
        with scoped_conf(spark, {USER_METADATA: record}):
            return int(self.txn.commit(actions, operation))


def open_on(
    spark: SparkSession, version: Snapshot, touched: Sequence[str], *, app_id: str, txn_version: int
) -> Direct | None:
    """A transaction on ``version`` (Delta's snapshot in this session's JVM) over the data files ``touched`` (paths as
    Spark's ``_metadata.file_path`` gives them), reading the whole table; ``None`` when the table
    already holds ``txn_version`` of ``app_id`` (a concurrent writer committed this batch number).

    Raises:
        AccountingError: a touched file is not in the snapshot (nothing is written)."""
    snapshot = version.jvm
    option = jclass(spark, "scala.Option")
    txn = snapshot.deltaLog().startTransaction(option.empty(), option.apply(snapshot))
    if committed_version(txn, app_id) >= txn_version:
        return None
    txn.readWholeTable()
    listed = version.listed()
    files = txn.filterFiles() if listed is None else scala_seq(spark, [f.action for f in listed])
    helper = jclass(spark, _HELPER)
    data_path = snapshot.deltaLog().dataPath()
    by_name = helper.generateCandidateFileMap(data_path, files)
    found = []
    for path in touched:
        try:
            found.append(helper.getTouchedFile(data_path, path, by_name))
        except Exception:
            raise AccountingError(
                f"internal error: the batch's stored row in {path} is in no file of the table's version "
                f"{snapshot.version()}; nothing was committed"
            ) from None
    chosen = scala_seq(spark, found)
    txn.trackFilesRead(chosen)
    return Direct(spark, txn, chosen)


def _marked(spark: SparkSession, files: Any) -> tuple[Any, dict[str, int]] | None:
    """The actions and counts Delta's ``processUnmodifiedData`` gives for ``files`` (Delta's
    ``TouchedFileWithDV``: a touched file and its new deletion vector), built from the statistics
    the files carry (the version's checksum lists them) rather than by joining them with the
    snapshot's whole file state, which is a Spark job reading the table's log. ``None`` when some
    file's statistics are not widened in place (:func:`widened_in_place`), or there are more than
    :data:`MARKED_FILES` files: Delta's own then serves.

    Each file whose rows are all replaced is removed; each other file is removed and added again
    with its new deletion vector and its statistics' bounds marked wide, as Delta does."""
    if int(files.size()) > MARKED_FILES:
        return None
    now = int(time.time() * 1000)
    fully: list[Any] = []
    added: list[Any] = []
    removed: list[Any] = []
    figures = dict.fromkeys(_VECTOR_FIGURES, 0)
    each = files.iterator()
    while each.hasNext():
        touched = each.next()
        entry = touched.fileLogEntry()
        stats = entry.stats()
        had_vector = entry.deletionVector() is not None
        if not widened_in_place(None if stats is None else str(stats), int(entry.numDeletedRecords())):
            return None
        figures["numModifiedRows"] += int(touched.numberOfModifiedRows())
        if touched.isFullyReplaced():
            fully.append(entry.removeWithTimestamp(now, True))
            figures["numRemovedFiles"] += 1
            figures["numDeletionVectorsRemoved"] += int(had_vector)
            continue
        pair = entry.removeRows(touched.newDeletionVector(), True, True)
        added.append(pair._1())
        removed.append(pair._2())
        figures["numDeletionVectorsUpdated" if had_vector else "numDeletionVectorsAdded"] += 1
    return scala_seq(spark, [*fully, *added, *removed]), figures


#: The most touched files :func:`_marked` builds the actions of. Each file takes about ten calls
#: into the JVM (0.15-0.3 ms each here), where Delta's own join with the log's file state is one
#: Spark job (about 0.3 s on the benchmark's SF1 table): beyond this many files that job is cheaper.
MARKED_FILES = 128

#: The counts :func:`_marked` returns, as Delta's ``processUnmodifiedData`` names them.
_VECTOR_FIGURES = (
    "numModifiedRows",
    "numRemovedFiles",
    "numDeletionVectorsAdded",
    "numDeletionVectorsRemoved",
    "numDeletionVectorsUpdated",
)


def widened_in_place(stats: str | None, deleted: int) -> bool:
    """Whether a data file's statistics ``stats`` (Delta's JSON), once the file gets a new deletion
    vector, are what Delta makes of them by setting ``tightBounds`` to false alone: they count the
    file's records, and none of its null counts must change. Delta keeps every null count but
    those of a column all null under tight bounds, which it sets to the physical count of records;
    that differs from the count it held only where the file's current deletion vector already
    hides rows (``deleted`` of them)."""
    if not stats:
        return False
    parsed = json.loads(stats)
    records = parsed.get("numRecords") if isinstance(parsed, dict) else None
    if not isinstance(records, int) or isinstance(records, bool):
        return False
    if deleted == 0 or parsed.get("tightBounds") is not True:
        return True
    return all(count != records - deleted for count in _counts(parsed.get("nullCount")))


def _counts(found: Any) -> list[Any]:
    """The leaf values of a statistics field (a nested JSON object of counts)."""
    if isinstance(found, dict):
        return [count for value in found.values() for count in _counts(value)]
    return [found]


def _sql_metrics(spark: SparkSession, figures: Mapping[str, int]) -> Any:
    """``figures`` as a Scala map of Spark SQL metrics, as Delta's commands register them."""
    context = spark._jsparkSession.sparkContext()
    metrics = jclass(spark, "java.util.HashMap")()
    for name, value in figures.items():
        metric = jclass(spark, "org.apache.spark.sql.execution.metric.SQLMetrics").createMetric(context, name)
        metric.set(int(value))
        metrics.put(name, metric)
    return jclass(spark, "org.apache.spark.api.python.PythonUtils").toScalaMap(metrics)


def check(found: Mapping[str, int], expected: Mapping[str, int]) -> None:
    """Raise AccountingError unless what the write found (``found``) is what the batch counted.

    Raises:
        AccountingError: naming each count that differs; nothing is committed."""
    differ = {name: (found.get(name, 0), value) for name, value in expected.items() if found.get(name, 0) != value}
    if differ:
        shown = ", ".join(
            f"{name} {got} where the batch counted {want}" for name, (got, want) in sorted(differ.items())
        )
        raise AccountingError(f"internal error: the write found {shown}; nothing was committed")
