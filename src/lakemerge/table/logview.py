"""The read side of a ``log`` table (``write_mode = 'log'``): its change log and the merged view.

The log (``<table path>__log``) holds, per batch, one row per key the batch writes: the record as
copy-on-write would store it after the batch (partial updates already folded against the merged
state, table columns missing from the feed carried over), or the key of a delete, with the batch
number (``_lm_batch``) and the operation (``_lm_op``: ``U`` or ``D``).

The merged view is, per key, the row of the greatest batch over the table (batch 0) and the log,
kept when it is an upsert. A log row that compaction already folded into the table equals the
table's row, so the view needs no watermark: it is the same before, during and after compaction.

The log's deletes are also the table's tombstones (:func:`tombstones`): a delete of a key the view
does not hold is appended too when the table keeps tombstones, so that one commit records the batch,
its rows and its tombstones. Compaction moves them to the tombstone table before it deletes them here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakemerge import columns as C
from lakemerge.columns import col, quoted
from lakemerge.config import TableConfig
from lakemerge.errors import TableError
from lakemerge.table import stats, store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from lakemerge.table.prune import KeyRanges

#: Columns of the log table beside the data columns.
LOG_OP, LOG_BATCH = C.OP, "_lm_batch"
_RANK = "_lm_rank"


def tombstones(spark: SparkSession, table: TableConfig) -> DataFrame | None:
    """The log's deletes as tombstones: key and sequence columns of its ``D`` rows, read at the log's
    version now (``None`` when there is no log). Each was committed with its batch's record, so every
    one counts."""
    from pyspark.sql import functions as F

    if not log_exists(spark, table):
        return None
    frame = store.read_pinned(spark, table.log_table).filter(F.col(LOG_OP) == "D")
    return frame.select(*[col(c) for c in (*table.key, *table.sequence_columns)])


def log_exists(spark: SparkSession, table: TableConfig) -> bool:
    """Whether the table's change log exists."""
    return store.table_exists(spark, table.log_table)


def merged_view_sql(spark: SparkSession, table: TableConfig, relations: dict[str, str] | None = None) -> str | None:
    """The SQL of the merged view over the table and its log as their schemas are now (``None``
    when neither exists). Usable for a temporary or a persistent view; recreate it after the
    schema gains columns. ``relations`` reads a path from the named relation instead."""
    schemas = {
        path: spark.read.format("delta").load(path).schema
        for path in (table.path, table.log_table)
        if store.table_exists(spark, path)
    }
    return _view_sql(table, schemas, relations, deletes=False)


def _view_sql(
    table: TableConfig, schemas: dict[str, StructType], relations: dict[str, str] | None, *, deletes: bool
) -> str | None:
    """:func:`merged_view_sql` over the table and log whose ``schemas`` are given (by path; a path
    left out does not exist). ``deletes``: keep the keys whose newest row is a delete too, with the
    ``_lm_op`` column (``U`` or ``D``)."""
    table_schema, log_schema = schemas.get(table.path), schemas.get(table.log_table)
    if log_schema is None:
        if table_schema is None:
            return None
        op = f", 'U' AS {LOG_OP}" if deletes else ""
        return f"SELECT *{op} FROM {_relation(table.path, relations)}"
    log_types = {f.name: f.dataType.simpleString() for f in log_schema.fields if f.name not in (LOG_OP, LOG_BATCH)}
    table_types = {f.name: f.dataType.simpleString() for f in table_schema.fields} if table_schema else {}
    columns = [*table_types, *[c for c in log_types if c not in table_types]]

    def side(types: dict[str, str], op: str, batch: str, path: str) -> str:
        cols = [
            quoted(c) if c in types else f"CAST(NULL AS {table_types.get(c) or log_types[c]}) AS {quoted(c)}"
            for c in columns
        ]
        return f"SELECT {', '.join(cols)}, {op} AS {LOG_OP}, {batch} AS {LOG_BATCH} FROM {_relation(path, relations)}"

    parts = [side(log_types, LOG_OP, f"CAST({LOG_BATCH} AS BIGINT)", table.log_table)]
    if table_schema is not None:
        parts.insert(0, side(table_types, "'U'", "CAST(0 AS BIGINT)", table.path))
    keys = ", ".join(quoted(k) for k in table.key)
    listed = ", ".join(quoted(c) for c in columns)
    chosen = f"{listed}, {LOG_OP}" if deletes else listed
    kept = "" if deletes else f" AND {LOG_OP} = 'U'"
    return (
        f"SELECT {chosen} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY {LOG_BATCH} DESC) "
        f"AS {_RANK} FROM ({' UNION ALL '.join(parts)})) WHERE {_RANK} = 1{kept}"
    )


