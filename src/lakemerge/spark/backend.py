"""What lakemerge asks of a Spark session beyond DataFrames and SQL, behind one interface.

A classic session has its JVM in this process (py4j): lakemerge reads Spark's and Delta's state
there directly and takes the fast paths that need it. A Spark Connect session has only a client
here: everything goes through DataFrames and SQL to the server. :func:`lakemerge.spark.backends.backend`
picks the implementation once per session (:mod:`lakemerge.spark.classic` or
:mod:`lakemerge.spark.connect`); callers never ask which one they hold.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from lakemerge.spark.versions import Pairing

A = TypeVar("A")
B = TypeVar("B")


class Stage:
    """One active Spark stage, as a progress display shows it: ``key`` tells it from the others,
    ``name`` is what the display says of it, ``done`` of ``total`` tasks have ended."""

    __slots__ = ("done", "key", "name", "total")

    def __init__(self, key: str, name: str, done: int, total: int) -> None:
        self.key, self.name, self.done, self.total = key, name, done, total


class Backend(abc.ABC):
    """A Spark session's capabilities beyond DataFrames and SQL (see the module)."""

    #: Whether Delta's and Spark's JVM classes can be driven from here (py4j): the classic fast
    #: paths (writes without MERGE, one-job appends, reads of Delta's checksums) need them.
    jvm: bool = False

    #: Whether a stream's ``foreachBatch`` function runs in this process (else in the server's
    #: Python, pickled: :mod:`lakemerge.streams.served`).
    runs_batches: bool = True

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    @abc.abstractmethod
    def check_delta(self, version: str, matching: Pairing) -> None:
        """Raise ConfigError when the session's Spark has no Delta Lake classes, or those of
        another Spark line than ``matching``'s (``version``: the session's Spark)."""

    @abc.abstractmethod
    def parallelism(self) -> int:
        """How many tasks the session's Spark runs at once (its default parallelism)."""

    @abc.abstractmethod
    def quiet(self) -> None:
        """Keep Spark's own log below errors (a session lakemerge started)."""

    @abc.abstractmethod
    def leaf(self, kept: DataFrame) -> DataFrame:
        """A frame reading persisted ``kept`` as a leaf of its plan (:mod:`lakemerge.spark.cache`),
        or ``kept`` itself where the session offers no such frame."""

    @abc.abstractmethod
    def in_tail(self, first: Callable[[], A], then: Callable[[], B]) -> tuple[A, B]:
        """Run ``first``, and ``then`` in the idle tail of its job (:mod:`lakemerge.spark.tail`),
        or one after the other; both results."""

    @abc.abstractmethod
    def identity(self) -> Any:
        """What tells this session from another (a stopped one, or one of another application)."""

    @abc.abstractmethod
    def json_schema(self, texts: DataFrame) -> StructType:
        """The structure Spark's JSON reader infers for ``texts``' one string column (one job)."""

    @abc.abstractmethod
    def stages(self) -> list[Stage] | None:
        """The session's active stages now, for a progress display; ``None`` where the session
        reports progress only through :meth:`on_progress`."""

    def driver_path(self, path: str) -> str | None:
        """The relative local ``path`` made absolute as the session's driver resolves it (against
        its JVM's folder, which need not be this process's); ``None`` where the driver is elsewhere."""
        return None

    def kafka_partitions(
        self, servers: str, options: Mapping[str, str], topics: Sequence[str], pattern: str | None
    ) -> list[tuple[str, int]] | None:
        """The partitions, as (topic, partition), of the Kafka cluster at ``servers``' topics named
        ``topics`` or matching ``pattern`` (Java's regular expressions, as Spark's Kafka source
        matches them), asked with the ``kafka.``-prefixed ``options`` of Spark's source; ``None``
        where this session cannot ask the cluster."""
        return None

    def on_progress(self, report: Callable[[list[Stage]], None]) -> Callable[[], None] | None:
        """Call ``report`` with the active stages whenever the session reports progress; the
        function that stops it, or ``None`` where progress is polled through :meth:`stages`."""
        return None
