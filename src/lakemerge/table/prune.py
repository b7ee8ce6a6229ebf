"""Key-range pruning: a handful of key ranges covering a batch's keys, so that Delta skips the
files that cannot hold any of them (Delta's MERGE does not skip files by itself).

The ranges come from one small aggregate over the batch's keys (never over the table; a batch
collects it in the same action as its row counts). Each key goes to one of :data:`SLICES` equal
slices of the span of keys the table holds (from its files' statistics), and the aggregate keeps
each occupied slice's smallest and largest key: one read of the batch, no sort. Sorted, the slices
are cut at their ``limit - 1`` widest gaps, which gives the ``limit`` ranges that cover every key
with about the least total width. A gap narrower than a 64th of the batch's span is not cut: it
could skip a file only on a table of more than 64 files over that span, while every range costs
Delta's file skipping and planning on each read (bench/RESULTS.md, "Key ranges": one
range instead of eight that skipped nothing made a batch of 1,500 uniform keys faster). So a batch of
keys spread evenly gets one range, and a batch of a few clusters, or of a few keys, one per cluster.
Keys whose type has no distance (strings, binary, floating point) get one range, from the smallest
key to the largest; keys whose table's span is unknown are sliced over the batch's own span, which
one small job more finds first. The predicate goes into the classification's read of the
table and into the MERGE condition, where Delta's file skipping (min/max statistics per file) uses
it; a ``log`` batch leaves out the files itself, from the statistics in Delta's checksum, and
filters no row by the ranges where it reads only its own keys' rows
(lakemerge.table.logview.read_sides). A key outside every range is never in the batch, so results are
unchanged.

(Sorting all of the batch's keys in one task instead, in a second read of the batch, took 0.81 s
with 1.5 M changes at SF10, against 0.12 s for the slices: bench/RESULTS.md, "Key ranges".)
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakemerge.columns import quoted
from lakemerge.spark import literals
from lakemerge.spark.scoped import scoped_conf

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

        name = f"{alias}.{quoted(self.column)}" if alias else quoted(self.column)
        column = F.col(name)
        condition: Column | None = None
        for low, high in self.ranges:
            part = column == F.lit(low) if low == high else column.between(F.lit(low), F.lit(high))
            condition = part if condition is None else condition | part
        return condition if condition is not None else F.lit(False)

    def predicate_sql(self, alias: str) -> str:
        """:meth:`predicate` as SQL text (a MERGE's condition is written so)."""
        name = f"{alias}.{quoted(self.column)}"
        parts = [
            f"{name} = {literals.sql_value(low)}"
            if low == high
            else f"{name} BETWEEN {literals.sql_value(low)} AND {literals.sql_value(high)}"
            for low, high in self.ranges
        ]
        return "(" + " OR ".join(parts) + ")" if parts else "FALSE"

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

#: The :data:`PART` of a :class:`RangeQuery`'s row (which also holds the counts computed with it).
BOUNDS = "_lm_kr_bounds"

#: How many equal slices of the stored keys' span a batch's keys are sorted into to find the gaps
#: between them: a gap inside a slice is not seen. A slice of the benchmark's SF1 table (keys up to
#: 6 million, 16 files) is 1,465 keys wide, a few thousandths of a file's keys.
SLICES = 4096


@dataclass(frozen=True)
class RangeQuery:
    """The one-row aggregate that :func:`key_ranges` collects, for a caller to collect with other
    figures in one Spark action and one job: ``parts`` are frames of one row each, tagged by
    :data:`PART`, the query's own columns prefixed ``_lm_kr_`` (the row tagged :data:`BOUNDS` also
    holds the caller's counts, see :func:`range_query`); union them (:func:`collect_parts`) with
    other tagged rows, and give :meth:`ranges` the rows by tag. A union runs as one job, where
    cross-joining one-row aggregates broadcasts each of them in a job of its own."""

    parts: tuple[DataFrame, ...]
    column: str
    limit: int
    min_share: float

    def ranges(self, rows: Mapping[str, Any]) -> KeyRanges | None:
        """The ranges from ``rows`` (collected rows of ``parts``, by their :data:`PART`), or
        ``None`` when there is no key.

        The row holds each occupied slice's smallest and largest key. Sorted, the slices are cut at
        their ``limit - 1`` widest gaps (from one slice's largest key to the next one's smallest) of
        at least ``min_share`` of the span from the smallest key to the largest; each range runs from
        the smallest to the largest key of its slices, so that every key lies in a range even where
        slices are not in key order (ranges that then overlap are merged)."""
        slices = rows[BOUNDS]["_lm_kr_slices"] or []
        found = sorted(((s["slice"], s["lo"], s["hi"]) for s in slices), key=lambda s: s[0])
        if not found:
            return None
        if len(found) == 1:  # (keys with no distance, such as strings, are always one slice)
            return KeyRanges(column=self.column, ranges=((found[0][1], found[0][2]),))
        lowest, highest = min(s[1] for s in found), max(s[2] for s in found)
        span = _position(highest) - _position(lowest)
        narrowest = span * self.min_share
        gaps = [(_position(found[i + 1][1]) - _position(found[i][2]), i) for i in range(len(found) - 1)]
        wide = sorted((g for g in gaps if g[0] > 0 and g[0] >= narrowest), key=lambda g: (-g[0], g[1]))
        cuts = sorted(i for _, i in wide[: self.limit - 1])
        runs = [found[a + 1 : b + 1] for a, b in zip([-1, *cuts], [*cuts, len(found) - 1], strict=True)]
        ranges: list[tuple[Any, Any]] = []
        for low, high in sorted((min(s[1] for s in run), max(s[2] for s in run)) for run in runs):
            if ranges and low <= ranges[-1][1]:
                ranges[-1] = (ranges[-1][0], max(high, ranges[-1][1]))
            else:
                ranges.append((low, high))
        return KeyRanges(column=self.column, ranges=tuple(ranges))


def tagged(frame: DataFrame, part: str) -> DataFrame:
    """``frame`` with its rows tagged ``part`` in :data:`PART`."""
    from pyspark.sql import functions as F

    return frame.select(F.lit(part).alias(PART), "*")


def collect_parts(parts: Sequence[DataFrame]) -> dict[str, Any]:
    """Collect the tagged one-row frames ``parts`` in one action: their rows by :data:`PART`.

    Every shuffle in such frames moves partial aggregates (a :class:`RangeQuery`'s: a few thousand
    rows per task at most), so one task merges them: with a batch's usual shuffle partitions, each
    of eight tasks spent about 10 ms on a few rows (bench/RESULTS.md, "Key ranges")."""
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part, allowMissingColumns=True)
    with scoped_conf(union.sparkSession, {"spark.sql.shuffle.partitions": "1"}):
        return {row[PART]: row for row in union.collect()}


