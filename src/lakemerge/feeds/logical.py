"""Decode a Debezium column's value from its Kafka Connect semantic type, as Spark expressions.

Debezium writes each column in a literal Connect type and names its meaning (its semantic type)
in the event's schema (docs of the PostgreSQL and MySQL connectors, "Data type mappings"):

- ``org.apache.kafka.connect.data.Decimal`` (``decimal.handling.mode=precise``): the unscaled
  value's big-endian two's-complement bytes (base64 text in JSON), the scale a schema parameter;
  ``io.debezium.data.VariableScaleDecimal``: a struct of ``scale`` and such bytes (``value``);
- ``io.debezium.time.Date`` and Connect's ``Date``: days since the epoch; ``Time`` (ms),
  ``MicroTime``, ``NanoTime`` and Connect's ``Time`` (ms): time past midnight; ``Timestamp``
  (ms), ``MicroTimestamp``, ``NanoTimestamp`` and Connect's ``Timestamp`` (ms): time since the
  epoch, without zone; ``ZonedTimestamp``, ``IsoTimestamp``, ``IsoDate``: ISO-8601 text;
  ``StructuredDate`` / ``StructuredTimestamp``: calendar and clock fields;
- bytes (``BYTEA``, ``BLOB``, ``io.debezium.data.Bits``): base64 text in JSON.

Decoded, a decimal is a ``decimal(p,s)`` (a variable-scale one its exact text), a date a ``date``,
a timestamp a ``timestamp`` (``timestamp_ntz`` when the feed declares it; the epoch value read as
UTC), a time of day ``HH:MM:SS.ffffff`` text, bytes ``binary``. ``Json``, ``Uuid``, ``Enum`` and
the other string types are text already. Without a schema, the feed's declared ``types`` and its
:class:`lakemerge.config.feed.DebeziumSettings` say which of these a column is (:func:`resolve`).

A value that does not decode is null with a reason (``error``), so that the batch reports its
file and row (docs/semantics.md §9 Bad records and quarantine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakemerge.config.feed import DebeziumSettings
from lakemerge.errors import ConfigError
from lakemerge.feeds.connect_schema import DECIMAL, VARIABLE_DECIMAL, Logical

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

_TIME = "io.debezium.time."
_CONNECT = "org.apache.kafka.connect.data."
#: Semantic types counting time since the epoch (or midnight), by digits of a second.
_EPOCH_DIGITS = {
    f"{_TIME}Timestamp": 3,
    f"{_TIME}MicroTimestamp": 6,
    f"{_TIME}NanoTimestamp": 9,
    f"{_CONNECT}Timestamp": 3,
}
_TIME_DIGITS = {f"{_TIME}Time": 3, f"{_TIME}MicroTime": 6, f"{_TIME}NanoTime": 9, f"{_CONNECT}Time": 3}
_DATES = (f"{_TIME}Date", f"{_CONNECT}Date")
_ISO_TIMESTAMPS = (f"{_TIME}ZonedTimestamp", f"{_TIME}IsoTimestamp")
_BYTES = ("io.debezium.data.Bits",)
#: Bytes written as text by ``binary.handling.mode`` (``base64``, ``base64-url-safe``, ``hex``).
_TEXT_BYTES = "text-bytes"


@dataclass(frozen=True)
class Decoded:
    """A column's decoded value and, when the value does not decode, why (else null)."""

    column: Column
    error: Column | None


