"""A batch's second phase: what the table holds, as the batch sees it.

The stored rows (a ``log`` table's merged view over table and change log), the batch's changes
conformed to their types, the batch's truncate and the stored rows it removes, the keys a full
snapshot lacks (deletes as of the snapshot), and the tombstones to honour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakemerge import columns as C
from lakemerge.batch.cached import Cached
from lakemerge.batch.conform import Conformed, conform
from lakemerge.batch.select import Selection
from lakemerge.changes.normalize import ChangeSet
from lakemerge.changes.snapshot import absent_deletes, check_order, scope_positions
from lakemerge.columns import col, sql_string
from lakemerge.config import TableConfig
from lakemerge.config.table import FILE_SEQUENCE_COLUMN
from lakemerge.errors import InputError, SchemaError
from lakemerge.feeds.files import FeedFile
from lakemerge.spark.scoped import scoped_conf
from lakemerge.table import logview, schema, stats
from lakemerge.table.prune import KeyRanges

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class Stored:
    """The table's rows as a batch reads them.

    Attributes:
        rows: the stored rows (a ``log`` table's merged view); ``None`` for a new table, or for a
            ``log`` batch that classifies against its own keys' rows only (``of_keys``), which needs
            the view's schema alone.
        columns: the stored columns.
        sides: a ``log`` table's table and change log as read (:func:`lakemerge.table.logview.read_sides`).
        within: the rows (a ``log`` table's sides) were read from the files within the batch's key
            ranges alone, found from the files' statistics.
        of_keys: a ``log`` batch whose keys can be broadcast: it classifies against the newest rows of
            its own keys (:func:`lakemerge.table.logview.newest_of_keys`), never the whole view.
        snapshot: the JVM Delta snapshot ``rows`` were read at (a table without a change log), on
            which a write without MERGE commits (:mod:`lakemerge.write.direct`).
    """

    rows: DataFrame | None = None
    columns: tuple[str, ...] = ()
    sides: dict[str, DataFrame] = field(default_factory=dict)
    within: bool = False
    of_keys: bool = False
    snapshot: Any = None

    def partial(self, table: TableConfig, changes: ChangeSet) -> tuple[str, ...]:
        """The columns folded as partial updates (docs/semantics.md §3): the table's
        ``ignore_null_updates`` ones, and those of the table some records lack, kept as stored
        where they lack them."""
        folded = [c for c in changes.sometimes if c in self.columns]
        return tuple(dict.fromkeys([*table.partial_columns(changes.data_columns), *folded]))


def read_stored(
    spark: SparkSession, table: TableConfig, *, exists: bool, ranges: KeyRanges | None, of_keys: bool
) -> tuple[Stored, StructType | None]:
    """The table's stored rows (see :class:`Stored`) and their schema (``None`` for a new table).

    In ``log`` mode the stored state is the merged view, so that the late, tombstone and partial
    rules hold. Without truncates, its sides are read from the files Delta's checksum lists, within
    the batch's key ranges when it has them: Delta's file skipping would have nothing to add."""
    if not exists:
        return Stored(of_keys=of_keys), None
    if not table.log_mode:
        within = (ranges.column, ranges.overlaps) if ranges is not None else None
        frame, snapshot, listed = stats.read_snapshot(spark, table.path, within=within)
        inside = listed and ranges is not None
        return Stored(rows=frame, columns=tuple(frame.columns), within=inside, snapshot=snapshot), frame.schema
    truncating = any(f.truncate_codes for f in table.feeds)
    sides = logview.read_sides(spark, table, listed=not truncating, ranges=ranges)
    found: StructType | None = None
    # The whole view only where the batch reaches beyond its own keys (a truncate, SCD2 history, a
    # snapshot, keys too many to broadcast): else its schema is all it needs.
    if of_keys and not truncating and not table.scd2:
        found = logview.merged_schema(table, sides)
    rows = logview.merged(table, sides) if found is None else None
    if found is None:
        assert rows is not None
        found = rows.schema
    return Stored(rows, tuple(found.names), sides, ranges is not None, of_keys), found


def conformed(
    spark: SparkSession,
    table: TableConfig,
    valid: DataFrame,
    stored: StructType,
    data_columns: Sequence[str],
    files: Sequence[FeedFile],
    sometimes: Sequence[str],
) -> Conformed:
    """The changes with the types of the table's columns, by its schema-change policy
    (:mod:`lakemerge.batch.conform`; docs/semantics.md §7).

    Raises:
        SchemaError: a key or sequence column is not in the table, or the policy refuses a change.
    """
    _check_table_columns(table, stored.names)
    feed = ", ".join(loc for feed in table.feeds for loc in feed.location) or "the changes"
    widens = not table.log_mode and schema.type_widening_enabled(spark, table.path)
    return conform(table, valid, stored, data_columns, files=files, feed=feed, table_widens=widens, sometimes=sometimes)


def _check_table_columns(table: TableConfig, stored_columns: Sequence[str]) -> None:
    present = {c.lower() for c in stored_columns}
    for role, cols in (("key", table.key), ("sequence", table.sequence_columns)):
        for name in cols:
            if name.lower() not in present:
                raise SchemaError(
                    f"{table.path}: {role} column '{name}' is not in the table ({', '.join(stored_columns)}); "
                    "nothing was applied"
                )


@dataclass(frozen=True)
class Truncate:
    """The batch's latest truncate (docs/semantics.md §4), if any.

    Attributes:
        records: truncate records in the batch.
        sql: the latest truncate's sequence, as the SQL of a struct literal: rows older than it go.
        stored_rows: stored rows older than it, which the commit removes.
    """

    records: int = 0
    sql: str | None = None
    stored_rows: int = 0

    @property
    def before(self) -> Column | None:
        """:attr:`sql` as a column (``None`` without a truncate)."""
        from pyspark.sql import functions as F

        return None if self.sql is None else F.expr(self.sql)

    def surviving(self, table: TableConfig, valid: DataFrame) -> DataFrame:
        """The changes that outlive the truncate: not the truncates, not older than the latest."""
        from pyspark.sql import functions as F

        if self.before is None:
            return valid
        sequence = F.struct(*[col(c) for c in table.sequence_columns])
        return valid.filter((F.col(C.OP) != "T") & (sequence >= self.before))


def find_truncate(
    spark: SparkSession, table: TableConfig, valid: DataFrame, stored: DataFrame | None, *, own: dict[str, str | None]
) -> Truncate:
    """The batch's latest truncate and the stored rows it removes (two small actions, run with the
    session's own settings ``own``: they read the whole table); none without truncate codes."""
    from pyspark.sql import functions as F

    if not any(f.truncate_codes for f in table.feeds):
        return Truncate()
    with scoped_conf(spark, own):
        sequence = F.struct(*[col(c) for c in table.sequence_columns])
        truncates = valid.filter(F.col(C.OP) == "T")
        at = F.max(sequence)
        # (Each field as Spark spells it, and cast back: no value goes through Python's types.)
        spelled = [at.getField(c).cast("string").alias(f"_lm_at{i}") for i, c in enumerate(table.sequence_columns)]
        row = truncates.agg(F.count(F.lit(1)).alias("n"), *spelled).collect()[0]
        if not row["n"]:
            return Truncate()
        types = {f.name: f.dataType for f in valid.schema.fields}
        fields = [
            f"{sql_string(c)}, CAST({'NULL' if row[f'_lm_at{i}'] is None else sql_string(row[f'_lm_at{i}'])} "
            f"AS {types[c].simpleString()})"
            for i, c in enumerate(table.sequence_columns)
        ]
        before = f"named_struct({', '.join(fields)})"
        older = stored.filter(sequence < F.expr(before)).count() if stored is not None else 0
    return Truncate(records=int(row["n"]), sql=before, stored_rows=int(older))


@dataclass(frozen=True)
class Absent:
    """What a batch's full snapshots add: a delete of each key a snapshot lacks in its scope, and the
    snapshots' positions the commit records (docs/semantics.md §5)."""

    changes: DataFrame
    count: int = 0
    positions: dict[str, dict[str, Any]] = field(default_factory=dict)


def snapshot_absences(
    table: TableConfig,
    selection: Selection,
    valid: DataFrame,
    stored: DataFrame | None,
    *,
    data_columns: Sequence[str],
    cached: Cached,
) -> Absent:
    """``valid`` with a delete for every key each of the batch's snapshots lacks (counted; cached,
    as the count and the classification both read them), and the snapshots' positions.

    Raises:
        InputError: a snapshot holds no valid row, or is not newer than the last one applied.
    """
    from pyspark.sql import functions as F

    count, positions = 0, {}
    for index, pending in selection.snapshots.items():
        feed = table.feeds[index]
        rows = valid.filter(F.col(C.SNAPSHOT))
        if not rows.take(1):
            raise InputError(
                "full snapshot holds no valid row: the sequence it was taken at is unknown, so the keys it "
                "lacks cannot be deleted; nothing was applied",
                path=pending.files[0].path,
            )
        scoped = scope_positions(table, feed, pending, rows, pending.position)
        check_order(index, pending, scoped, selection.applied_snapshot(index), feed)
        positions[str(index)] = {**(selection.applied_snapshot(index) or {}), **scoped}
        absent = cached.persist(absent_deletes(table, feed, valid, stored, data_columns=data_columns))
        count += absent.count()
        valid = valid.unionByName(absent, allowMissingColumns=True)
    return Absent(valid, count, positions)


def compared(table: TableConfig, data_columns: Sequence[str], stored: DataFrame | None) -> tuple[str, ...]:
    """The columns whose values decide whether a snapshot row equals the stored row: the batch's
    data columns but the key and the file-derived sequence, when the table has them all."""
    if stored is None:
        return ()
    present = set(stored.columns)
    columns = tuple(c for c in data_columns if c not in table.key and c != FILE_SEQUENCE_COLUMN)
    return columns if all(c in present for c in columns) else ()
