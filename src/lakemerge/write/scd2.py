"""SCD type 2 history (docs/semantics.md §6 SCD type 2 history, docs/history.md): every version of a record is a row
with ``__start_at``, ``__end_at`` and ``__current``.

A batch rebuilds the history of the keys it touches, and only of those:

1. events: the batch's changes (one per key and sequence: the latest in file order wins), the
   stored versions of those keys (an upsert at each version's start, another at its latest folded
   change, a delete at its end unless the next version starts there) and their tombstones. On equal
   sequences an incoming change beats a stored event, and a stored upsert beats a stored delete;
2. the timeline of each key, in sequence order: partial updates and columns missing from the feed
   take the previous upsert's value within the key's epoch (since its last delete); an upsert
   opens a version when it follows nothing or a delete, or when a tracked column differs from the
   event before; deletes close the open version;
3. versions: a run of events from an opening upsert; it starts at its first event, takes the
   values of its last, and ends where the next run starts;
4. the difference with the stored versions (by key and ``__start_at``, comparing a hash of every
   column) is one Delta MERGE: changed or new versions are upserted, vanished ones deleted.
   Re-applying a batch yields the stored versions again, so the MERGE writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col, quoted
from lakemerge.config.table import CURRENT, END_AT, FILE_SEQUENCE_COLUMN, START_AT, TableConfig
from lakemerge.table import store
from lakemerge.write.classify import Outcome, values_hash

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

_ORIGIN = "_lm_origin"  # 2: incoming change, 1: stored upsert, 0: stored delete
_SEQ = "_lm_at"  # the event's sequence (the table's single sequence column)
_ACTION = "_lm_action"  # in the MERGE source: 'U' upsert the version, 'D' delete it


@dataclass(frozen=True)
class History:
    """A batch's effect on an SCD2 table.

    Attributes:
        changes: the batch's changes after removing duplicates of a key and sequence, each with its
            ``_lm_outcome`` (for metrics and tombstones).
        source: the versions to write, with ``_lm_action``.
        columns: the table's columns after the batch, in order.
    """

    changes: DataFrame
    source: DataFrame
    columns: tuple[str, ...]


@dataclass(frozen=True)
class _Shape:
    """The columns a batch's history is built over, and their types."""

    key: list[str]
    seq: str
    columns: tuple[str, ...]  # the table's columns after the batch, the history columns aside
    fills: list[str]  # columns an upsert may lack: they keep the previous upsert's value
    tracked: list[str]  # columns whose change opens a new version
    compared: list[str]  # columns equal in an unchanged snapshot row and its key's current version
    types: dict[str, DataType]

    @property
    def keys(self) -> list[Column]:
        return [col(k) for k in self.key]


def _shape(
    table: TableConfig, valid: DataFrame, stored: DataFrame | None, data_columns: Sequence[str], partial: Sequence[str]
) -> _Shape:
    key = list(table.key)
    (seq,) = table.sequence_columns
    stored_columns = [c for c in (stored.columns if stored is not None else []) if c not in (START_AT, END_AT, CURRENT)]
    columns = tuple(dict.fromkeys([*stored_columns, *data_columns]))
    values = [c for c in columns if c not in key and c != seq]
    missing = [c for c in values if c not in data_columns]
    types = {f.name: f.dataType for f in valid.schema.fields}
    if stored is not None:
        types.update({f.name: f.dataType for f in stored.schema.fields if f.name not in types})
    return _Shape(
        key=key,
        seq=seq,
        columns=columns,
        fills=list(dict.fromkeys([*partial, *missing])),
        tracked=list(table.track_columns) or [c for c in values if c != FILE_SEQUENCE_COLUMN],
        compared=[c for c in columns if c not in key and c != FILE_SEQUENCE_COLUMN],
        types=types,
    )