def resolve(
    name: str, raw: DataType, logical: Logical | None, declared: str | None, settings: DebeziumSettings
) -> Logical | None:
    """The semantic type of column ``name``: the event schema's (``logical``), else the one the
    feed's declared type and the connector's settings imply for a value read as ``raw``.

    Raises:
        ConfigError: an integer timestamp column in an ``adaptive`` mode without its fractional
            digits (``feed.debezium.fractional_digits``).
    """
    from pyspark.sql.types import BinaryType, IntegralType, StringType, StructType

    kind = (declared or "").strip().lower()
    if logical is not None:  # the event's schema says how the value is written
        if logical.name is None and isinstance(raw, StringType):
            if logical.type == "bytes":  # bytes go as base64 text in JSON
                return Logical("bytes", "bytes")
            if logical.type == "string" and kind == "binary":  # binary.handling.mode's text
                return Logical(_TEXT_BYTES, "string")
        return logical
    precise = settings.decimal_handling_mode == "precise"
    pair = isinstance(raw, StructType) and set(raw.names) == {"scale", "value"}
    if precise and pair and (kind.startswith("decimal") or kind == "string"):
        return Logical(VARIABLE_DECIMAL, "struct")
    if precise and kind.startswith("decimal") and isinstance(raw, (StringType, BinaryType)):
        return Logical(DECIMAL, "bytes", {"scale": _declared_scale(kind)})
    if kind == "date" and isinstance(raw, IntegralType):
        return Logical(f"{_TIME}Date", "int32")
    if kind == "date" and isinstance(raw, StringType):
        return Logical(f"{_TIME}IsoDate", "string")
    if kind in ("timestamp", "timestamp_ntz", "timestamp_ltz") and isinstance(raw, StringType):
        return Logical(f"{_TIME}IsoTimestamp", "string")
    if kind in ("timestamp", "timestamp_ntz", "timestamp_ltz") and isinstance(raw, IntegralType):
        return Logical(_epoch_type(name, settings), "int64")
    if kind == "binary" and isinstance(raw, StringType):
        return Logical(_TEXT_BYTES, "string")
    return logical


def _declared_scale(kind: str) -> str:
    inside = kind.partition("(")[2].rstrip(")")
    parts = [p.strip() for p in inside.split(",")] if inside else []
    return parts[1] if len(parts) == 2 else "0"


def _epoch_type(name: str, settings: DebeziumSettings) -> str:
    mode = settings.time_precision_mode
    if mode == "connect":
        return f"{_CONNECT}Timestamp"
    if mode in ("microseconds", "nanoseconds"):
        return f"{_TIME}{'Micro' if mode == 'microseconds' else 'Nano'}Timestamp"
    digits = settings.fractional_digits.get(name)
    if digits is None:
        raise ConfigError(
            f"column '{name}' is declared a timestamp and holds integers: with time_precision_mode "
            f"'{mode}' Debezium writes a column of up to 3 fractional digits in milliseconds and one of 4 "
            "to 6 in microseconds; give the column's digits in the source database, e.g. "
            f"fractional_digits = {{ {name} = 6 }}",
            key="feed.debezium.fractional_digits",
        )
    return f"{_TIME}{'' if digits <= 3 else 'Micro' if digits <= 6 else 'Nano'}Timestamp"


