"""A batch's changes matched to the table's columns by its ``schema_changes`` policy
(docs/semantics.md §7 Schema drift): new columns added, left out or refused; columns the changes
lack kept, nulled or dropped; narrower types cast up, wider ones widening the table's column or
refused; any other type refused (or, with ``incompatible_type = "quarantine"``, its values that do
not convert quarantined before this: :func:`quarantined_types`).

What the table's metadata must change before the batch's commit (a column dropped, type widening
turned on, a widening Delta's MERGE does not make by itself) is done by
:func:`lakemerge.batch.commit.commit_batch`; each change is recorded in the batch's commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.changes.bad_rows import first_row
from lakemerge.changes.normalize import ChangeSet
from lakemerge.columns import col
from lakemerge.config import TableConfig
from lakemerge.config.table import SCD2_COLUMNS
from lakemerge.errors import SchemaError
from lakemerge.feeds.files import FeedFile
from lakemerge.results import SchemaChange
from lakemerge.table.schema import widens
from lakemerge.table.snapshots import is_delta, latest_snapshot

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructField, StructType


@dataclass(frozen=True)
class Conformed:
    """The changes with the table's column types, their data columns, and what the batch changes
    of the table's columns."""

    frame: DataFrame
    columns: tuple[str, ...]
    changes: tuple[SchemaChange, ...] = ()
    #: Columns of the table some records lack, kept as stored where they lack them (partial
    #: updates: docs/semantics.md §3) by ``dropped_column = "keep"``.
    folded: tuple[str, ...] = ()


def conform(
    table: TableConfig,
    frame: DataFrame,
    stored: StructType,
    columns: Sequence[str],
    *,
    files: Sequence[FeedFile],
    feed: str,
    table_widens: bool,
    sometimes: Sequence[str] = (),
) -> Conformed:
    """Match the changes ``frame`` (data columns ``columns``) to the table's schema ``stored`` (in
    ``log`` mode, its merged view's) by the table's policy. ``table_widens``: the table has
    Delta's type widening on; ``sometimes``: the columns some records lack (Debezium events of
    the table before and after it changed).

    Raises:
        SchemaError: a change the policy refuses, naming the table, the column, both types and
            the first record holding a value in the column.
    """
    policy = table.schema_changes
    types = {f.name.lower(): f for f in stored.fields}
    given = {f.name: f.dataType for f in frame.schema.fields}
    out, kept, changes = frame, [], []
    for name in columns:
        field = types.get(name.lower())
        have = given[name]
        if field is None:
            if policy.new_column == "ignore":
                out = out.drop(name)
                changes.append(SchemaChange(name, "ignored", have.simpleString()))
                continue
            if policy.new_column == "fail":
                raise _refused(table, out, name, files, f"is not in the table ({feed}; {have.simpleString().upper()})")
            changes.append(SchemaChange(name, "added", have.simpleString()))
        elif field.dataType != have:
            change = _typed(table, out, name, have, field.dataType, files=files, feed=feed, table_widens=table_widens)
            if change is None:
                out = out.withColumn(name, col(name).cast(field.dataType))
            else:
                changes.append(change)
        kept.append(name)
    for field in _lacking(table, stored, kept):
        if table.schema_changes.dropped_column == "null":
            out = out.withColumn(field.name, _null(field.dataType))
            kept.append(field.name)
            changes.append(SchemaChange(field.name, "nulled", field.dataType.simpleString()))
        elif table.schema_changes.dropped_column == "drop":
            changes.append(SchemaChange(field.name, "dropped", was=field.dataType.simpleString()))
    folded: tuple[str, ...] = ()
    if table.schema_changes.dropped_column == "keep":
        folded = tuple(c for c in sometimes if c.lower() in types and c in kept and c not in table.key)
    return Conformed(out, tuple(kept), tuple(changes), folded)


