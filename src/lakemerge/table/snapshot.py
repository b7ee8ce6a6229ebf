"""A Delta table's latest version as a batch plans against it, behind one interface.

A :class:`Snapshot` says what a batch needs of a version without reading its data: its number, the
table's id, schema, partition columns and properties, the last idempotent transaction of an
application, and (where the version's checksum lists them) its files with their statistics. A
classic session reads them from Delta's own snapshot in its JVM (:mod:`lakemerge.table.jvm_snapshot`);
a Spark Connect session through SQL (:mod:`lakemerge.table.sql_snapshot`).
:func:`lakemerge.table.snapshots.latest_snapshot` takes the implementation of the session's
backend; callers never ask which one they hold.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


#: Bounds of a column are read from the statistics of at most this many files (a few MB of them).
MAX_BOUNDED_FILES = 100_000


@dataclass(frozen=True)
class ListedFile:
    """A data file of a version as its checksum lists it.

    Attributes:
        path: the file's path as the log holds it (relative to the table, or absolute).
        size: bytes.
        stats: Delta's statistics of the file (JSON), if it has them.
        action: the implementation's own handle of the file (Delta's ``AddFile`` in a classic session).
    """

    path: str
    size: int
    stats: str | None
    action: Any = None


class Snapshot(abc.ABC):
    """One version of a Delta table (see the module). A version ``-1`` is a path with no table."""

    @property
    @abc.abstractmethod
    def version(self) -> int:
        """The version's number (-1: no table at the path)."""

    @property
    @abc.abstractmethod
    def table_id(self) -> str:
        """The table's id (a table recreated at the same path has another)."""

    @abc.abstractmethod
    def properties(self) -> dict[str, str]:
        """The table's properties."""

    @abc.abstractmethod
    def schema(self) -> StructType:
        """The table's schema."""

    @abc.abstractmethod
    def partition_columns(self) -> tuple[str, ...]:
        """The table's partition columns."""

    @abc.abstractmethod
    def table_bytes(self) -> int | None:
        """The bytes of the version's data files, where known without a Spark job."""

    @abc.abstractmethod
    def listed(self) -> Sequence[ListedFile] | None:
        """The version's data files as its checksum lists them (with their statistics), where it
        lists them; ``None`` otherwise."""

    @abc.abstractmethod
    def read_files(self, files: Sequence[ListedFile]) -> DataFrame:
        """The rows of ``files`` (some of :meth:`listed`) as the version holds them (deletion
        vectors applied), read by Delta's own reader."""

    @abc.abstractmethod
    def transaction(self, app_id: str) -> int | None:
        """The version of the idempotent transaction ``app_id`` in the version's state, from its
        checksum where that lists them (no Spark job; -1: none there); ``None`` when only a read
        of the log's whole state can tell (:meth:`transaction_state`)."""

    @abc.abstractmethod
    def transaction_state(self, app_id: str) -> int:
        """The version of the idempotent transaction ``app_id`` from the log's whole state (a
        Spark job); 0 when it has none."""

    @abc.abstractmethod
    def file_bounds(self, column: str, *, limit: int) -> list[tuple[Any, Any, int]] | None:
        """Each data file's smallest and largest ``column`` in its statistics and its size, from
        the log's file list by one Spark job (:func:`lakemerge.table.stats.file_key_bounds`);
        ``None`` for more than ``limit`` files, or where the implementation cannot read them so."""

    #: Delta's own snapshot object (classic sessions: the writes without MERGE commit on it).
    jvm: Any = None
