"""Turn raw feed rows into change records: typed columns, one operation, one sequence, and the
reason a row is bad (or null).

Nothing is dropped here: a bad row keeps its place with ``_lm_error`` set, so that the batch can
report it with its file and row (and, later, quarantine it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col, quoted, sql_string
from lakemerge.config.feed import FeedConfig
from lakemerge.config.records import RecordsConfig
from lakemerge.config.table import FILE_SEQUENCE_COLUMN, LOAD_PHASE_COLUMN, TableConfig
from lakemerge.errors import ConfigError, InputError
from lakemerge.feeds import utf8
from lakemerge.feeds.dms import is_full_load
from lakemerge.feeds.files import FeedFile
from lakemerge.feeds.readers import RawFeed

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_GENERATED = re.compile(r"^c(\d+)$")
_DELIMITED = ("csv", "text")


@dataclass(frozen=True)
class ChangeSet:
    """Change records of one batch.

    Attributes:
        frame: data columns (typed; without the op column) plus ``_lm_op`` (``U``/``D``),
            ``_lm_error`` and the provenance columns of :mod:`lakemerge.feeds.readers`.
        data_columns: the columns destined for the table, in feed order (key, sequence and
            partition columns included; ``_lm_sequence`` included when derived from file names).
        header_lines: lines before the first record of each file.
        row_data: whether any record holds a row (see :class:`lakemerge.feeds.readers.RawFeed`).
        sometimes: data columns some records lack (see :class:`lakemerge.feeds.readers.RawFeed`).
    """

    frame: DataFrame
    data_columns: tuple[str, ...]
    header_lines: int
    row_data: bool = True
    sometimes: tuple[str, ...] = ()


def normalize(
    spark: SparkSession,
    table: TableConfig,
    raw: RawFeed,
    files: Sequence[FeedFile],
    *,
    batch_number: int = 0,
    feed: FeedConfig | RecordsConfig,
    offset: int = 0,
) -> ChangeSet:
    """Type the raw rows, derive operation and sequence, and flag bad rows.

    Raises:
        InputError: a configured column (key, sequence, op, partition) is not in the feed.
        ConfigError: a configured type is not a Spark SQL type.
    """
    from pyspark.sql import functions as F

    raw = raw.completed((*table.key, *table.sequence, *table.partition_by))
    _check_columns_exist(table, feed, raw, files)
    problem = table.unknown_column([raw.columns if f is feed else None for f in table.feeds])
    if problem is not None:
        key, message = problem
        raise ConfigError(f"{files[0].path}: {message}; nothing was applied", key=f"tables.{table.name}.{key}")
    # The checks are SQL text, each expression parsed once: built of PySpark's functions, a JSON
    # record of 13 columns cost about 340 calls into the JVM a batch, as text about 60. Errors are
    # (condition, reason) pairs; the first that holds is the row's reason.
    errors: list[tuple[str, str]] = [(f"{quoted(C.MALFORMED)} IS NOT NULL", quoted(C.MALFORMED))]
    casts = _casts(spark, feed, raw, errors)
    op, op_errors = _operation(feed, files, offset)
    # Key and sequence must be present (a truncate needs no key; an ignored record needs neither).
    for name in table.key:
        errors.append((f"{quoted(name)} IS NULL AND NOT ({op}) IN ('T', 'N')", sql_string(f"null key column '{name}'")))
    for name in table.sequence:
        errors.append((f"{quoted(name)} IS NULL AND ({op}) <> 'N'", sql_string(f"null sequence column '{name}'")))
    errors.extend(op_errors)
    error = F.expr("CASE " + " ".join(f"WHEN {c} THEN {r}" for c, r in errors) + " END")

    data_columns = [c for c in raw.columns if c != feed.op_column and _kept(table, feed, c)]
    selected = [F.expr(f"{casts[c]} AS {quoted(c)}") if c in casts else col(c) for c in data_columns]
    derived = _derived_column(table, feed, files, batch_number=batch_number, offset=offset)
    if derived is not None:
        selected.append(derived[1].alias(derived[0]))
        data_columns.append(derived[0])
    frame = raw.frame.select(
        *selected,
        F.expr(f"{op} AS {quoted(C.OP)}"),
        error.alias(C.ERROR),
        C.FILE,
        C.BLOCK,
        C.ROW_ID,
        F.when(error.isNotNull(), _raw_record(feed, raw)).alias(C.RAW),
        F.lit(raw.header_lines).alias(C.HEADER),
        _replaced(feed, raw).alias(C.REPLACED),
        *([C.PLACE] if C.PLACE in raw.frame.columns else []),
    )
    sometimes = tuple(c for c in raw.sometimes if c in data_columns)
    return ChangeSet(
        frame=frame,
        data_columns=tuple(data_columns),
        header_lines=raw.header_lines,
        row_data=raw.row_data,
        sometimes=sometimes,
    )


def _casts(
    spark: SparkSession, feed: FeedConfig | RecordsConfig, raw: RawFeed, errors: list[tuple[str, str]]
) -> dict[str, str]:
    """The cast of each column that has a type to take, by name; a value it cannot convert is an
    error (appended to ``errors``). Delimited formats read strings, and so do JSON records given as
    a DataFrame: the feed's schema types them, and ``types`` types any column."""
    as_text = feed.format in _DELIMITED or (isinstance(feed, RecordsConfig) and feed.format == "json")
    targets = dict(_ddl_types(feed.schema_ddl) if feed.schema_ddl and as_text else {})
    targets.update(feed.types)
    casts: dict[str, str] = {}
    for name, type_name in targets.items():
        if name not in raw.columns:
            continue
        if name in feed.types:  # (the schema's types were parsed with it)
            _check_type(spark, type_name, name)
        value, cast = quoted(name), f"try_cast({quoted(name)} AS {type_name})"
        named = name.replace("%", "%%")  # (the message is a format: a % in a name stands for itself)
        message = sql_string(f"cannot convert column '{named}' value '%s' to {type_name}")
        errors.append((f"{value} IS NOT NULL AND {cast} IS NULL", f"format_string({message}, {value})"))
        casts[name] = cast
    return casts