def range_query(
    changes: DataFrame,
    key: Sequence[str],
    *,
    limit: int = DEFAULT_RANGES,
    min_share: float = MIN_GAP_SHARE,
    where: str | None = None,
    counts: Mapping[str, str] | None = None,
    least: Mapping[str, str] | None = None,
    span: tuple[Any, Any] | None = None,
) -> RangeQuery | None:
    """The aggregate that finds the ranges covering the keys of ``changes`` (of its rows that meet
    ``where``, a SQL condition, when given), or ``None`` when the key has several columns or
    ``limit`` is below 1: in one read of ``changes`` and no sort, each key goes to one of
    :data:`SLICES` equal slices of ``span`` (the smallest and largest key the table holds, from its
    files' statistics; keys outside it go to a slice below it or above it), and the query collects
    each occupied slice's smallest and largest key. Without ``span`` (a key type Delta keeps no
    exact statistics for, such as timestamps), one small Spark job finds the batch's own smallest
    and largest key first. A key with no distance (strings, binary, floating point) is one slice:
    one range, from the smallest key to the largest. ``counts`` (named SQL counts over all of
    ``changes``, such as a batch's row counts; each must be a count, whose total is the sum of its
    counts over the slices) are computed with them, and collected in the row tagged
    :data:`BOUNDS`; so is the smallest value of each of ``least`` (named SQL values over
    ``changes``; nulls are left out, ``None`` when all are).

    The query's expressions are SQL text over ``changes`` itself (built of PySpark's functions, its
    columns cost about 150 calls into the JVM, 10 ms of a batch), never over a temporary view:
    dropping a view drops the cache of the frame it names, and a batch's changes are cached. Its own
    columns are prefixed ``_lm_``, which no feed column may use."""
    if len(key) != 1 or limit < 1:
        return None
    from pyspark.sql import functions as F

    name = key[0]
    column = quoted(name)
    valid = f"{column} IS NOT NULL AND ({where})" if where else f"{column} IS NOT NULL"
    position = _sql_position(changes.schema[name].dataType, column)
    if position is not None and limit > 1 and _scale(span) is None:
        found = changes.where(valid).agg(F.expr(f"min({column})"), F.expr(f"max({column})")).first()
        span = (found[0], found[1]) if found is not None else None
    scale = _scale(span) if position is not None and limit > 1 else None
    named = dict(counts or {})
    smallest = dict(least or {})
    tag = F.lit(BOUNDS).alias(PART)
    if position is None or scale is None:
        # One slice: one aggregate over the batch, no grouping (Spark cannot hash-group the
        # smallest and largest of strings: it would sort each task's rows).
        one = "named_struct('slice', CAST(0 AS BIGINT), 'lo', min(_lm_k), 'hi', max(_lm_k))"
        keys = changes.selectExpr("*", f"CASE WHEN {valid} THEN {column} END AS _lm_k")
        row = keys.agg(
            tag,
            *[F.expr(c).alias(n) for n, c in named.items()],
            *[F.expr(f"min({v})").alias(n) for n, v in smallest.items()],
            F.expr(f"CASE WHEN count(_lm_k) > 0 THEN array({one}) END").alias("_lm_kr_slices"),
        )
    else:
        # (The scale changes with the table's span: literals would be new code every batch.)
        offset, factor = (literals.opaque(v, column, "double") for v in scale)
        slice_of = f"least(greatest(floor(({position} - {offset}) * {factor}), -1), {SLICES})"
        keys = changes.selectExpr(
            "*", f"CASE WHEN {valid} THEN {slice_of} END AS _lm_slice", f"CASE WHEN {valid} THEN {column} END AS _lm_k"
        )
        per_slice = keys.groupBy("_lm_slice").agg(
            *[F.expr(c).alias(n) for n, c in named.items()],
            *[F.expr(f"min({v})").alias(n) for n, v in smallest.items()],
            F.expr("min(_lm_k)").alias("_lm_lo"),
            F.expr("max(_lm_k)").alias("_lm_hi"),
        )
        slices = (
            "collect_list(CASE WHEN _lm_slice IS NOT NULL THEN "
            "named_struct('slice', _lm_slice, 'lo', _lm_lo, 'hi', _lm_hi) END)"
        )
        row = per_slice.agg(
            tag,
            *[F.expr(f"CAST(coalesce(sum({n}), 0) AS BIGINT)").alias(n) for n in named],
            *[F.expr(f"min({n})").alias(n) for n in smallest],
            F.expr(slices).alias("_lm_kr_slices"),
        )
    return RangeQuery(parts=(row,), column=name, limit=limit, min_share=min_share)