def _typed(
    table: TableConfig,
    frame: DataFrame,
    name: str,
    have: DataType,
    want: DataType,
    *,
    files: Sequence[FeedFile],
    feed: str,
    table_widens: bool,
) -> SchemaChange | None:
    """What a column typed ``have`` in the changes and ``want`` in the table does: ``None`` when
    its values are cast to the table's type (a narrower type, or ``void``), a widening of the
    table's column when the policy allows one.

    Raises:
        SchemaError: a wider type the policy or the write mode refuses, or an incompatible one.
    """
    have_s, want_s = have.simpleString(), want.simpleString()
    types = f"is {have_s.upper()} in the feed but {want_s.upper()} in the table"
    if have_s == "void" or widens(have_s, want_s, date_to_timestamp=table.widen_date_to_timestamp):
        return None
    if widens(want_s, have_s, date_to_timestamp=False):
        if table.log_mode:
            raise _refused(table, frame, name, files, f"{types} ({feed}); a table with a change log keeps its types")
        policy = table.schema_changes.widened_type
        if policy == "fail":
            raise _refused(table, frame, name, files, f"{types} ({feed}); schema_changes.widened_type = 'fail'")
        if policy == "widen" and not table_widens:
            raise _refused(
                table,
                frame,
                name,
                files,
                f"{types} ({feed}); widening the table's column needs Delta's type widening on the table: "
                "set the table property delta.enableTypeWidening = true, or schema_changes.widened_type = "
                "'enable' (its readers then need to support type widening)",
            )
        return SchemaChange(name, "widened", have_s, want_s)
    raise _refused(
        table,
        frame,
        name,
        files,
        f"{types} ({feed}); only widening (int → bigint, float → double, a decimal of more digits) is "
        "allowed, or set schema_changes.incompatible_type = 'quarantine'",
    )


def _lacking(table: TableConfig, stored: StructType, columns: Sequence[str]) -> list[StructField]:
    """The table's columns the changes lack (lakemerge's own columns and the key, sequence and
    partition columns aside, which a batch cannot lack)."""
    present = {c.lower() for c in columns}
    own = {c.lower() for c in (*table.key, *table.sequence_columns, *table.partition_by, *SCD2_COLUMNS)}
    return [
        f
        for f in stored.fields
        if f.name.lower() not in present and f.name.lower() not in own and not f.name.startswith(C.RESERVED_PREFIX)
    ]


def _null(kind: DataType) -> Column:
    from pyspark.sql import functions as F

    return F.lit(None).cast(kind)


def _refused(table: TableConfig, frame: DataFrame, name: str, files: Sequence[FeedFile], why: str) -> SchemaError:
    """The error for a change of column ``name`` the policy refuses, naming the first record holding
    a value in it (a Spark job, on the way to failing)."""
    found = first_row(frame, col(name).isNotNull(), files)
    where = "" if found is None else f"; first in {found[1]}" + (f", row {found[2]}" if found[2] is not None else "")
    return SchemaError(f"table '{table.name}' ({table.path}): column '{name}' {why}{where}; nothing was applied")


def quarantined_types(spark: SparkSession, table: TableConfig, changes: ChangeSet, *, exists: bool) -> ChangeSet:
    """With ``incompatible_type = "quarantine"``, each column whose type in the changes is neither
    the table's nor one it widens from or to, read as the table's type: a record whose value in it
    does not convert is a bad record naming both types (a key's in any record, another column's in
    an upsert; a delete needs only its key), which the table's quarantine takes."""
    from pyspark.sql import functions as F

    if table.schema_changes.incompatible_type != "quarantine" or not exists:
        return changes
    path = table.log_table if table.log_mode and is_delta(spark, table.log_table) else table.path
    types = {f.name.lower(): f.dataType for f in latest_snapshot(spark, path).schema().fields}
    given = {f.name: f.dataType for f in changes.frame.schema.fields}
    error, converted = F.col(C.ERROR), {}
    keys = {k.lower() for k in table.key}
    for name in changes.data_columns:
        want, have = types.get(name.lower()), given.get(name)
        if want is None or have is None or want == have:
            continue
        have_s, want_s = have.simpleString(), want.simpleString()
        if have_s == "void" or widens(have_s, want_s, date_to_timestamp=table.widen_date_to_timestamp):
            continue
        if widens(want_s, have_s, date_to_timestamp=False):
            continue
        value = col(name).try_cast(want)
        reason = (
            f"column '{name}' is {have_s.upper()} in the feed but {want_s.upper()} in the table: the value does not fit"
        )
        counts = F.col(C.OP) != "N" if name.lower() in keys else F.col(C.OP) == "U"
        error = F.coalesce(error, F.when(counts & col(name).isNotNull() & value.isNull(), F.lit(reason)))
        converted[name] = value
    if not converted:
        return changes
    frame = changes.frame.withColumn(C.ERROR, error).withColumns(converted)
    return replace(changes, frame=frame)