def _derived_column(
    table: TableConfig,
    feed: FeedConfig | RecordsConfig,
    files: Sequence[FeedFile],
    *,
    batch_number: int,
    offset: int,
) -> tuple[str, Column] | None:
    """The column lakemerge derives for ordering, with its name: the file's sequence number when the
    table has no sequence columns, or the load phase; a DMS full load precedes every change of its
    table (docs/semantics.md §10 Operation codes)."""
    from pyspark.sql import functions as F

    loads = [i + offset for i, f in enumerate(files) if is_full_load(feed, f)]
    if not table.sequence:
        order = feed.file_order
        per_file = [
            0
            if i + offset in loads
            else f.name_number
            if order == "name_number"
            else f.modified
            if order == "mtime"
            else batch_number
            for i, f in enumerate(files)
        ]
        numbers = F.create_map(*[x for i, n in enumerate(per_file) for x in (F.lit(i + offset), F.lit(n))])
        number = F.lit(per_file[0]) if len(set(per_file)) == 1 else numbers[F.col(C.FILE)]
        return FILE_SEQUENCE_COLUMN, number.cast("long")
    if table.load_phase:
        phase = F.when(F.col(C.FILE).isin(loads), F.lit(0)).otherwise(F.lit(1)) if loads else F.lit(1)
        return LOAD_PHASE_COLUMN, phase.cast("int")
    return None


def _raw_record(feed: FeedConfig | RecordsConfig, raw: RawFeed) -> Column:
    """A row's raw record, for messages and the quarantine: as read when the reader kept it, else the
    fields joined by the delimiter (delimited formats) or the row as JSON."""
    from pyspark.sql import functions as F

    originals = [quoted(c) for c in raw.columns]
    if isinstance(feed, FeedConfig) and feed.format == "csv":
        fields = ", ".join(f"coalesce(CAST({c} AS STRING), '')" for c in originals)
        rebuilt = f"concat_ws({sql_string(feed.delimiter)}, {fields})"
    else:
        rebuilt = f"to_json(struct({', '.join(originals)}))"
    return F.expr(f"coalesce({quoted(C.RAW)}, {rebuilt})")


def _replaced(feed: FeedConfig | RecordsConfig, raw: RawFeed) -> Column:
    """Whether a UTF-8 decoder may have put U+FFFD in the row (:mod:`lakemerge.feeds.utf8` tells
    which rows are bad)."""
    from pyspark.sql import functions as F

    if not (isinstance(feed, FeedConfig) and feed.format in utf8.DECODED and utf8.checks(feed)):
        return F.lit(False)
    texts = [
        col(f.name) for f in raw.frame.schema.fields if f.name in raw.columns and f.dataType.typeName() == "string"
    ]
    return utf8.replaced([*texts, F.col(C.RAW)])


