"""Key-range pruning: a handful of key ranges covering a batch's keys, so that Delta skips the
files that cannot hold any of them (PRODUCT.md §Performance; OSS Delta MERGE does not prune by
itself).

The ranges come from one small aggregate over the batch's keys (never over the table; a batch
collects it in the same action as its row counts): sorted,
the batch's keys are cut at their ``limit - 1`` widest gaps, which gives the ``limit`` ranges that
cover every key with the least total width. A gap narrower than a 64th of the batch's span is not
cut: it could skip a file only on a table of more than 64 files over that span, while every range
costs Delta's file skipping and planning on each read (bench/HISTORY.md, eighth session: one range
instead of eight that skipped nothing made a batch of 1,500 uniform keys faster). So a batch of
keys spread evenly gets one range, and a batch of a few clusters, or of a few keys, one per cluster.
Keys whose type has no distance (strings, binary) get one range, from the smallest key to the
largest. The predicate goes into the classification's read of the table and into the MERGE
condition, where Delta's file skipping (min/max statistics per file) uses it; a ``log`` batch
leaves out the files itself, from the statistics in Delta's checksum, and filters no row by the
ranges where it reads only its own keys' rows (lakemerge.apply.log.read_sides). A key outside
every range is never in the batch, so results are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: How many ranges a batch's keys are cut into: enough to skip the gaps of a few clusters of keys,
#: few enough that the predicate stays cheap to evaluate per file.
DEFAULT_RANGES = 8

#: The narrowest gap between a batch's keys that is cut, as a share of the batch's span.
MIN_GAP_SHARE = 1 / 64


@dataclass(frozen=True)
class KeyRanges:
    """Closed ranges ``[low, high]`` of one key column that cover a batch's keys, in key order."""

    column: str
    ranges: tuple[tuple[Any, Any], ...]

    def predicate(self, alias: str | None = None) -> Column:
        """The column (qualified by ``alias``) lies in one of the ranges."""
        from pyspark.sql import functions as F

        name = f"{alias}.`{self.column}`" if alias else f"`{self.column}`"
        column = F.col(name)
        condition: Column | None = None
        for low, high in self.ranges:
            part = column == F.lit(low) if low == high else column.between(F.lit(low), F.lit(high))
            condition = part if condition is None else condition | part
        return condition if condition is not None else F.lit(False)

    def overlaps(self, low: Any, high: Any) -> bool:
        """Whether a file whose keys lie from ``low`` to ``high`` may hold a key of the ranges; also
        when the two do not compare (a batch's key typed unlike the table's, which the batch's
        schema check then refuses with its own error)."""
        try:
            return any(a <= high and low <= b for a, b in self.ranges)
        except TypeError:
            return True


#: The column that tells the rows of a :class:`RangeQuery` (and of what they are collected with)
#: apart.
PART = "_lm_part"

#: The :data:`PART` of a :class:`RangeQuery`'s row of key bounds (and of the aggregates computed with them).
BOUNDS = "_lm_kr_bounds"


@dataclass(frozen=True)
class RangeQuery:
    """The one-row aggregates that :func:`key_ranges` collects, for a caller to collect with other
    figures in one Spark action and one job: ``parts`` are frames of one row each, tagged by
    :data:`PART`, the query's own columns prefixed ``_lm_kr_`` (the row tagged :data:`BOUNDS` also
    holds the caller's ``aggregates``, see :func:`range_query`); union them (:func:`collect_parts`)
    with other tagged rows, and give :meth:`ranges` the rows by tag. A union runs as one job, where cross-joining
    one-row aggregates broadcasts each of them in a job of its own."""

    parts: tuple[DataFrame, ...]
    column: str
    min_share: float

    def ranges(self, rows: Mapping[str, Any]) -> KeyRanges | None:
        """The ranges from ``rows`` (collected rows of ``parts``, by their :data:`PART`), or
        ``None`` when there is no key."""
        bounds, cuts = rows[BOUNDS], rows["_lm_kr_cuts"]
        lowest, highest = bounds["_lm_kr_lo"], bounds["_lm_kr_hi"]
        if lowest is None:
            return None
        span = bounds["_lm_kr_span"]
        narrowest = span * self.min_share if span else 0.0
        found = cuts["_lm_kr_cuts"] or []
        chosen = sorted(((c["lo"], c["hi"]) for c in found if c["gap"] >= narrowest), key=lambda c: c[0])
        ranges: list[tuple[Any, Any]] = []
        start = lowest
        for end, restart in chosen:
            ranges.append((start, end))
            start = restart
        ranges.append((start, highest))
        return KeyRanges(column=self.column, ranges=tuple(ranges))


def tagged(frame: DataFrame, part: str) -> DataFrame:
    """``frame`` with its rows tagged ``part`` in :data:`PART`."""
    from pyspark.sql import functions as F

    return frame.select(F.lit(part).alias(PART), "*")


def collect_parts(parts: Sequence[DataFrame]) -> dict[str, Any]:
    """Collect the tagged one-row frames ``parts`` in one action: their rows by :data:`PART`."""
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part, allowMissingColumns=True)
    return {row[PART]: row for row in union.collect()}