def key_ranges(
    changes: DataFrame,
    key: Sequence[str],
    *,
    limit: int = DEFAULT_RANGES,
    min_share: float = MIN_GAP_SHARE,
    span: tuple[Any, Any] | None = None,
) -> KeyRanges | None:
    """The ranges covering the keys of ``changes`` (one action: one job, two without ``span``; see
    :func:`range_query`), or ``None`` when the key has several columns or ``changes`` is empty."""
    query = range_query(changes, key, limit=limit, min_share=min_share, span=span)
    return query.ranges(collect_parts(query.parts)) if query is not None else None


def span_of(files: Sequence[tuple[Any, Any, int]] | None) -> tuple[Any, Any] | None:
    """The smallest and largest key of ``files`` (:func:`lakemerge.table.stats.file_key_bounds`
    of the stored tables), from those whose statistics know them; ``None`` when none do."""
    known = [(low, high) for low, high, _ in files or () if low is not None and high is not None]
    if not known:
        return None
    try:
        return min(low for low, _ in known), max(high for _, high in known)
    except TypeError:
        return None


#: The least share of the stored bytes that a batch's key ranges must leave out for the batch to
#: use them. Ranges cost every read and the MERGE a predicate whose literals change from batch to
#: batch, so Spark generates and the JVM compiles new code for each batch: a batch of keys spread
#: over the whole table, whose ranges skip no file, ran 15-20 % faster without them
#: (bench/RESULTS.md, "Key ranges").
MIN_SKIPPED_SHARE = 0.1

#: Tables (with their log, in ``log`` mode) of fewer bytes than this are read whole, without key
#: ranges: knowing what ranges would skip costs a Spark job over Delta's file statistics (0.16-0.5
#: s a batch on a table of a few KB, bench/RESULTS.md, "Key ranges"), about what scanning
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


def _sql_position(kind: Any, column: str) -> str | None:
    """Where a key of type ``kind`` (the SQL ``column``) lies on a line, as a double (the number
    itself; days or microseconds since 1970 for dates and timestamps), or ``None`` for a type with
    no distance. Doubles, so that the span of a 64-bit key (a hash, from the most negative value to
    the most positive) overflows nothing, which Spark's ANSI mode would make an error.
    Floating-point keys get none: their NaN sorts above every number and would break the slices'
    order."""
    from pyspark.sql import types as T

    if isinstance(kind, (T.IntegralType, T.DecimalType)):
        return f"CAST({column} AS DOUBLE)"
    if isinstance(kind, T.DateType):
        return f"CAST(unix_date({column}) AS DOUBLE)"
    if isinstance(kind, (T.TimestampType, T.TimestampNTZType)):
        return f"CAST(unix_micros(CAST({column} AS TIMESTAMP)) AS DOUBLE)"
    return None


def _position(value: Any) -> float:
    """:func:`_sql_position` of a key's value in Python."""
    if isinstance(value, datetime.datetime):
        return value.timestamp() * 1_000_000
    if isinstance(value, datetime.date):
        return float((value - datetime.date(1970, 1, 1)).days)
    return float(value)


def _scale(span: tuple[Any, Any] | None) -> tuple[float, float] | None:
    """The offset and factor that take a key's position to its slice of ``span``: ``None`` when
    the span is unknown, a single value, or not measurable."""
    if span is None:
        return None
    try:
        low, high = _position(span[0]), _position(span[1])
    except (TypeError, ValueError):
        return None
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        return None
    return low, SLICES / (high - low)
