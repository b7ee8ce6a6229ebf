"""A transaction over the tables of a group: change records for several tables, visible together.

As with Hive's streaming mutation API, a transaction gathers the changes of several tables and
commits them all or none: ``tx.apply(table, changes)`` stages a DataFrame of change records per
table; leaving the ``with`` block commits each table's batch in the group's order (each batch one
Delta commit, under the source ``group:<group>`` and the transaction's id as its batch id), then
appends the group's point ``{table: version}`` with the transaction's id. An exception inside the
block aborts: nothing is applied.

Delta has no commit over several tables. A reader of one table alone sees each table's batch as it
commits, one table after another; readers of the group's point (``lakemerge snapshot``, then time
travel of each table to its version) see every table of the last complete transaction, or none of
a transaction that failed while it committed. A run of the same transaction id again (after a
crash in the middle) completes it: the tables it had committed are not applied twice (their source
and batch id are in their ledgers; a stream's records, by their offsets), the others are, and the
point is recorded once. A transaction whose point exists already commits nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakemerge.batch.attempts import apply_table
from lakemerge.batch.frames import FrameBatch
from lakemerge.batch.groups import Mirrored, applied_offsets, group_config, latest_version, record_point, snapshot
from lakemerge.config import PipelineConfig
from lakemerge.config.feed import FeedConfig
from lakemerge.config.records import RecordsConfig
from lakemerge.errors import ConfigError
from lakemerge.results import BatchResult, TransactionResult
from lakemerge.table import store
from lakemerge.table.offsets import Ends, Ranges, ends, furthest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def source_of(group: str) -> str:
    """The source name under which a group's transactions commit their tables' batches."""
    return f"group:{group}"


@dataclass
class Transaction:
    """Changes staged for the tables of ``group``, committed by :meth:`commit` (see the module)."""

    pipeline: PipelineConfig
    group: str
    id: int
    spark: SparkSession
    staged: dict[str, tuple[DataFrame, FeedConfig | RecordsConfig, Ranges | None]] = field(default_factory=dict)
    result: TransactionResult | None = None
    #: A source's transaction (its group the tables this one touches): the point keeps the
    #: versions the last point gave the tables it does not touch.
    carry: bool = False
    #: A source's transaction: the path and key of its tables as the last point recorded them,
    #: recorded again with the point, with those of the tables this one touches.
    mirrored: dict[str, Mirrored] | None = None
    #: A source's transaction: the offsets its micro-batch read (recorded by the point also where
    #: its records wait), and the version of the source's staging table that goes with the point.
    read: Ends | None = None
    staging: int | None = None

    def apply(
        self, table: str, changes: DataFrame, *, records: RecordsConfig | None = None, ranges: Ranges | None = None
    ) -> None:
        """Stage ``changes`` (change records, read by ``records`` or the table's own rules) for
        ``table``, one of the group's; they are applied when the transaction commits. ``ranges``:
        Kafka records' offsets (a group's stream): the table applies those of its records that its
        commits from the group did not, and the group's point records the offsets applied.

        Raises:
            ConfigError: the table is not in the group, or has changes staged already.
        """
        config = group_config(self.pipeline, self.group)
        if table not in config.tables:
            raise ConfigError(
                f"table '{table}' is not in group '{self.group}' ({', '.join(config.tables)})",
                key=f"groups.{self.group}.tables",
            )
        if table in self.staged:
            raise ConfigError(f"transaction {self.id} of group '{self.group}' has changes for '{table}' already")
        self.staged[table] = (changes, records or self.pipeline.table(table).frame_rules, ranges)

    def commit(self) -> TransactionResult:
        """Apply each staged table's batch in the group's order, then record the group's point."""
        config = group_config(self.pipeline, self.group)
        last, applied = applied_offsets(self.spark, config)
        if last is not None and last >= self.id:
            return TransactionResult(self.group, self.id, (), None, applied_before=True)
        batches: list[BatchResult] = []
        for name in config.tables:
            if name in self.staged:
                changes, rules, ranges = self.staged[name]
                frame = FrameBatch(changes, source_of(self.group), self.id, rules, ranges=ranges)
                batches.append(apply_table(self.pipeline.table(name), spark=self.spark, frame=frame))
        tables = [t for t in map(self.pipeline.table, config.tables) if store.table_exists(self.spark, t.path)]
        versions = {t.name: latest_version(self.spark, t.path) for t in tables}
        if self.carry:
            last_point = snapshot(self.pipeline, self.group, spark=self.spark)
            versions = {**(last_point.versions if last_point is not None else {}), **versions}
        read = [ends(r) for _, _, r in self.staged.values() if r is not None]
        if self.read is not None:
            read.append(self.read)
        offsets = furthest(applied, *read) if read else None
        mirrored = None
        if self.mirrored is not None:
            touched = {t.name: Mirrored(t.path, t.key) for t in tables if t.name in self.staged}
            mirrored = {t: m for t, m in {**self.mirrored, **touched}.items() if t in versions}
        point = record_point(
            self.spark,
            self.group,
            config,
            versions,
            transaction=self.id,
            offsets=offsets,
            mirrored=mirrored,
            staging=self.staging,
        )
        return TransactionResult(self.group, self.id, tuple(batches), point)


def last_transaction(pipeline: PipelineConfig, group: str, *, spark: SparkSession) -> int | None:
    """The greatest transaction id among the group's recorded points (``None``: none yet)."""
    return applied_offsets(spark, group_config(pipeline, group))[0]


def next_id(pipeline: PipelineConfig, group: str, *, spark: SparkSession) -> int:
    """The id of the group's next transaction: one more than the greatest recorded (1 for the first)."""
    return (last_transaction(pipeline, group, spark=spark) or 0) + 1