def decode(
    name: str,
    value: Column,
    raw: DataType,
    logical: Logical | None,
    *,
    declared: str | None,
    settings: DebeziumSettings,
    scale: Column | None = None,
) -> Decoded:
    """``value`` (read as ``raw``) decoded by its semantic type ``logical`` (see the module
    docstring); ``scale`` is a decimal's scale for each row where events disagree on it."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        DateType,
        DecimalType,
        MapType,
        StringType,
        StructType,
        TimestampType,
    )

    kind = logical.name if logical is not None else None
    ntz = (declared or "").strip().lower() == "timestamp_ntz"
    nested = isinstance(raw, (ArrayType, MapType, StructType))
    if (declared or "").strip().lower() == "string" and nested and kind != VARIABLE_DECIMAL:
        return Decoded(F.to_json(value), None)  # (nested values as JSON text, not Spark's rendering)
    if kind is None or isinstance(raw, (DecimalType, DateType, TimestampType)):
        return Decoded(value, None)
    if kind == DECIMAL and isinstance(raw, (StringType, BinaryType)):
        assert logical is not None
        fixed = logical.number("scale") or 0
        precision = min(logical.number("connect.decimal.precision") or 38, 38)
        text = decimal_text(_bytes(value, raw), scale if scale is not None else F.lit(fixed))
        return _checked(name, value, raw, text.try_cast(f"decimal({max(precision, fixed)},{fixed})"), logical)
    if kind == VARIABLE_DECIMAL:
        return _checked(
            name,
            value,
            raw,
            decimal_text(_bytes(value.getField("value"), _field(raw, "value")), value.getField("scale")),
            logical,
        )
    if kind in _DATES:
        return _checked(name, value, raw, F.date_add(F.lit("1970-01-01").cast("date"), value.cast("int")), logical)
    if kind == f"{_TIME}IsoDate":
        return _checked(name, value, raw, F.regexp_replace(value.cast("string"), "Z$", "").try_cast("date"), logical)
    if kind in _EPOCH_DIGITS:
        return _checked(name, value, raw, epoch(value.cast("long"), _EPOCH_DIGITS[kind], ntz=ntz), logical)
    if kind in _ISO_TIMESTAMPS:
        return _checked(
            name, value, raw, value.cast("string").try_cast("timestamp_ntz" if ntz else "timestamp"), logical
        )
    if kind in _TIME_DIGITS:
        return _checked(name, value, raw, time_text(value.cast("long"), _TIME_DIGITS[kind]), logical)
    if kind in (f"{_TIME}StructuredDate", f"{_TIME}StructuredTimestamp", f"{_TIME}StructuredZonedTimestamp"):
        return _checked(name, value, raw, _structured(value, raw, kind, ntz=ntz), logical)
    if (kind == "bytes" or kind in _BYTES) and isinstance(raw, StringType):
        return _checked(name, value, raw, binary(value, settings, schema_bytes=True), logical)
    if kind == _TEXT_BYTES and isinstance(raw, StringType):
        return _checked(name, value, raw, binary(value, settings), logical)
    return Decoded(value, None)


def _checked(name: str, value: Column, raw: DataType, decoded: Column, logical: Logical | None) -> Decoded:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    what = logical.short if logical is not None else "its type"
    shown = F.to_json(value) if isinstance(raw, StructType) else value.cast("string")
    reason = F.when(
        value.isNotNull() & decoded.isNull(),
        F.format_string(f"cannot decode column '{name}' value '%s' as Debezium {what}", shown),
    )
    return Decoded(decoded, reason)


def _field(raw: DataType, name: str) -> DataType:
    from pyspark.sql.types import StringType, StructType

    if isinstance(raw, StructType) and name in raw.names:
        return raw[name].dataType
    return StringType()


def _bytes(value: Column, raw: DataType) -> Column:
    """The value's bytes: as they are, or from the base64 text JSON carries them in."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    return value if isinstance(raw, BinaryType) else F.try_to_binary(value.cast("string"), F.lit("base64"))


def binary(value: Column, settings: DebeziumSettings, *, schema_bytes: bool = False) -> Column:
    """Bytes from text, as ``binary.handling.mode`` writes them (``bytes`` go as base64 in JSON)."""
    from pyspark.sql import functions as F

    text = value.cast("string")
    mode = "bytes" if schema_bytes else settings.binary_handling_mode
    if mode == "hex":
        return F.try_to_binary(text, F.lit("hex"))
    if mode == "base64-url-safe":
        text = F.translate(text, "-_", "+/")
        padded = F.rpad(text, ((F.length(text) + 3) / 4).cast("int") * 4, "=")
        return F.try_to_binary(padded, F.lit("base64"))
    return F.try_to_binary(text, F.lit("base64"))


