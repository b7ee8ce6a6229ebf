"""Schemas from files' own metadata, read in Python: a Parquet footer (through pyarrow) and an Avro
container's header (a small reader of its metadata map).

:func:`parquet_schema` gives the schema Spark reads from a footer (Spark's
``ParquetFileFormat.readSchemaFromFooter``): the Spark schema a Spark writer keeps in the footer,
else the Parquet schema converted by Spark's rules (``ParquetToSparkSchemaConverter``), every field
nullable as a file source makes them. A Parquet type it does not know gives ``None``: Spark's own
inference then decides.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType

#: Where Spark's Parquet writer keeps the Spark schema of the rows (JSON).
SPARK_SCHEMA = "org.apache.spark.sql.parquet.row.metadata"

#: Spark's decimals hold 38 digits.
_MAX_PRECISION = 38

#: The magic bytes an Avro object container file starts with.
AVRO_MAGIC = b"Obj\x01"


class Unknown(ValueError):
    """A Parquet type that these rules do not convert (Spark's inference decides)."""


@dataclass(frozen=True)
class ParquetSettings:
    """The session's settings that Spark's Parquet schema conversion follows."""

    binary_as_string: bool = False
    int96_as_timestamp: bool = True
    infer_ntz: bool = True
    nanos_as_long: bool = False

    @classmethod
    def of(cls, spark: SparkSession) -> ParquetSettings:
        def flag(key: str, default: bool) -> bool:
            return str(spark.conf.get(key, str(default).lower())).strip().lower() == "true"

        return cls(
            binary_as_string=flag("spark.sql.parquet.binaryAsString", False),
            int96_as_timestamp=flag("spark.sql.parquet.int96AsTimestamp", True),
            infer_ntz=flag("spark.sql.parquet.inferTimestampNTZ.enabled", True),
            nanos_as_long=flag("spark.sql.legacy.parquet.nanosAsLong", False),
        )


def parquet_metadata(file: BinaryIO) -> dict[str, str]:
    """The key-value metadata of a Parquet file's footer."""
    import pyarrow.parquet as pq

    found = pq.read_metadata(file).metadata or {}
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in found.items()}


def parquet_schema(file: BinaryIO, settings: ParquetSettings) -> StructType | None:
    """The schema Spark reads from the footer of a Parquet file (see the module), every field
    nullable; ``None`` for a type these rules do not convert."""
    import pyarrow.parquet as pq
    from pyspark.sql.types import StructType

    metadata = pq.read_metadata(file)
    kept = (metadata.metadata or {}).get(SPARK_SCHEMA.encode())
    if kept is not None:
        try:
            found = StructType.fromJson(json.loads(kept.decode("utf-8")))
        except (ValueError, KeyError, TypeError):
            found = None  # (Spark 1's own form: the Parquet schema's conversion decides here)
        if found is not None:
            kept_schema: StructType = nullable(found)
            return kept_schema
    return converted(metadata.schema, settings)


def converted(schema: Any, settings: ParquetSettings) -> StructType | None:
    """A footer's Parquet schema (pyarrow's ``ParquetSchema``) as Spark's rules convert it, every
    field nullable; ``None`` for a type these rules do not convert."""
    from pyspark.sql.types import StructField, StructType

    if "(Variant" in str(schema):
        return None
    leaves = iter(schema.column(i) for i in range(len(schema.names)))
    try:
        arrow = schema.to_arrow_schema()
        fields = [StructField(f.name, _converted(f.type, leaves, settings), True) for f in arrow]
    except Unknown:
        return None
    found: StructType = nullable(StructType(fields))
    return found


def _converted(kind: Any, leaves: Any, settings: ParquetSettings) -> DataType:
    """The Spark type of one field, given by its Arrow type's structure and its Parquet leaves."""
    import pyarrow as pa
    from pyspark.sql import types as T

    if pa.types.is_struct(kind):
        return T.StructType([T.StructField(f.name, _converted(f.type, leaves, settings), True) for f in kind])
    if pa.types.is_map(kind):
        key = _converted(kind.key_type, leaves, settings)
        return T.MapType(key, _converted(kind.item_type, leaves, settings), True)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return T.ArrayType(_converted(kind.value_type, leaves, settings), True)
    return _leaf(next(leaves), settings)