def merged_schema(table: TableConfig, sides: dict[str, DataFrame]) -> StructType | None:
    """The columns and types of :func:`merged` over ``sides``, from their schemas, without building
    the view (a few ms of Spark's analysis a batch): the table's columns, then the log's columns the
    table lacks. ``None`` when neither side exists, or when a column is typed differently in the
    table and the log (the view's type is then what Spark's union makes of the two)."""
    from pyspark.sql.types import StructField, StructType

    table_side, log_side = sides.get(table.path), sides.get(table.log_table)
    table_fields = {f.name: f for f in table_side.schema.fields} if table_side is not None else {}
    log_fields = {f.name: f for f in log_side.schema.fields} if log_side is not None else {}
    if not table_fields and not log_fields:
        return None
    fields: list[StructField] = list(table_fields.values())
    for name, field in log_fields.items():
        if name in (LOG_OP, LOG_BATCH):
            continue
        if name not in table_fields:
            fields.append(field)
        elif table_fields[name].dataType != field.dataType:
            return None
    return StructType(fields)


def read_merged(spark: SparkSession, table: TableConfig, keys: DataFrame | None = None) -> DataFrame | None:
    """What copy-on-write would hold now: the table with its log applied (``None`` when neither exists).

    Table and log are read at their versions now (:func:`store.read_pinned`), so that a batch's
    append to the log leaves its cached classification alone. With ``keys`` (key columns of a batch
    whose keys can be broadcast: ``lakemerge.batch.plan.KEY_BROADCAST_ROWS``), only those keys' rows:
    table and log are each reduced to them by a broadcast semi-join (one broadcast serves both
    when adaptive execution is off, as it is for a batch) before the per-key ranking, so that a
    batch never shuffles the whole table (the ranking is per key, so the result is the same rows)."""
    return merged(table, read_sides(spark, table), keys=keys)


def newest_of_keys(
    spark: SparkSession, table: TableConfig, keys: DataFrame, sides: dict[str, DataFrame] | None = None
) -> DataFrame | None:
    """For each of ``keys`` (key columns of a batch whose keys can be broadcast) that the table or its
    log holds: its newest row, a delete too, with ``_lm_op`` (``None`` when neither exists).
    ``sides``: the table and log as :func:`read_sides` read them for the same batch.

    One read of the log gives a batch both its stored rows (the ``U`` rows: :func:`read_merged`
    with ``keys``) and its tombstones from the log: a key's newest delete is the only one that
    counts, because a batch writes a delete (or any change) only when its sequence is at least the
    key's stored row's and newest tombstone's; and while the key's newest row is an upsert, no
    tombstone of it is looked at."""
    return merged(table, read_sides(spark, table) if sides is None else sides, keys=keys, deletes=True)


def narrowed(table: TableConfig, sides: dict[str, DataFrame], columns: Sequence[str]) -> dict[str, DataFrame]:
    """``sides`` (:func:`read_sides`) with only those of ``columns`` each holds (the log keeps its
    operation and batch columns too): the view over them holds those columns alone, so that a
    reader of any other fails instead of finding it null."""
    narrow: dict[str, DataFrame] = {}
    for path, frame in sides.items():
        extra = (LOG_OP, LOG_BATCH) if path == table.log_table else ()
        present = set(frame.columns)
        narrow[path] = frame.select(*[col(c) for c in dict.fromkeys((*columns, *extra)) if c in present])
    return narrow


