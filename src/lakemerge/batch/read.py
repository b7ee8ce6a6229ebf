"""A batch's first phase: read and validate its change records, and count them.

Each feed's files are read and normalised (typed, one operation, one sequence, the reason a row is
bad), then one aggregate counts the rows read, bad and ignored; a batch that can only touch its own
keys finds its key ranges in the same aggregate. A batch over its quarantine threshold fails here,
naming the first bad row; within it, its bad rows are set aside for the quarantine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lakemerge import columns as C
from lakemerge.batch import ranges as batch_ranges
from lakemerge.batch.cached import Cached
from lakemerge.batch.conform import quarantined_types
from lakemerge.batch.frames import FrameBatch, raw_records
from lakemerge.batch.select import Selection
from lakemerge.changes import normalize
from lakemerge.changes.bad_rows import first_bad_row, quarantine_rows
from lakemerge.changes.normalize import ChangeSet
from lakemerge.columns import quoted
from lakemerge.config import FeedConfig, TableConfig
from lakemerge.errors import InputError
from lakemerge.feeds import FeedFile, read_feed, utf8
from lakemerge.feeds.files import spark_file_path
from lakemerge.spark.errors import translated
from lakemerge.table import prune
from lakemerge.table.prune import KeyRanges, range_query

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The rows that are changes: not bad, not ignored on purpose.
VALID = f"{C.ERROR} IS NULL AND {C.OP} != 'N'"

#: Feed formats Spark reads column by column: a read of a few columns skips the others' bytes.
COLUMNAR = ("parquet", "orc")

#: The batch's row counts, as SQL over its change records (one aggregate with its key ranges).
_COUNTS = {
    "_lm_rows": "count(1)",
    "_lm_bad": f"count({C.ERROR})",
    "_lm_n": f"count_if({C.ERROR} IS NULL AND {C.OP} = 'N')",
    "_lm_replaced": f"count_if({C.REPLACED})",
}


@dataclass(frozen=True)
class ReadBatch:
    """A batch's change records, read, validated and counted.

    Attributes:
        changes: the records (every row, bad and ignored ones included), cached as
            :func:`keeps_records` decides.
        rows_read / rows_bad / ignored: the rows read, bad, and skipped on purpose (``ignore_codes``).
        bad: the bad rows in the quarantine's form, when there are any (within the threshold).
        whole: the batch may reach stored rows beyond its own keys, or the table is new or small:
            it is never read within key ranges.
        early: the key ranges were looked for with the counts (a batch without truncate codes).
        ranges: those ranges, when they pay (:func:`lakemerge.batch.ranges.paying`).
        oldest: the smallest value of the first sequence column among the changes (``None`` when
            none has one), found in the same aggregate: tombstones all older than it cannot make
            any change late (:func:`lakemerge.table.tombstones.read`).
        reread: the records are read from their files each time they are used (not cached): the
            batch's commit must find every file as it was listed.
    """

    changes: ChangeSet
    rows_read: int
    rows_bad: int
    ignored: int
    bad: DataFrame | None
    whole: bool
    early: bool
    ranges: KeyRanges | None
    oldest: Any = None
    reread: bool = False

    @property
    def valid(self) -> DataFrame:
        """The changes: rows neither bad nor ignored."""
        return self.changes.frame.filter(VALID)


def read_batch(
    spark: SparkSession,
    table: TableConfig,
    selection: Selection,
    *,
    number: int,
    batch_id: str,
    cached: Cached,
    counted: bool,
) -> ReadBatch:
    """Read, validate and count the selected files' change records (batch ``number``).

    Which batches cache their records is :func:`keeps_records`'s rule. A batch that reads its files
    more than once checks before its commit that no file changed since it was listed, so one
    rewritten between the reads commits nothing.

    Raises:
        InputError: a file cannot be read, or there are more bad rows than the threshold allows.
        SchemaError: the feed's columns cannot be read as configured.
    """
    with _naming_poison(spark, table, selection.files):
        return _read_batch(spark, table, selection, number=number, batch_id=batch_id, cached=cached, counted=counted)


#: How to go on with a file whose name holds ':' that the filesystem cannot read under it (Hadoop's
#: local filesystem, whose checksum file name it cannot build; HDFS, which refuses the name).
COLON_FIX = "renamed (its name holds ':', which this filesystem's Hadoop cannot read under that name)"


@contextlib.contextmanager
def _naming_poison(spark: SparkSession, table: TableConfig, files: Sequence[FeedFile]) -> Iterator[None]:
    """An input error in the block that is one file's (the file named, or found in Spark's message)
    names it and says how to go on without it: a file that cannot be applied would otherwise stop
    every later batch of the table (docs/semantics.md §9)."""
    try:
        yield
    except InputError as exc:
        path = exc.path if any(f.path == exc.path for f in files) else None
        if path is None and exc.path is None:
            text = str(exc.__cause__ or exc)
            path = next((f.path for f in files if _named_in(spark, text, f.path)), None)
            if path is None and len(files) == 1:
                path = files[0].path
        if path is None:
            raise
        message = exc.message if exc.path is not None else f"{path}: {exc.message}"
        fix = "fixed" if ":" not in path.rsplit("/", 1)[-1] else COLON_FIX
        named = InputError(
            f"{message}; this file stops every later batch of table '{table.name}' until it is {fix}, or "
            f"recorded as skipped: lakemerge skip PIPELINE.toml --table {table.name} '{path}' --reason TEXT"
        )
        named.path, named.row = path, exc.row
        raise named from exc


def _named_in(spark: SparkSession, text: str, path: str) -> bool:
    """Whether Spark's message ``text`` names the file ``path``: as listed, or percent-encoded as
    Spark names a file it failed to read (``file:///x/a%20b.csv``; a URI's scheme spelled either way),
    or, for a name holding ``:``, by that name alone (Hadoop's complaint about a path it cannot
    build from it, or from its checksum file's name, names nothing else)."""
    spellings = (path, spark_file_path(spark, path))
    if any(s.split(":", 1)[-1].lstrip("/") in text for s in spellings):
        return True
    name = path.rsplit("/", 1)[-1]
    return ":" in name and name in text


def _read_batch(
    spark: SparkSession,
    table: TableConfig,
    selection: Selection,
    *,
    number: int,
    batch_id: str,
    cached: Cached,
    counted: bool,
) -> ReadBatch:
    with translated(reading=True):
        if selection.frame is not None:
            changes = frame_changes(spark, table, selection.frame, batch_number=number)
        else:
            changes = read_changes(spark, table, selection.chosen, batch_number=number)
        changes = quarantined_types(spark, table, changes, exists=selection.exists)
    kept = keeps_records(table, selection, counted=counted)
    if kept:
        changes = replace(changes, frame=cached.persist(changes.frame))
    whole = not selection.exists or table.scd2 or bool(selection.snapshots) or batch_ranges.small_table(spark, table)
    early = not whole and not any(f.truncate_codes for f in table.feeds)
    stored_files = batch_ranges.stored_files(spark, table) if early else None
    counts, ranges = _count(changes.frame, table, early=early, stored_files=stored_files)
    if counts["_lm_replaced"]:
        # Rows holding U+FFFD: those decoded from bytes that are not UTF-8 are bad (rarely taken).
        changes = _invalid_utf8(spark, table, selection, changes, cached=cached, counted=counted)
        counts, ranges = _count(changes.frame, table, early=early, stored_files=stored_files)
    rows_read, rows_bad, ignored = int(counts["_lm_rows"]), int(counts["_lm_bad"]), int(counts["_lm_n"] or 0)
    files = selection.files
    if table.too_many_bad(rows_bad, rows_read):
        threshold = table.max_bad_rows > 0 or table.max_bad_fraction is not None
        raise first_bad_row(changes, files, rows_bad, threshold=threshold)
    bad = None
    if rows_bad:
        columns = changes.data_columns
        bad = quarantine_rows(changes.frame, files=files, data_columns=columns, batch_id=batch_id, table=table.name)
    ranges = batch_ranges.paying(stored_files, ranges)
    oldest = counts["_lm_oldest"]
    return ReadBatch(changes, rows_read, rows_bad, ignored, bad, whole, early, ranges, oldest=oldest, reread=not kept)


def keeps_records(table: TableConfig, selection: Selection, *, counted: bool) -> bool:
    """Whether a batch caches its records once read: a DataFrame's always (the caller's DataFrame
    may not give the same rows twice, and a stream's records are parsed from text), and a counted
    batch's files unless they are Parquet or ORC (:data:`COLUMNAR`) and it has no snapshot and no
    history. Such a batch reads them twice: its statistics read the key, sequence and operation
    columns alone, its classification every column, each straight from the files; caching them cost
    more than the second read (bench/RESULTS.md, "Records of columnar files read twice"). Text is
    parsed whole on every read, and snapshots and histories read the records more often: those are
    cached. An uncounted ``log`` batch reads its files three times, each for a few columns, and
    caches nothing. A batch that reads its files more than once checks before its commit that none
    changed since it was listed (:attr:`ReadBatch.reread`)."""
    if selection.frame is not None:
        return True
    if not counted:
        return False
    columnar = all(feed.format in COLUMNAR and feed.envelope == "none" for feed in table.feeds)
    return not columnar or table.scd2 or bool(selection.snapshots)


def _invalid_utf8(
    spark: SparkSession, table: TableConfig, selection: Selection, changes: ChangeSet, *, cached: Cached, counted: bool
) -> ChangeSet:
    """``changes`` with the rows decoded from lines that are not UTF-8 made bad (:mod:`lakemerge.feeds.utf8`)."""
    files: list[tuple[FeedConfig, int, FeedFile]] = []  # (feed, index in the batch as read_changes has it, file)
    for index, feed in enumerate(table.feeds):
        for i, f in selection.chosen:
            if i == index:
                files.append((feed, len(files), f))
    lines = utf8.invalid_lines(spark, files)
    if lines is None:
        return changes
    multiline = any(feed.multiline for feed in table.feeds)
    frame = utf8.mark_invalid(changes.frame, lines, multiline=multiline)
    return replace(changes, frame=cached.persist(frame) if counted else frame)


def _count(
    frame: DataFrame, table: TableConfig, *, early: bool, stored_files: Sequence[tuple[Any, Any, int]] | None
) -> tuple[dict[str, Any], KeyRanges | None]:
    """The batch's row counts, its changes' oldest sequence (``_lm_oldest``, of the first sequence
    column) and, when ``early``, its key ranges, in one aggregate (one read of the records), over
    the span of the keys the table holds."""
    from pyspark.sql import functions as F

    least = {"_lm_oldest": f"CASE WHEN {VALID} THEN {quoted(table.sequence_columns[0])} END"}
    query = None
    if early:
        span = prune.span_of(stored_files)
        query = range_query(frame, table.key, where=VALID, counts=_COUNTS, least=least, span=span)
    with translated(reading=True):
        if query is not None:
            parts = query.parts
        else:
            values = [*(f"{c} AS {n}" for n, c in _COUNTS.items()), *(f"min({v}) AS {n}" for n, v in least.items())]
            parts = (prune.tagged(frame.agg(*[F.expr(v) for v in values]), prune.BOUNDS),)
        found = prune.collect_parts(parts)
    return found[prune.BOUNDS], query.ranges(found) if query is not None else None


def frame_changes(spark: SparkSession, table: TableConfig, batch: FrameBatch, *, batch_number: int) -> ChangeSet:
    """Normalise a batch of records given as a DataFrame (:mod:`lakemerge.batch.frames`)."""
    from pyspark.sql import functions as F

    changes = normalize(
        spark, table, raw_records(spark, batch, key=table.key), batch.files, batch_number=batch_number, feed=batch.rules
    )
    return replace(changes, frame=changes.frame.withColumn(C.SNAPSHOT, F.lit(False)))


def read_changes(
    spark: SparkSession, table: TableConfig, chosen: Sequence[tuple[int, FeedFile]], *, batch_number: int
) -> ChangeSet:
    """Read and normalise each feed's files (file indexes run on across feeds), then union them."""
    from pyspark.sql import functions as F

    parts: list[ChangeSet] = []
    offset = 0
    for index, feed in enumerate(table.feeds):
        group = [f for i, f in chosen if i == index]
        if not group:
            continue
        raw = read_feed(spark, feed, group, offset=offset)
        part = normalize(spark, table, raw, group, batch_number=batch_number, feed=feed, offset=offset)
        parts.append(replace(part, frame=part.frame.withColumn(C.SNAPSHOT, F.lit(feed.snapshot))))
        offset += len(group)
    if len(parts) == 1:
        return parts[0]
    frame = parts[0].frame
    columns = list(parts[0].data_columns)
    for part in parts[1:]:
        frame = frame.unionByName(part.frame, allowMissingColumns=True)
        columns += [c for c in part.data_columns if c not in columns]
    row_data = any(p.row_data for p in parts)
    sometimes = tuple(dict.fromkeys(c for p in parts for c in p.sometimes))
    return ChangeSet(frame, tuple(columns), parts[0].header_lines, row_data=row_data, sometimes=sometimes)
