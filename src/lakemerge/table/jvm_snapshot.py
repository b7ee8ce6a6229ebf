"""A Delta table's version read from Delta's own snapshot in a classic session's JVM
(:mod:`lakemerge.table.snapshot` says what a snapshot is).

Delta's snapshot is brought up to date by listing the table's log; its checksum (written beside
each commit) holds the version's size, its idempotent transactions and, for tables of few files
(up to 50 by default), their list with statistics: all read without a Spark job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakemerge.spark.jvm import jclass, scala_seq
from lakemerge.table.snapshot import ListedFile, Snapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: Delta's JVM class of a table's log (:func:`lakemerge.spark.jvm.jclass`).
DELTA_LOG = "org.apache.spark.sql.delta.DeltaLog"


def is_delta(spark: SparkSession, path: str) -> bool:
    """``DeltaTable.isDeltaTable``, without py4j's lookups."""
    return bool(jclass(spark, "io.delta.tables.DeltaTable").isDeltaTable(spark._jsparkSession, path))


def delta_log(spark: SparkSession, path: str) -> Any:
    """Delta's ``DeltaLog`` of the table at ``path`` (a JVM object)."""
    return jclass(spark, DELTA_LOG).forTable(spark._jsparkSession, path)


def commits(spark: SparkSession, path: str, first: int, last: int) -> list[dict[str, Any]] | None:
    """The commit metadata of versions ``first`` to ``last``, read from their commit files through
    Delta's log store (no Spark job); ``None`` when one of them cannot be read so (a commit not yet
    written to the log directory, a file cleaned up, an action this reader does not know)."""
    rows: list[dict[str, Any]] = []
    try:
        log = delta_log(spark, path)
        store, conf = log.store(), log.newDeltaHadoopConf()
        for version in range(first, last + 1):
            file = jclass(spark, "org.apache.hadoop.fs.Path")(log.logPath(), f"{version:020d}.json")
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


def checksum_transaction(snapshot: Any, app_id: str) -> int | None:
    """The version of the idempotent transaction ``app_id`` in ``snapshot`` (Delta's JVM snapshot;
    -1 when it has none), from the checksum Delta writes beside each commit with the table's
    transactions in it; ``None`` when the checksum does not list them (no checksum for that
    version, or a writer that leaves them out). Delta's own lookup (``snapshot.transactions``)
    reconstructs the snapshot's whole state first: a Spark job over the log, some 0.2-0.3 s per
    batch on a warm local session (bench/RESULTS.md)."""
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


class JvmSnapshot(Snapshot):
    """Delta's snapshot of a version (``jvm``), read through py4j."""

    def __init__(self, spark: SparkSession, jvm: Any) -> None:
        self.spark, self.jvm = spark, jvm

    @classmethod
    def latest(cls, spark: SparkSession, path: str) -> JvmSnapshot:
        """The table's latest version, its log listed now."""
        none = jclass(spark, "scala.Option").empty()
        return cls(spark, delta_log(spark, path).update(False, none, none))

    @property
    def version(self) -> int:
        return int(self.jvm.version())

    @property
    def table_id(self) -> str:
        return str(self.jvm.metadata().id())

    def properties(self) -> dict[str, str]:
        iterator = self.jvm.metadata().configuration().iterator()
        found: dict[str, str] = {}
        while iterator.hasNext():
            entry = iterator.next()
            found[str(entry._1())] = str(entry._2())
        return found

    def schema(self) -> StructType:
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(str(self.jvm.schema().json())))

    def partition_columns(self) -> tuple[str, ...]:
        found = []
        each = self.jvm.metadata().partitionColumns().iterator()
        while each.hasNext():
            found.append(str(each.next()))
        return tuple(found)

    def table_bytes(self) -> int | None:
        if self.version < 0:
            return 0
        found = self.jvm.checksumOpt()
        return int(found.get().tableSizeBytes()) if found.isDefined() else None

    def listed(self) -> Sequence[ListedFile] | None:
        """The checksum's list of the version's files; ``None`` when it lists none (no checksum,
        more files than Delta lists, a schema change in that commit) or a list that disagrees with
        its own file count (Delta drops such a list; a checksum from another writer may not)."""
        if self.version < 0:
            return None
        found = self.jvm.checksumOpt()
        if not found.isDefined():
            return None
        checksum = found.get()
        files = checksum.allFiles()
        if not files.isDefined() or int(files.get().size()) != int(checksum.numFiles()):
            return None
        listed = []
        each = files.get().iterator()
        while each.hasNext():
            add = each.next()
            stats = add.stats()
            listed.append(ListedFile(str(add.path()), int(add.size()), str(stats) if stats is not None else None, add))
        return listed

    def read_files(self, files: Sequence[ListedFile]) -> DataFrame:
        from pyspark.sql import DataFrame

        none = jclass(self.spark, "scala.Option").empty()
        chosen = scala_seq(self.spark, [f.action for f in files])
        return DataFrame(self.jvm.deltaLog().createDataFrame(self.jvm, chosen, False, none), self.spark)

    def transaction(self, app_id: str) -> int | None:
        return checksum_transaction(self.jvm, app_id)

    def transaction_state(self, app_id: str) -> int:
        found = self.jvm.transactions().get(app_id)
        return int(found.get()) if found.isDefined() else 0

    def file_bounds(self, column: str, *, limit: int) -> list[tuple[Any, Any, int]] | None:
        from pyspark.sql import functions as F
        from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame

        stats = ClassicFrame(self.jvm.withStats(), self.spark)
        bounds = {}
        for side in ("minValues", "maxValues"):
            found = [f for f in stats.schema["stats"].dataType.fields if f.name == side]  # type: ignore[attr-defined]
            fields = [f for f in found[0].dataType.fields if f.name.lower() == column.lower()] if found else []
            if not fields:
                return None
            bounds[side] = F.col(f"stats.{side}").getField(fields[0].name)
        rows = stats.select(bounds["minValues"], bounds["maxValues"], F.col("size")).limit(limit + 1).collect()
        if len(rows) > limit:
            return None
        return [(row[0], row[1], int(row[2])) for row in rows]