def _leaf(column: Any, settings: ParquetSettings) -> DataType:
    """The Spark type of a Parquet primitive column (Spark's ``ParquetToSparkSchemaConverter``)."""
    from pyspark.sql import types as T

    physical = column.physical_type
    logical = json.loads(column.logical_type.to_json())
    name = logical.get("Type", "None")
    if name == "Decimal":
        if int(logical["precision"]) > _MAX_PRECISION:
            raise Unknown(column.path)
        return T.DecimalType(int(logical["precision"]), int(logical["scale"]))
    if physical == "BOOLEAN" and name == "None":
        return T.BooleanType()
    if physical == "FLOAT" and name == "None":
        return T.FloatType()
    if physical == "DOUBLE" and name == "None":
        return T.DoubleType()
    if physical == "INT32":
        return _int32(name, logical)
    if physical == "INT64":
        return _int64(name, logical, settings)
    if physical == "INT96" and settings.int96_as_timestamp:
        return T.TimestampType()
    if physical == "BYTE_ARRAY":
        if name in ("String", "Enum", "JSON"):
            return T.StringType()
        if name == "BSON" or (name == "None" and not settings.binary_as_string):
            return T.BinaryType()
        if name == "None":
            return T.StringType()
    if physical == "FIXED_LEN_BYTE_ARRAY" and name == "None":
        return T.BinaryType()
    raise Unknown(column.path)


def _int32(name: str, logical: dict[str, Any]) -> DataType:
    from pyspark.sql import types as T

    if name == "None":
        return T.IntegerType()
    if name == "Date":
        return T.DateType()
    if name == "Int":
        width, signed = int(logical["bitWidth"]), bool(logical["isSigned"])
        if signed:
            return {8: T.ByteType(), 16: T.ShortType(), 32: T.IntegerType()}[width]
        return {8: T.ShortType(), 16: T.IntegerType(), 32: T.LongType()}[width]
    raise Unknown(name)


def _int64(name: str, logical: dict[str, Any], settings: ParquetSettings) -> DataType:
    from pyspark.sql import types as T

    if name == "None" or (name == "Int" and logical["isSigned"]):
        return T.LongType()
    if name == "Int":
        return T.DecimalType(20, 0)
    if name == "Timestamp":
        unit = logical.get("timeUnit")
        if unit == "nanoseconds":
            if settings.nanos_as_long:
                return T.LongType()
            raise Unknown(name)
        if logical.get("isAdjustedToUTC", True) or not settings.infer_ntz:
            return T.TimestampType()
        return T.TimestampNTZType()
    raise Unknown(name)


def nullable(kind: Any) -> Any:
    """``kind`` with every field, array element and map value nullable (Spark's ``asNullable``)."""
    from pyspark.sql import types as T

    if isinstance(kind, T.StructType):
        return T.StructType([T.StructField(f.name, nullable(f.dataType), True, f.metadata) for f in kind.fields])
    if isinstance(kind, T.ArrayType):
        return T.ArrayType(nullable(kind.elementType), True)
    if isinstance(kind, T.MapType):
        return T.MapType(nullable(kind.keyType), nullable(kind.valueType), True)
    return kind


def avro_schema(file: BinaryIO) -> str | None:
    """The writer schema (JSON text) in the header of an Avro object container file, a primitive
    type without properties spelled by its name as Avro's own parser prints it (``{"type": "long"}``
    as ``"long"``); ``None`` when the file does not start as one. The header is the magic bytes,
    then a map of metadata (blocks of a zig-zag count and that many pairs of length-prefixed
    strings), whose ``avro.schema`` entry is the schema."""
    if file.read(len(AVRO_MAGIC)) != AVRO_MAGIC:
        return None
    while True:
        count = _long(file)
        if count == 0:
            return None
        if count < 0:
            count = -count
            _long(file)  # (the block's size in bytes)
        for _ in range(count):
            key = _bytes(file).decode("utf-8")
            value = _bytes(file)
            if key == "avro.schema":
                return json.dumps(_avro_normal(json.loads(value.decode("utf-8"))))


#: Avro's primitive types.
_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


def _avro_normal(node: Any) -> Any:
    if isinstance(node, list):
        return [_avro_normal(n) for n in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"type"} and node["type"] in _PRIMITIVES:
        return node["type"]
    return {k: _avro_normal(v) if k in ("type", "fields", "items", "values") else v for k, v in node.items()}


def _long(file: BinaryIO) -> int:
    """One zig-zag variable-length long."""
    shift = result = 0
    while True:
        byte = file.read(1)
        if not byte:
            raise ValueError("the Avro header ends early")
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7


def _bytes(file: BinaryIO) -> bytes:
    length = _long(file)
    data = file.read(length)
    if length < 0 or len(data) != length:
        raise ValueError("the Avro header ends early")
    return data