def _operation(
    feed: FeedConfig | RecordsConfig, files: Sequence[FeedFile], offset: int
) -> tuple[str, list[tuple[str, str]]]:
    """The normalised operation (``U``, ``D``, ``T`` for truncate, ``N`` for an ignored record) and
    the checks on op codes, as SQL (the op null for a null or unknown code)."""
    errors: list[tuple[str, str]] = []
    delete_files = [str(i + offset) for i, f in enumerate(files) if f.is_delete_file(feed.delete_file_prefix)]
    in_delete_file = f"{quoted(C.FILE)} IN ({', '.join(delete_files)})" if delete_files else "FALSE"
    op = "'U'"
    if feed.op_column:
        raw_code = f"CAST({quoted(feed.op_column)} AS STRING)"
        code = f"lower({raw_code})" if feed.op_codes_ignore_case else raw_code

        def among(codes: Sequence[str]) -> str:
            folded = [c.lower() for c in codes] if feed.op_codes_ignore_case else list(codes)
            return f"{code} IN ({', '.join(sql_string(c) for c in folded)})" if folded else "FALSE"

        deletes, upserts, truncates, ignores = (
            feed.delete_codes,
            feed.upsert_codes,
            feed.truncate_codes,
            feed.ignore_codes,
        )
        branches = [(among(deletes), "'D'"), (among(truncates), "'T'"), (among(ignores), "'N'")]
        if upserts:
            branches.append((among(upserts), "'U'"))
            known = among([*deletes, *upserts, *truncates, *ignores])
            unknown = sql_string("unknown op code '%s'")
            errors.append((f"{code} IS NOT NULL AND NOT {known}", f"format_string({unknown}, {raw_code})"))
        else:
            branches.append((f"{code} IS NOT NULL", "'U'"))
        op = "CASE " + " ".join(f"WHEN {c} THEN {v}" for c, v in branches) + " END"
        message = sql_string(f"null op code in column '{feed.op_column}'")
        errors.append((f"{code} IS NULL AND NOT {in_delete_file}", message))
    return f"CASE WHEN {in_delete_file} THEN 'D' ELSE {op} END", errors


def _kept(table: TableConfig, feed: FeedConfig | RecordsConfig, column: str) -> bool:
    if column in (*table.key, *table.sequence, *table.partition_by):
        return True
    if feed.format == "debezium" and column.startswith("__") and column not in feed.keep_columns:
        return False  # event metadata is stored only when it orders changes (the sequence)
    if feed.keep_columns and column not in feed.keep_columns:
        return False
    return column not in feed.drop_columns


def _check_columns_exist(
    table: TableConfig, feed: FeedConfig | RecordsConfig, raw: RawFeed, files: Sequence[FeedFile]
) -> None:
    wanted = [("key", c) for c in table.key] + [("sequence", c) for c in table.sequence]
    wanted += [("partition_by", c) for c in table.partition_by]
    if feed.op_column:
        wanted.append(("op_column", feed.op_column))
    for role, name in wanted:
        if name in raw.columns:
            continue
        generated = _GENERATED.match(name)
        if generated and not feed.columns and not feed.header and not feed.schema_ddl:
            raise InputError(
                f"the {role} refers to field ordinal {generated.group(1)}, but records have "
                f"{len(raw.columns)} fields (ordinals 0 to {len(raw.columns) - 1})",
                path=files[0].path,
            )
        raise InputError(
            f"{role} column '{name}' is not in the feed's columns ({', '.join(raw.columns)})", path=files[0].path
        )


def _ddl_types(ddl: str) -> dict[str, str]:
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return {f.name: f.dataType.simpleString() for f in schema.fields}


#: Type names already parsed in this process (parsing one is a call into the JVM).
_PARSED_TYPES: set[str] = set()


def _check_type(spark: SparkSession, type_name: str, column: str) -> None:
    from pyspark.sql.types import _parse_datatype_string

    if type_name in _PARSED_TYPES:
        return
    try:
        _parse_datatype_string(type_name)
    except Exception:
        raise ConfigError(f"'{type_name}' is not a Spark SQL type", key=f"feed.types.{column}") from None
    _PARSED_TYPES.add(type_name)