def decimal_text(data: Column, scale: Column) -> Column:
    """The exact decimal text of a big-endian two's-complement unscaled value ``data`` (up to 16
    bytes: the 38 digits Spark's decimals hold) at ``scale``; null when it does not fit."""
    from pyspark.sql import functions as F

    digits = F.hex(data)
    negative = F.substring(digits, 1, 1).isin(*"89ABCDEF")
    # A negative value is -(~bits + 1): its magnitude's bits are the complement.
    magnitude = F.when(negative, F.translate(digits, "0123456789ABCDEF", "FEDCBA9876543210")).otherwise(digits)
    size = F.length(magnitude)
    high = F.when(size > 16, F.conv(F.substring(magnitude, F.lit(1), size - 16), 16, 10)).otherwise(F.lit("0"))
    low = F.conv(F.substring(magnitude, F.greatest(size - 15, F.lit(1)), F.lit(16)), 16, 10)
    two64 = F.lit(str(2**64)).cast("decimal(38,0)")
    unsigned = F.try_add(F.try_multiply(high.cast("decimal(38,0)"), two64), low.cast("decimal(38,0)"))
    whole = F.when(negative, F.try_add(unsigned, F.lit(1).cast("decimal(38,0)"))).otherwise(unsigned)
    text = whole.cast("string")
    width = F.greatest(F.length(text), scale + 1)
    padded = F.lpad(text, width, "0")
    point = (
        F.when(
            scale > 0,
            F.concat(
                F.substring(padded, F.lit(1), width - scale), F.lit("."), F.substring(padded, width - scale + 1, scale)
            ),
        )
        .when(scale < 0, F.concat(text, F.repeat(F.lit("0"), -scale)))
        .otherwise(text)
    )
    fits = (size <= 32) & (F.length(digits) > 0)
    return F.when(fits & whole.isNotNull(), F.concat(F.when(negative, F.lit("-")).otherwise(F.lit("")), point))


def epoch(value: Column, digits: int, *, ntz: bool) -> Column:
    """A timestamp from a count since the epoch in units of 10^-``digits`` seconds (read as UTC;
    nanoseconds are cut to the microseconds Spark keeps)."""
    from pyspark.sql import functions as F

    micros = value * 1000 if digits == 3 else value if digits == 6 else F.floor(value / 1000).cast("long")
    if ntz:
        return F.timestamp_add("MICROSECOND", micros, F.lit("1970-01-01 00:00:00").cast("timestamp_ntz"))
    return F.timestamp_micros(micros)


def time_text(value: Column, digits: int) -> Column:
    """``HH:MM:SS.f…`` from a count since midnight in units of 10^-``digits`` seconds."""
    from pyspark.sql import functions as F

    unit = 10**digits
    seconds = F.floor(value / unit).cast("long")
    fraction = value - seconds * unit
    return F.when(
        value >= 0,
        F.format_string(
            f"%02d:%02d:%02d.%0{digits}d", F.floor(seconds / 3600), F.floor(seconds / 60) % 60, seconds % 60, fraction
        ),
    )


def _structured(value: Column, raw: DataType, kind: str, *, ntz: bool) -> Column:
    """A date or timestamp from its calendar and clock fields (read as UTC, as epoch values are)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    names = set(raw.names) if isinstance(raw, StructType) else set()

    def part(field: str) -> Column:
        return value.getField(field).cast("int") if field in names else F.lit(0)

    clock = (part("hour"), part("minute"))
    if kind.endswith("StructuredDate"):
        clock, seconds = (F.lit(0), F.lit(0)), F.lit(0).cast("decimal(16,6)")
    else:
        fraction = (part("nanos") / F.lit(1_000_000_000)).cast("decimal(16,6)")
        seconds = part("second").cast("decimal(16,6)") + fraction
    day = (part("year"), part("month"), part("day"))
    if ntz or kind.endswith("StructuredDate"):
        stamp = F.try_make_timestamp_ntz(*day, *clock, seconds)
    else:
        stamp = F.try_make_timestamp(*day, *clock, seconds, timezone=F.lit("UTC"))
    if kind.endswith("StructuredDate"):
        return stamp.cast("date")
    if kind.endswith("StructuredZonedTimestamp"):
        return stamp - F.make_interval(secs=part("offsetSeconds"))
    return stamp
