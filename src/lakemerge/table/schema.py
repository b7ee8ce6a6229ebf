"""Match a batch's column types to the table's: widening only (docs/semantics.md §7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakemerge.columns import col
from lakemerge.errors import SchemaError
from lakemerge.table.store import table_properties

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

# Widening casts allowed from the feed's type to the table's (docs/semantics.md §7).
_WIDENS_TO = {
    "tinyint": {"smallint", "int", "bigint"},
    "smallint": {"int", "bigint"},
    "int": {"bigint"},
    "float": {"double"},
    "date": {"timestamp"},
}


def conform(
    frame: DataFrame,
    stored: StructType,
    columns: Sequence[str],
    *,
    feed: str,
    date_to_timestamp: bool = False,
    table_widens: bool = False,
) -> DataFrame:
    """Match the batch's column types to the table's (docs/semantics.md §7 Schema drift).

    A feed type narrower than the table's is cast up (int → bigint, float → double, and
    date → timestamp when ``date_to_timestamp``). A feed type wider than the table's widens the
    table's column, which Delta does in the batch's own commit when the table has
    ``delta.enableTypeWidening`` (``table_widens``). Anything else fails.

    ``stored``: the table's schema (in ``log`` mode, its merged view's).

    Raises:
        SchemaError: naming the column, both types and the feed.
    """

    stored_types = {f.name.lower(): f.dataType for f in stored.fields}
    incoming = {f.name: f.dataType for f in frame.schema.fields}
    out = frame
    for name in columns:
        want = stored_types.get(name.lower())
        have = incoming[name]
        if want is None or want == have:
            continue
        have_s, want_s = have.simpleString(), want.simpleString()
        if have_s == "void" or _widens(have_s, want_s, date_to_timestamp):
            out = out.withColumn(name, col(name).cast(want))
            continue
        if _widens(want_s, have_s, False):
            if table_widens:
                continue
            raise SchemaError(
                f"{feed}: column '{name}' is {have_s.upper()} in the feed but {want_s.upper()} in the table; "
                "widening the table's column needs the table property delta.enableTypeWidening = true; "
                "nothing was applied"
            )
        raise SchemaError(
            f"{feed}: column '{name}' is {have_s.upper()} in the feed but {want_s.upper()} in the table; "
            "only widening (int → bigint, float → double) is allowed; nothing was applied"
        )
    return out


def _widens(narrow: str, wide: str, date_to_timestamp: bool) -> bool:
    if narrow == "date" and wide == "timestamp":
        return date_to_timestamp
    return wide in _WIDENS_TO.get(narrow, set())


def type_widening_enabled(spark: SparkSession, path: str) -> bool:
    """Whether the table allows Delta to widen column types (``delta.enableTypeWidening``).

    Read from the snapshot's metadata (no Spark job, unlike ``DESCRIBE DETAIL``)."""
    return str(table_properties(spark, path).get("delta.enableTypeWidening", "false")).lower() == "true"