def range_query(
    changes: DataFrame,
    key: Sequence[str],
    *,
    limit: int = DEFAULT_RANGES,
    min_share: float = MIN_GAP_SHARE,
    where: Column | None = None,
    aggregates: Sequence[Column] = (),
) -> RangeQuery | None:
    """The aggregates that find the ranges covering the keys of ``changes`` (of its rows that meet
    ``where``, when given): their smallest and largest key, their span and their ``limit - 1``
    widest gaps; ``None`` when the key has several columns. Only gaps of at least ``min_share`` of
    the span are cut (see :meth:`RangeQuery.ranges`). ``aggregates`` (one-row aggregates over all of
    ``changes``, such as a batch's row counts) are computed with the bounds, in one read of
    ``changes``, and collected in the row tagged :data:`BOUNDS`."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if len(key) != 1 or limit < 1:
        return None
    name = key[0]
    kind = changes.schema[name].dataType
    column = F.col(f"`{name}`")
    counted = column.isNotNull() & (where if where is not None else F.lit(True))
    keys = changes.where(counted).select(column.alias("k"))
    lowest, highest = F.min(F.when(counted, column)), F.max(F.when(counted, column))
    distance = _distance(kind)
    cut = T.StructType([T.StructField("lo", kind), T.StructField("hi", kind), T.StructField("gap", T.DoubleType())])
    if distance is None or limit == 1:
        span = F.lit(None).cast(T.DoubleType())
        widest = keys.limit(0).agg(F.array().cast(T.ArrayType(cut)).alias("_lm_kr_cuts"))
    else:
        span = distance(lowest, highest).cast(T.DoubleType())
        steps = keys.select(F.lag("k").over(Window.orderBy("k")).alias("lo"), F.col("k").alias("hi")).where(
            F.col("lo").isNotNull() & (F.col("hi") != F.col("lo"))
        )
        widest = (
            steps.select("lo", "hi", distance(F.col("lo"), F.col("hi")).cast(T.DoubleType()).alias("gap"))
            .orderBy(F.col("gap").desc())
            .limit(limit - 1)
            .agg(F.collect_list(F.struct("lo", "hi", "gap")).alias("_lm_kr_cuts"))
        )
    bounds = changes.agg(*aggregates, lowest.alias("_lm_kr_lo"), highest.alias("_lm_kr_hi"), span.alias("_lm_kr_span"))
    parts = (tagged(bounds, BOUNDS), tagged(widest, "_lm_kr_cuts"))
    return RangeQuery(parts=parts, column=name, min_share=min_share)


def key_ranges(
    changes: DataFrame, key: Sequence[str], *, limit: int = DEFAULT_RANGES, min_share: float = MIN_GAP_SHARE
) -> KeyRanges | None:
    """The ranges covering the keys of ``changes`` (one action, one job), or ``None`` when the key
    has several columns or ``changes`` is empty. Only gaps of at least ``min_share`` of the span from
    the smallest key to the largest are cut."""
    query = range_query(changes, key, limit=limit, min_share=min_share)
    return query.ranges(collect_parts(query.parts)) if query is not None else None


#: The least share of the stored bytes that a batch's key ranges must leave out for the batch to
#: use them. Ranges cost every read and the MERGE a predicate whose literals change from batch to
#: batch, so Spark generates and the JVM compiles new code for each batch: a batch of keys spread
#: over the whole table, whose ranges skip no file, ran 15-20 % faster without them
#: (bench/RESULTS.md, "Twelfth session").
MIN_SKIPPED_SHARE = 0.1

#: Tables (with their log, in ``log`` mode) of fewer bytes than this are read whole, without key
#: ranges: knowing what ranges would skip costs a Spark job over Delta's file statistics (0.16-0.5
#: s a batch on a table of a few KB, bench/RESULTS.md, "Thirteenth session"), about what scanning
#: the key and sequence columns of a few MB costs, and the ranges' literals make every batch's plan
#: new code to compile. The size comes from the checksum Delta writes beside each commit, without a
#: job. The benchmark's SF1 table (about 55 MB) keeps its ranges; SF0.1 (5 MB) is read whole.
MIN_PRUNED_BYTES = 8 * 1024 * 1024


def skipped_share(files: Sequence[tuple[Any, Any, int]], ranges: KeyRanges) -> float | None:
    """The share of the bytes of ``files`` (each file's smallest and largest key from its statistics,
    ``None`` when unknown, and its size) that lie in files whose keys fall outside every one of
    ``ranges``: what Delta's file skipping leaves out. ``None`` for no bytes at all."""
    total = sum(size for _, _, size in files)
    if not total:
        return None
    outside = sum(
        size for low, high, size in files if low is not None and high is not None and not ranges.overlaps(low, high)
    )
    return outside / total


def _distance(kind: Any) -> Any:
    """How far apart two keys of type ``kind`` are, as a function of two columns, or ``None``.
    Numbers are subtracted as doubles: the span of a 64-bit key (a hash, say, from the most negative
    value to the most positive) overflows its own type, which Spark's ANSI mode makes an error."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(kind, (T.IntegralType, T.DecimalType, T.FloatType, T.DoubleType)):
        return lambda lo, hi: hi.cast("double") - lo.cast("double")
    if isinstance(kind, T.DateType):
        return lambda lo, hi: F.datediff(hi, lo)
    if isinstance(kind, (T.TimestampType, T.TimestampNTZType)):
        return lambda lo, hi: F.unix_micros(hi.cast("timestamp")) - F.unix_micros(lo.cast("timestamp"))
    return None
