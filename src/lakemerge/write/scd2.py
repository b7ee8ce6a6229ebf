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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col, quoted
from lakemerge.config.table import CURRENT, END_AT, FILE_SEQUENCE_COLUMN, START_AT, TableConfig
from lakemerge.table import store
from lakemerge.write.classify import Outcome, values_hash

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

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


def build(
    table: TableConfig,
    valid: DataFrame,
    stored: DataFrame | None,
    *,
    tombstones: DataFrame | None,
    data_columns: Sequence[str],
    partial: Sequence[str],
) -> History:
    """Plan the batch's history (lazy frames; the caller persists and counts)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = list(table.key)
    (seq,) = table.sequence_columns
    keys = [col(k) for k in key]
    stored_columns = [c for c in (stored.columns if stored is not None else []) if c not in (START_AT, END_AT, CURRENT)]
    columns = tuple(dict.fromkeys([*stored_columns, *data_columns]))
    values = [c for c in columns if c not in key and c != seq]
    missing = [c for c in values if c not in data_columns]
    fills = list(dict.fromkeys([*partial, *missing]))
    tracked = list(table.track_columns) or [c for c in values if c != FILE_SEQUENCE_COLUMN]
    types = {f.name: f.dataType for f in valid.schema.fields}
    if stored is not None:
        types.update({f.name: f.dataType for f in stored.schema.fields if f.name not in types})
        # A column the feed brings and the table lacks is null in the stored versions (docs/semantics.md
        # §7); the MERGE adds it to the table.
        held = set(stored.columns)
        for c in columns:
            if c not in held:
                stored = stored.withColumn(c, F.lit(None).cast(types[c]))

    # 1. Incoming events: one per key and sequence.
    ordered = Window.partitionBy(*keys, col(seq)).orderBy(
        F.col(C.FILE).desc(), F.col(C.BLOCK).desc(), F.col(C.ROW_ID).desc()
    )
    incoming = (
        valid.withColumn("_lm_rank", F.row_number().over(ordered))
        .filter("_lm_rank = 1")
        .drop("_lm_rank")
        .select(
            *[col(c) if c in data_columns else F.lit(None).cast(types[c]).alias(c) for c in columns],
            col(seq).alias(_SEQ),
            F.col(C.OP),
            F.lit(2).alias(_ORIGIN),
            F.col(C.SNAPSHOT),
            F.col(C.FILE),
        )
    )

    # Stored events of the keys the batch touches.
    touched = incoming.select(*keys).distinct()
    parts = [incoming]
    latest_point: DataFrame | None = None
    current_hash: DataFrame | None = None
    if stored is not None:
        versions = stored.join(touched, on=key, how="left_semi")
        base = [col(c) for c in columns]
        starts = versions.select(*base, F.col(START_AT).alias(_SEQ))
        folded = versions.filter(col(seq) > F.col(START_AT)).select(*base, col(seq).alias(_SEQ))
        opened = versions.select(*keys, F.col(START_AT).alias("_lm_next"))
        ends = (
            versions.filter(F.col(END_AT).isNotNull())
            .join(opened, on=[*key], how="left")
            .groupBy(*keys, F.col(END_AT))
            .agg(F.max(F.col("_lm_next") == F.col(END_AT)).alias("_lm_reopened"))
            .filter(~F.coalesce(F.col("_lm_reopened"), F.lit(False)))
            .select(*keys, F.col(END_AT).alias(_SEQ))
        )
        upserts = starts.unionByName(folded).select(*base, F.col(_SEQ), F.lit("U").alias(C.OP), F.lit(1).alias(_ORIGIN))
        parts.append(upserts)
        parts.append(ends.select(*keys, F.col(_SEQ), F.lit("D").alias(C.OP), F.lit(0).alias(_ORIGIN)))
        points = versions.select(*keys, F.greatest(F.col(START_AT), col(seq), F.col(END_AT)).alias("_lm_p"))
        latest_point = points
        compared = [c for c in columns if c not in key and c != FILE_SEQUENCE_COLUMN]
        current_hash = versions.filter(F.col(CURRENT)).select(
            *keys, values_hash(compared).alias("_lm_cur_hash"), F.col(START_AT).alias("_lm_cur_start")
        )
    if tombstones is not None:
        graves = tombstones.join(touched, on=key, how="left_semi").select(
            *keys, col(seq).alias(_SEQ), F.lit("D").alias(C.OP), F.lit(0).alias(_ORIGIN)
        )
        parts.append(graves)
        points = graves.select(*keys, F.col(_SEQ).alias("_lm_p"))
        latest_point = points if latest_point is None else latest_point.unionByName(points)

    # A snapshot row equal to the key's current version, with no other change of the key in the
    # batch, is unchanged: it adds nothing to history.
    per_key = Window.partitionBy(*keys)
    unchanged = F.lit(False)
    if current_hash is not None:
        compared = [c for c in columns if c not in key and c != FILE_SEQUENCE_COLUMN]
        incoming = incoming.join(current_hash, on=key, how="left").withColumn(
            "_lm_unchanged",
            F.coalesce(
                F.col(C.SNAPSHOT)
                & (F.count(F.lit(1)).over(per_key) == 1)
                & (F.col(C.OP) == "U")
                & (values_hash(compared) == F.col("_lm_cur_hash"))
                & (F.col(_SEQ) >= F.col("_lm_cur_start")),
                F.lit(False),
            ),
        )
        unchanged = F.col("_lm_unchanged")
    else:
        incoming = incoming.withColumn("_lm_unchanged", F.lit(False))
    parts[0] = incoming.filter(~F.col("_lm_unchanged"))

    events = parts[0]
    for part in parts[1:]:
        events = events.unionByName(part, allowMissingColumns=True)
    # Equal sequences: incoming beats stored, a stored upsert beats a stored delete.
    slot = Window.partitionBy(*keys, F.col(_SEQ)).orderBy(F.col(_ORIGIN).desc())
    events = events.withColumn("_lm_rank", F.row_number().over(slot)).filter("_lm_rank = 1").drop("_lm_rank")

    # 2. The timeline of each key.
    timeline = Window.partitionBy(*keys).orderBy(F.col(_SEQ))
    upto = timeline.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    is_delete = F.col(C.OP) == "D"
    events = events.withColumn("_lm_epoch", F.sum(F.when(is_delete, 1).otherwise(0)).over(upto))
    in_epoch = (
        Window.partitionBy(*keys, F.col("_lm_epoch"))
        .orderBy(F.col(_SEQ))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    for c in fills:
        known = F.when(~is_delete & ((F.col(_ORIGIN) < 2) | col(c).isNotNull()), F.struct(col(c)))
        events = events.withColumn(c, F.last(known, ignorenulls=True).over(in_epoch)[c])
    events = events.withColumn("_lm_tracked", F.when(~is_delete, values_hash(tracked)))
    previous_op = F.lag(F.col(C.OP)).over(timeline)
    opens = ~is_delete & (
        previous_op.isNull()
        | (previous_op == "D")
        | (F.lag(F.col("_lm_tracked")).over(timeline) != F.col("_lm_tracked"))
    )
    events = events.withColumn("_lm_prev_op", previous_op).withColumn(
        "_lm_run", F.sum(F.when(opens | is_delete, 1).otherwise(0)).over(upto)
    )
    if latest_point is not None:
        newest = latest_point.groupBy(*keys).agg(F.max("_lm_p").alias("_lm_newest"))
        events = events.join(newest, on=key, how="left")
    else:
        events = events.withColumn("_lm_newest", F.lit(None).cast(types[seq]))

    # Outcomes of the batch's changes.
    after_upsert = F.col("_lm_prev_op") == "U"
    outcome = (
        F.when(F.col(_SEQ) < F.col("_lm_newest"), F.lit(Outcome.LATE.value))
        .when(is_delete & after_upsert, F.lit(Outcome.DELETE.value))
        .when(is_delete, F.lit(Outcome.ABSENT.value))
        .when(after_upsert, F.lit(Outcome.UPDATE.value))
        .otherwise(F.lit(Outcome.INSERT.value))
    )
    changed = events.filter(F.col(_ORIGIN) == 2).withColumn(C.OUTCOME, outcome)
    skipped = incoming.filter(unchanged).withColumn(C.OUTCOME, F.lit(Outcome.UNCHANGED.value))
    changes = changed.select(*keys, F.col(_SEQ).alias(seq), F.col(C.OP), F.col(C.OUTCOME)).unionByName(
        skipped.select(*keys, F.col(_SEQ).alias(seq), F.col(C.OP), F.col(C.OUTCOME))
    )

    # 3. Versions: runs that open with an upsert.
    run = Window.partitionBy(*keys, F.col("_lm_run"))
    last_in_run = run.orderBy(F.col(_SEQ).desc())
    runs = events.withColumn("_lm_start", F.min(F.col(_SEQ)).over(run)).withColumn(
        "_lm_pick", F.row_number().over(last_in_run)
    )
    heads = runs.filter(F.col(_SEQ) == F.col("_lm_start")).select(
        *keys,
        F.col("_lm_run"),
        F.col(C.OP).alias("_lm_head_op"),
        F.lead(F.col(_SEQ)).over(Window.partitionBy(*keys).orderBy(F.col("_lm_run"))).alias("_lm_end_at"),
    )
    fresh = (
        runs.filter(F.col("_lm_pick") == 1)
        .join(heads, on=[*key, "_lm_run"], how="inner")
        .filter(F.col("_lm_head_op") == "U")
        .select(
            *[col(c) for c in columns if c != seq],
            F.col(_SEQ).alias(seq),
            F.col("_lm_start").alias(START_AT),
            F.col("_lm_end_at").alias(END_AT),
        )
        .withColumn(CURRENT, F.col(END_AT).isNull())
        .select(*[col(c) for c in (*columns, START_AT, END_AT, CURRENT)])
    )

    # 4. Difference with the stored versions of the touched keys.
    everything = [*columns, START_AT, END_AT]
    if stored is None:
        source = fresh.withColumn(_ACTION, F.lit("U"))
    else:
        held = set(stored.columns)
        full = stored.join(touched, on=key, how="left_semi").select(
            *[col(c) if c in held else F.lit(None).cast(types[c]).alias(c) for c in everything]
        )
        old = full.select(*keys, F.col(START_AT), values_hash(everything).alias("_lm_old"))
        new = fresh.withColumn("_lm_new", values_hash(everything))
        both = new.join(old, on=[*key, START_AT], how="full_outer")
        source = both.filter(
            F.col("_lm_new").isNull() | F.col("_lm_old").isNull() | (F.col("_lm_new") != F.col("_lm_old"))
        )
        source = source.withColumn(_ACTION, F.when(F.col("_lm_new").isNull(), "D").otherwise("U")).drop(
            "_lm_new", "_lm_old"
        )
    return History(changes=changes, source=source, columns=(*columns, START_AT, END_AT, CURRENT))


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

    from delta.tables import DeltaTable

    on = " AND ".join(
        [*(f"t.{quoted(k)} = s.{quoted(k)}" for k in table.key), f"t.{quoted(START_AT)} = s.{quoted(START_AT)}"]
    )
    values: dict[str, str | Column] = {quoted(c): f"s.{quoted(c)}" for c in history.columns}
    (
        DeltaTable.forPath(spark, table.path)
        .alias("t")
        .merge(history.source.select(*columns, F.col(_ACTION)).alias("s"), on)
        .withSchemaEvolution()
        .whenMatchedDelete(condition=f"s.{_ACTION} = 'D'")
        .whenMatchedUpdate(condition=f"s.{_ACTION} = 'U'", set=values)
        .whenNotMatchedInsert(condition=f"s.{_ACTION} = 'U'", values=values)
        .execute()
    )


def current(frame: DataFrame) -> DataFrame:
    """The current rows of an SCD2 table, without the history columns."""
    from pyspark.sql import functions as F

    return frame.filter(F.col(CURRENT)).drop(START_AT, END_AT, CURRENT)
