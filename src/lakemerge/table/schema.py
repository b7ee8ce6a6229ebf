"""Column types a table can take from a batch's changes, and the metadata commits that change a
table's columns (docs/semantics.md §7 Schema drift)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakemerge.columns import quoted
from lakemerge.table.store import COLUMN_MAPPING, sql_path, table_properties

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Widening casts allowed from a narrower type to a wider one, as Delta's type widening makes
#: them (decimals: :func:`widens`).
_WIDENS_TO = {
    "tinyint": {"smallint", "int", "bigint"},
    "smallint": {"int", "bigint"},
    "int": {"bigint"},
    "float": {"double"},
    "date": {"timestamp"},
}

_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")

TYPE_WIDENING = "delta.enableTypeWidening"


def widens(narrow: str, wide: str, *, date_to_timestamp: bool) -> bool:
    """Whether every value of the type ``narrow`` (Spark's simple string) is one of ``wide``: an
    integer of fewer bytes, ``float`` to ``double``, a decimal to one with at least as many digits
    before and after the point, ``date`` to ``timestamp`` when ``date_to_timestamp``."""
    if narrow == "date" and wide == "timestamp":
        return date_to_timestamp
    small, large = _DECIMAL.fullmatch(narrow), _DECIMAL.fullmatch(wide)
    if small and large:
        (p1, s1), (p2, s2) = (int(n) for n in small.groups()), (int(n) for n in large.groups())
        return narrow != wide and s2 >= s1 and p2 - s2 >= p1 - s1
    return wide in _WIDENS_TO.get(narrow, set())


def type_widening_enabled(spark: SparkSession, path: str) -> bool:
    """Whether the table allows Delta to widen column types (``delta.enableTypeWidening``).

    Read from the snapshot's metadata (no Spark job, unlike ``DESCRIBE DETAIL``)."""
    return str(table_properties(spark, path).get(TYPE_WIDENING, "false")).lower() == "true"


def allow_widening(spark: SparkSession, path: str) -> None:
    """Turn on Delta's type widening on the table (a metadata commit of its own, which changes no
    data; its readers then need a Delta reader with type widening); nothing when it is on."""
    if not type_widening_enabled(spark, path):
        spark.sql(f"ALTER TABLE {sql_path(path)} SET TBLPROPERTIES ('{TYPE_WIDENING}' = 'true')")


def widen(spark: SparkSession, path: str, column: str, kind: str) -> None:
    """Widen the table's ``column`` to ``kind`` (a metadata commit; type widening on)."""
    spark.sql(f"ALTER TABLE {sql_path(path)} ALTER COLUMN {quoted(column)} TYPE {kind}")


def drop_columns(spark: SparkSession, path: str, columns: Sequence[str]) -> None:
    """Drop ``columns`` from the table: column mapping turned on first where it is off (a metadata
    commit of its own), then one metadata commit dropping them (their values stay in the data
    files, unread)."""
    if table_properties(spark, path).get(COLUMN_MAPPING, "none") == "none":
        spark.sql(f"ALTER TABLE {sql_path(path)} SET TBLPROPERTIES ('{COLUMN_MAPPING}' = 'name')")
    named = ", ".join(quoted(c) for c in columns)
    spark.sql(f"ALTER TABLE {sql_path(path)} DROP COLUMNS ({named})")