def build(
    table: TableConfig,
    valid: DataFrame,
    stored: DataFrame | None,
    *,
    tombstones: DataFrame | None,
    data_columns: Sequence[str],
    partial: Sequence[str],
    persist: Callable[[DataFrame], DataFrame] = lambda frame: frame,
) -> History:
    """Plan the batch's history (lazy frames; the caller persists and counts ``changes`` and
    ``source``). What the plan reads many times is given to ``persist``, which returns the frame
    to build on: the batch's events, the stored versions of its keys and their timeline (without
    it, every one of their dozen readers would read and shuffle the batch and the table again)."""
    from pyspark.sql import functions as F

    shape = _shape(table, valid, stored, data_columns, partial)
    incoming = persist(_incoming(valid, shape, data_columns))
    touched = incoming.select(*shape.keys).distinct()
    stored_parts: list[DataFrame] = []
    points: list[DataFrame] = []  # the stored events' sequences: a change older than its key's newest is late
    versions = None
    if stored is not None:
        versions = persist(_widened(stored, shape).join(touched, on=shape.key, how="left_semi"))
        incoming = _mark_unchanged(incoming, versions, shape)
        stored_parts += _stored_events(versions, shape)
        at = F.greatest(F.col(START_AT), col(shape.seq), F.col(END_AT))
        points.append(versions.select(*shape.keys, at.alias("_lm_p")))
    else:
        incoming = incoming.withColumn("_lm_unchanged", F.lit(False))
    if tombstones is not None:
        graves = tombstones.join(touched, on=shape.key, how="left_semi").select(
            *shape.keys, col(shape.seq).alias(_SEQ), F.lit("D").alias(C.OP), F.lit(0).alias(_ORIGIN)
        )
        stored_parts.append(graves)
        points.append(graves.select(*shape.keys, F.col(_SEQ).alias("_lm_p")))
    events = persist(_timeline(_events(incoming.filter(~F.col("_lm_unchanged")), stored_parts, shape), points, shape))
    changes = _changes(events, incoming.filter(F.col("_lm_unchanged")), shape)
    fresh = _versions(events, shape)
    source = fresh.withColumn(_ACTION, F.lit("U")) if versions is None else _difference(fresh, versions, shape)
    return History(changes=changes, source=source, columns=(*shape.columns, START_AT, END_AT, CURRENT))


def _widened(stored: DataFrame, shape: _Shape) -> DataFrame:
    """The stored versions with every column of the batch: a column the feed brings and the table
    lacks is null in them (docs/semantics.md §7); the MERGE adds it to the table."""
    from pyspark.sql import functions as F

    held = set(stored.columns)
    for c in shape.columns:
        if c not in held:
            stored = stored.withColumn(c, F.lit(None).cast(shape.types[c]))
    return stored


def _incoming(valid: DataFrame, shape: _Shape, data_columns: Sequence[str]) -> DataFrame:
    """The batch's events: one per key and sequence, the latest in file order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ordered = Window.partitionBy(*shape.keys, col(shape.seq)).orderBy(
        F.col(C.FILE).desc(), F.col(C.BLOCK).desc(), F.col(C.ROW_ID).desc()
    )
    return (
        valid.withColumn("_lm_rank", F.row_number().over(ordered))
        .filter("_lm_rank = 1")
        .drop("_lm_rank")
        .select(
            *[col(c) if c in data_columns else F.lit(None).cast(shape.types[c]).alias(c) for c in shape.columns],
            col(shape.seq).alias(_SEQ),
            F.col(C.OP),
            F.lit(2).alias(_ORIGIN),
            F.col(C.SNAPSHOT),
            F.col(C.FILE),
        )
    )


def _mark_unchanged(incoming: DataFrame, versions: DataFrame, shape: _Shape) -> DataFrame:
    """``_lm_unchanged``: a snapshot row equal to its key's current version, with no other change of
    the key in the batch, adds nothing to history."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    current = versions.filter(F.col(CURRENT)).select(
        *shape.keys, values_hash(shape.compared).alias("_lm_cur_hash"), F.col(START_AT).alias("_lm_cur_start")
    )
    return incoming.join(current, on=shape.key, how="left").withColumn(
        "_lm_unchanged",
        F.coalesce(
            F.col(C.SNAPSHOT)
            & (F.count(F.lit(1)).over(Window.partitionBy(*shape.keys)) == 1)
            & (F.col(C.OP) == "U")
            & (values_hash(shape.compared) == F.col("_lm_cur_hash"))
            & (F.col(_SEQ) >= F.col("_lm_cur_start")),
            F.lit(False),
        ),
    )