def read_sides(
    spark: SparkSession, table: TableConfig, *, listed: bool = False, ranges: KeyRanges | None = None
) -> dict[str, DataFrame]:
    """The table and its log, those that exist, each read at its version now (by path): what
    :func:`merged` builds a view of. A batch reads them once for all the views it needs.

    The log, which has a new version after every batch, is read from its version's list of files
    where Delta's checksum keeps one (:func:`stats.read_listed`), without reconstructing that
    version's state from its commits. With ``listed`` (a batch that filters the sides by its key
    ranges, or by nothing Delta could skip files for), the table is read from its list too, with no
    Spark job for Delta's file skipping, and with ``ranges`` (those key ranges) both sides leave out
    the files whose key statistics miss them, as that skipping would. Without, the table is read
    through Delta, whose file skipping serves the caller's own filters. A side whose checksum lists
    no files (more than Delta lists there) is read through Delta, filtered by ``ranges`` for its file
    skipping. Either way the files read may hold rows outside ``ranges``: a caller that reads only
    the batch's own keys of them needs no other filter (whose literals, new with every batch, would
    make Spark compile new code for it every batch)."""
    within = (ranges.column, ranges.overlaps) if ranges is not None else None
    sides: dict[str, DataFrame] = {}
    logged = store.table_exists(spark, table.log_table)
    for path in (table.path, table.log_table):
        if not (logged if path == table.log_table else store.table_exists(spark, path)):
            continue
        if path == table.path and logged and stats.lists_no_files(spark, path):
            continue  # (the table before its first compaction: the log holds every row, and the schema)
        version = None
        if listed or path == table.log_table:
            found = stats.read_listed(spark, path, within=within)
        else:
            found, version = stats.read_if_empty(spark, path)  # (the table before its first compaction)
        if found is None:
            # Read through Delta, whose file skipping takes the ranges as a filter.
            found = store.read_pinned(spark, path) if version is None else store.read_version(spark, path, version)
            found = found.filter(ranges.predicate()) if ranges is not None else found
        sides[path] = found
    return sides


def merged(
    table: TableConfig, sides: dict[str, DataFrame], *, keys: DataFrame | None = None, deletes: bool = False
) -> DataFrame | None:
    """The merged view over ``sides`` (:func:`read_sides`), reduced to ``keys`` when given (see
    :func:`read_merged`); ``deletes``: a key's newest row also when it is a delete (see
    :func:`newest_of_keys`). ``None`` when neither side exists."""
    from pyspark.sql import functions as F

    relations: dict[str, str] = {}
    schemas: dict[str, StructType] = {}
    frames: dict[str, Any] = {}
    spark = None
    for number, (path, frame) in enumerate(sides.items()):
        spark = frame.sparkSession
        schemas[path] = frame.schema
        if keys is not None:
            frame = frame.join(F.broadcast(keys), on=list(table.key), how="left_semi")
        # (A placeholder no SQL text holds, for the DataFrame argument of the statement.)
        relations[path] = f"_lm_side_{number}_{uuid.uuid4().hex}"
        frames[f"side{number}"] = frame
    if spark is None:
        return None
    # The schemas of the versions just read: no second load of either path. The sides are the
    # statement's DataFrame arguments (no temporary view, which a Spark Connect session would
    # resolve only when the frame runs).
    sql = _view_sql(table, schemas, relations, deletes=deletes)
    if sql is None:
        return None
    sql = sql.replace("{", "{{").replace("}", "}}")
    for number, name in enumerate(relations.values()):
        sql = sql.replace(name, f"{{side{number}}}")
    return spark.sql(sql, **frames)


def with_file_column(merged: DataFrame) -> DataFrame:
    """The merged view with a null ``_metadata.file_path`` (classification asks where each stored
    row lives, to count touched files; a log batch rewrites none)."""
    from pyspark.sql import functions as F

    return merged.withColumn("_metadata", F.struct(F.lit(None).cast("string").alias("file_path")))


def register_view(spark: SparkSession, table: TableConfig, name: str | None = None) -> str:
    """Register the merged view as a temporary view (default name ``<table name>_merged``); its name."""
    view = name or f"{table.name}_merged"
    sql = merged_view_sql(spark, table)
    if sql is None:
        raise TableError(f"table '{table.name}' has neither a Delta table nor a change log at {table.path}")
    spark.sql(sql).createOrReplaceTempView(view)
    return view


def _relation(path: str, relations: dict[str, str] | None) -> str:
    return (relations or {}).get(path) or store.sql_path(path)
