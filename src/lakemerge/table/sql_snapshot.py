"""A Delta table's version read through SQL alone, for a Spark Connect session
(:mod:`lakemerge.table.snapshot` says what a snapshot is).

``DESCRIBE HISTORY ... LIMIT 1`` gives the latest version, ``DESCRIBE DETAIL`` the table's id,
properties, partition columns and size, and an analysis of a read at that version its schema.
No checksum is read, so no file list is offered: a batch reads the version through Delta, whose
file skipping stands in for lakemerge's own. The idempotent transactions come from the log's
commit files and checkpoints, read by one Spark job, only where the history's own records do not
tell (:func:`lakemerge.table.ledger.last_batch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakemerge.columns import delta_path
from lakemerge.errors import TableError, first_line
from lakemerge.table.snapshot import ListedFile, Snapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.types import StructType

#: What Delta (and Spark) say of a path that holds no Delta table.
_NOT_A_TABLE = (
    "DELTA_MISSING_DELTA_TABLE",
    "DELTA_TABLE_NOT_FOUND",
    "DELTA_PATH_DOES_NOT_EXIST",
    "is not a Delta table",
    "PATH_NOT_FOUND",
    "doesn't exist",
    "does not exist",
)


def _no_table(exc: BaseException) -> bool:
    text = str(exc)
    return any(sign in text for sign in _NOT_A_TABLE)


def is_delta(spark: SparkSession, path: str) -> bool:
    """Whether ``DESCRIBE DETAIL`` finds a Delta table at ``path``.

    Raises:
        TableError: the server cannot tell (the path cannot be read, say).
    """
    return _detail(spark, path) is not None


def _detail(spark: SparkSession, path: str) -> Row | None:
    try:
        rows = spark.sql(f"DESCRIBE DETAIL {delta_path(path)}").collect()
    except Exception as exc:
        if _no_table(exc):
            return None
        raise TableError(f"{path}: cannot read the table's details: {first_line(exc)}") from None
    if not rows or str(rows[0]["format"]).lower() != "delta":
        return None
    return rows[0]


class SqlSnapshot(Snapshot):
    """A version as ``DESCRIBE HISTORY`` and ``DESCRIBE DETAIL`` tell it."""

    def __init__(self, spark: SparkSession, path: str, version: int, detail: Row | None) -> None:
        self.spark, self.path, self._version, self._detail = spark, path, version, detail
        self._schema: StructType | None = None

    @classmethod
    def latest(cls, spark: SparkSession, path: str) -> SqlSnapshot:
        """The table's latest version (``-1`` when there is no table at ``path``)."""
        try:
            rows = spark.sql(f"DESCRIBE HISTORY {delta_path(path)} LIMIT 1").select("version").collect()
        except Exception as exc:
            if _no_table(exc):
                return cls(spark, path, -1, None)
            raise TableError(f"{path}: cannot read the table's history: {first_line(exc)}") from None
        if not rows:
            return cls(spark, path, -1, None)
        return cls(spark, path, int(rows[0][0]), _detail(spark, path))

    @property
    def version(self) -> int:
        return self._version

    @property
    def table_id(self) -> str:
        return str(self._detail["id"]) if self._detail is not None else ""

    def properties(self) -> dict[str, str]:
        if self._detail is None:
            return {}
        return {str(k): str(v) for k, v in (self._detail["properties"] or {}).items()}

    def schema(self) -> StructType:
        if self._schema is None:
            reader = self.spark.read.format("delta").option("versionAsOf", self._version)
            self._schema = reader.load(self.path).schema
        return self._schema

    def partition_columns(self) -> tuple[str, ...]:
        return tuple(str(c) for c in (self._detail["partitionColumns"] or [])) if self._detail is not None else ()

    def table_bytes(self) -> int | None:
        if self._version < 0:
            return 0
        return int(self._detail["sizeInBytes"]) if self._detail is not None else None

    def listed(self) -> Sequence[ListedFile] | None:
        return None

    def read_files(self, files: Sequence[ListedFile]) -> DataFrame:
        raise NotImplementedError("no file list is read over SQL: read the version through Delta")

    def transaction(self, app_id: str) -> int | None:
        return None

    def transaction_state(self, app_id: str) -> int:
        """From the ``txn`` actions of the log's commit files and checkpoints (one Spark job)."""
        from pyspark.sql import functions as F

        log = self.path.rstrip("/") + "/_delta_log"
        found = 0
        for kind, pattern in (("json", "*.json"), ("parquet", "*.checkpoint*.parquet")):
            try:
                frame = self.spark.read.format(kind).load(f"{log}/{pattern}")
                if "txn" not in frame.columns:
                    continue
                row = frame.where(F.col("txn.appId") == app_id).agg(F.max("txn.version").alias("v")).collect()[0]
            except Exception as exc:
                if "PATH_NOT_FOUND" in str(exc) or "UNABLE_TO_INFER_SCHEMA" in str(exc):
                    continue  # (no checkpoint yet)
                raise TableError(f"{self.path}: cannot read the table's log: {first_line(exc)}") from None
            if row["v"] is not None:
                found = max(found, int(row["v"]))
        return found

    def file_bounds(self, column: str, *, limit: int) -> list[tuple[Any, Any, int]] | None:
        return None