def _stored_events(versions: DataFrame, shape: _Shape) -> list[DataFrame]:
    """The stored versions as events: an upsert at each version's start and at its latest folded
    change, a delete at its end unless the key's next version starts there."""
    from pyspark.sql import functions as F

    base = [col(c) for c in shape.columns]
    starts = versions.select(*base, F.col(START_AT).alias(_SEQ))
    folded = versions.filter(col(shape.seq) > F.col(START_AT)).select(*base, col(shape.seq).alias(_SEQ))
    opened = versions.select(*shape.keys, F.col(START_AT).alias("_lm_next"))
    ends = (
        versions.filter(F.col(END_AT).isNotNull())
        .join(opened, on=shape.key, how="left")
        .groupBy(*shape.keys, F.col(END_AT))
        .agg(F.max(F.col("_lm_next") == F.col(END_AT)).alias("_lm_reopened"))
        .filter(~F.coalesce(F.col("_lm_reopened"), F.lit(False)))
        .select(*shape.keys, F.col(END_AT).alias(_SEQ))
    )
    upserts = starts.unionByName(folded).select(*base, F.col(_SEQ), F.lit("U").alias(C.OP), F.lit(1).alias(_ORIGIN))
    return [upserts, ends.select(*shape.keys, F.col(_SEQ), F.lit("D").alias(C.OP), F.lit(0).alias(_ORIGIN))]


