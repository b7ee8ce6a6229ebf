"""Debezium events, wherever they come from, read into change rows (see
:mod:`lakemerge.feeds.debezium` for what a row holds and which events change no row)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col
from lakemerge.config.feed import FeedConfig
from lakemerge.config.records import RecordsConfig
from lakemerge.feeds.connect_schema import Logical
from lakemerge.feeds.formats import Read, declared_types
from lakemerge.feeds.logical import decode, resolve

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

TOMBSTONE = "tombstone"
_STAMPS = ("ts_ms", "ts_us", "ts_ns")


@dataclass(frozen=True)
class Envelope:
    """Where an event's parts are, as columns of a frame of events, and their types.

    Attributes:
        parts: ``before``, ``after``, ``source``, ``op``, ``ts_ms``, ``ddl``, ... as columns (only
            those the events have), with their Spark types.
        tombstone: true for a null event (a tombstone).
        malformed: why the event cannot be read, or null.
        raw: the event's text, for bad-row messages, or null.
    """

    parts: Mapping[str, tuple[Column, DataType]]
    tombstone: Column
    malformed: Column
    raw: Column


def envelope_rows(
    frame: DataFrame,
    envelope: Envelope,
    feed: FeedConfig | RecordsConfig,
    logical: Mapping[str, Logical],
    *,
    carried: Sequence[str],
) -> Read:
    """Change rows from a frame of events whose parts ``envelope`` locates (see
    :func:`debezium_rows` for the result; the containers' readers call this too)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    parts = envelope.parts

    def part(name: str) -> Column | None:
        return parts[name][0] if name in parts else None

    def fields_of(name: str) -> dict[str, DataType]:
        kind = parts[name][1] if name in parts else None
        return {f.name: f.dataType for f in kind.fields} if isinstance(kind, StructType) else {}

    after, before = fields_of("after"), fields_of("before")
    # In the table's order where the events' schema gives it (Spark's JSON inference sorts names).
    order = {name: i for i, name in enumerate(logical)}
    names = sorted(dict.fromkeys([*after, *before]), key=lambda n: order.get(n, len(order)))
    op = part("op")
    code = _op_code(parts, envelope.tombstone)
    deleted = op == "d" if op is not None else F.lit(False)
    declared = declared_types(feed)
    selected: list[Column] = []
    errors: list[Column] = []
    for name in names:
        new = part("after").getField(name) if name in after else F.lit(None)  # type: ignore[union-attr]
        old = part("before").getField(name) if name in before else F.lit(None)  # type: ignore[union-attr]
        raw = after[name] if name in after else before[name]
        kind = resolve(name, raw, logical.get(name), declared.get(name), feed.debezium)
        decoded = decode(
            name, F.when(deleted, old).otherwise(new), raw, kind, declared=declared.get(name), settings=feed.debezium
        )
        selected.append(decoded.column.alias(name))
        if decoded.error is not None:
            errors.append(decoded.error)
    meta = [code.alias("__op")]
    meta += [part(s).alias(f"__{s}") for s in _STAMPS if part(s) is not None]  # type: ignore[union-attr]
    sources = list(fields_of("source"))
    meta += [part("source").getField(n).alias(f"__source_{n}") for n in sources]  # type: ignore[union-attr]
    refused = _truncate_refused(code, feed)
    reasons = [envelope.malformed, *([refused] if refused is not None else []), _no_op(code), *errors]
    malformed = F.coalesce(*reasons)
    rows = frame.select(
        *selected,
        *meta,
        F.when(malformed.isNotNull(), envelope.raw).alias(C.RAW),
        malformed.alias(C.MALFORMED),
        *[col(c) for c in carried],
    )
    columns = (*names, "__op", *[f"__{s}" for s in _STAMPS if s in parts], *[f"__source_{n}" for n in sources])
    return Read(rows, columns, 0, row_data=bool(names))


def _op_code(parts: Mapping[str, tuple[Column, DataType]], tombstone: Column) -> Column:
    """The event's op code; for an event without one, what it is (docs/semantics.md §10)."""
    from pyspark.sql import functions as F

    def present(name: str) -> Column:
        return parts[name][0].isNotNull() if name in parts else F.lit(False)

    code = F.when(tombstone, F.lit(TOMBSTONE))
    if "op" in parts:
        code = code.when(parts["op"][0].isNotNull(), parts["op"][0].cast("string"))
    code = code.when(present("ddl") | present("tableChanges"), F.lit("schema_change"))
    code = code.when(present("status") & present("id"), F.lit("transaction"))
    rowless = ~present("after") & ~present("before")
    return code.when(rowless & (present("ts_ms") | present("source")), F.lit("heartbeat"))


def _no_op(code: Column) -> Column:
    from pyspark.sql import functions as F

    return F.when(
        code.isNull(),
        F.lit("not a Debezium change event: no 'op' field (nor a heartbeat, schema change or transaction marker)"),
    )


def _truncate_refused(code: Column, feed: FeedConfig | RecordsConfig) -> Column | None:
    """A truncate event (``op = "t"``) the feed neither applies nor ignores is a bad record."""
    from pyspark.sql import functions as F

    def fold(codes: Sequence[str]) -> set[str]:
        return {c.lower() for c in codes} if feed.op_codes_ignore_case else set(codes)

    if "t" in fold(feed.truncate_codes) | fold(feed.ignore_codes):
        return None
    return F.when(
        code == "t",
        F.lit(
            "a Debezium truncate event (op 't'): set truncate_codes = [\"t\"] in the feed to apply it as a truncate "
            '(docs/semantics.md §4 Truncate), or ignore_codes = ["t"] to skip it'
        ),
    )