def _events(incoming: DataFrame, stored_parts: list[DataFrame], shape: _Shape) -> DataFrame:
    """One event per key and sequence: an incoming change beats a stored event, a stored upsert
    beats a stored delete."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    events = incoming
    for part in stored_parts:
        events = events.unionByName(part, allowMissingColumns=True)
    slot = Window.partitionBy(*shape.keys, F.col(_SEQ)).orderBy(F.col(_ORIGIN).desc())
    return events.withColumn("_lm_rank", F.row_number().over(slot)).filter("_lm_rank = 1").drop("_lm_rank")


def _timeline(events: DataFrame, points: list[DataFrame], shape: _Shape) -> DataFrame:
    """Each key's events in sequence order: the columns an upsert lacks filled within the key's epoch
    (since its last delete), the operation before (``_lm_prev_op``), the run each event belongs to
    (``_lm_run``: an upsert after nothing, after a delete or with other tracked values opens one, and
    so does a delete), and the key's newest stored sequence (``_lm_newest``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    timeline = Window.partitionBy(*shape.keys).orderBy(F.col(_SEQ))
    upto = timeline.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    is_delete = F.col(C.OP) == "D"
    events = events.withColumn("_lm_epoch", F.sum(F.when(is_delete, 1).otherwise(0)).over(upto))
    in_epoch = (
        Window.partitionBy(*shape.keys, F.col("_lm_epoch"))
        .orderBy(F.col(_SEQ))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    for c in shape.fills:
        known = F.when(~is_delete & ((F.col(_ORIGIN) < 2) | col(c).isNotNull()), F.struct(col(c)))
        events = events.withColumn(c, F.last(known, ignorenulls=True).over(in_epoch)[c])
    events = events.withColumn("_lm_tracked", F.when(~is_delete, values_hash(shape.tracked)))
    previous_op = F.lag(F.col(C.OP)).over(timeline)
    opens = ~is_delete & (
        previous_op.isNull()
        | (previous_op == "D")
        | (F.lag(F.col("_lm_tracked")).over(timeline) != F.col("_lm_tracked"))
    )
    events = events.withColumn("_lm_prev_op", previous_op).withColumn(
        "_lm_run", F.sum(F.when(opens | is_delete, 1).otherwise(0)).over(upto)
    )
    if not points:
        return events.withColumn("_lm_newest", F.lit(None).cast(shape.types[shape.seq]))
    latest = points[0]
    for more in points[1:]:
        latest = latest.unionByName(more)
    newest = latest.groupBy(*shape.keys).agg(F.max("_lm_p").alias("_lm_newest"))
    return events.join(newest, on=shape.key, how="left")


def _changes(events: DataFrame, unchanged: DataFrame, shape: _Shape) -> DataFrame:
    """The batch's changes, each with its outcome."""
    from pyspark.sql import functions as F

    is_delete = F.col(C.OP) == "D"
    after_upsert = F.col("_lm_prev_op") == "U"
    outcome = (
        F.when(F.col(_SEQ) < F.col("_lm_newest"), F.lit(Outcome.LATE.value))
        .when(is_delete & after_upsert, F.lit(Outcome.DELETE.value))
        .when(is_delete, F.lit(Outcome.ABSENT.value))
        .when(after_upsert, F.lit(Outcome.UPDATE.value))
        .otherwise(F.lit(Outcome.INSERT.value))
    )
    changed = events.filter(F.col(_ORIGIN) == 2).withColumn(C.OUTCOME, outcome)
    skipped = unchanged.withColumn(C.OUTCOME, F.lit(Outcome.UNCHANGED.value))
    picked = [*shape.keys, F.col(_SEQ).alias(shape.seq), F.col(C.OP), F.col(C.OUTCOME)]
    return changed.select(*picked).unionByName(skipped.select(*picked))


def _versions(events: DataFrame, shape: _Shape) -> DataFrame:
    """The key's versions: each run that opens with an upsert starts at its first event, takes the
    values of its last and ends where the next run starts."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    run = Window.partitionBy(*shape.keys, F.col("_lm_run"))
    runs = events.withColumn("_lm_start", F.min(F.col(_SEQ)).over(run)).withColumn(
        "_lm_pick", F.row_number().over(run.orderBy(F.col(_SEQ).desc()))
    )
    heads = runs.filter(F.col(_SEQ) == F.col("_lm_start")).select(
        *shape.keys,
        F.col("_lm_run"),
        F.col(C.OP).alias("_lm_head_op"),
        F.lead(F.col(_SEQ)).over(Window.partitionBy(*shape.keys).orderBy(F.col("_lm_run"))).alias("_lm_end_at"),
    )
    return (
        runs.filter(F.col("_lm_pick") == 1)
        .join(heads, on=[*shape.key, "_lm_run"], how="inner")
        .filter(F.col("_lm_head_op") == "U")
        .select(
            *[col(c) for c in shape.columns if c != shape.seq],
            F.col(_SEQ).alias(shape.seq),
            F.col("_lm_start").alias(START_AT),
            F.col("_lm_end_at").alias(END_AT),
        )
        .withColumn(CURRENT, F.col(END_AT).isNull())
        .select(*[col(c) for c in (*shape.columns, START_AT, END_AT, CURRENT)])
    )


def _difference(fresh: DataFrame, versions: DataFrame, shape: _Shape) -> DataFrame:
    """The MERGE's source: the versions that are new or changed (``_lm_action`` 'U') and the stored
    ones that vanished ('D'), matched by key and ``__start_at`` on a hash of every column."""
    from pyspark.sql import functions as F

    everything = [*shape.columns, START_AT, END_AT]
    old = versions.select(*shape.keys, F.col(START_AT), values_hash(everything).alias("_lm_old"))
    new = fresh.withColumn("_lm_new", values_hash(everything))
    both = new.join(old, on=[*shape.key, START_AT], how="full_outer")
    differ = F.col("_lm_new").isNull() | F.col("_lm_old").isNull() | (F.col("_lm_new") != F.col("_lm_old"))
    return (
        both.filter(differ)
        .withColumn(_ACTION, F.when(F.col("_lm_new").isNull(), "D").otherwise("U"))
        .drop("_lm_new", "_lm_old")
    )


def write(
    spark: SparkSession, table: TableConfig, history: History, *, exists: bool, writes: int, txn_version: int
) -> None:
    """Commit the versions in ``history.source``: the table's first commit, one MERGE on key and
    ``__start_at``, or (nothing to write) a metadata-only commit recording the batch."""
    from pyspark.sql import functions as F

    columns = [col(c) for c in history.columns]
    if not exists:
        store.create_table(history.source.select(*columns), table)
        return
    if writes == 0:
        store.record_only(spark, table.path, txn_version)
        return

    on = " AND ".join(
        [*(f"t.{quoted(k)} = s.{quoted(k)}" for k in table.key), f"t.{quoted(START_AT)} = s.{quoted(START_AT)}"]
    )
    values = {quoted(c): f"s.{quoted(c)}" for c in history.columns}
    clauses = [
        f"WHEN MATCHED AND s.{_ACTION} = 'D' THEN DELETE",
        store.when_updated(f"s.{_ACTION} = 'U'", values),
        store.when_inserted(f"s.{_ACTION} = 'U'", values),
    ]
    store.merge_into(spark, table.path, history.source.select(*columns, F.col(_ACTION)), on=on, clauses=clauses)


def current(frame: DataFrame) -> DataFrame:
    """The current rows of an SCD2 table, without the history columns."""
    from pyspark.sql import functions as F

    return frame.filter(F.col(CURRENT)).drop(START_AT, END_AT, CURRENT)
