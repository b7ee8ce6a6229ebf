"""Schemas read from files' own metadata without a JVM: a Parquet footer gives the schema Spark
reads from it (the same as Spark's inference, for every type feeds use), and an Avro header its
writer schema (the same as Avro's own reader in the JVM)."""

from __future__ import annotations

import datetime
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakemerge.feeds.connect_schema import from_avro
from lakemerge.storage import footers
from lakemerge.storage.filesystems import filesystem
from tests.feeds import avro_files
from tests.feeds.debezium_events import Table, avro_row, avro_schema

#: A Debezium table, its events in Avro as Kafka Connect's sinks write them.
EVENTS = Table("t", {"id": "bigint", "amount": "numeric(10,2)", "opened": "date", "v": "text"})
ROW = {"id": 1, "amount": decimal.Decimal("1.25"), "opened": datetime.date(2024, 1, 2), "v": "x"}

#: Columns of every type a feed's Parquet files hold, as Spark SQL writes them.
SPARK_COLUMNS = """
    CAST(1 AS TINYINT) AS b, CAST(2 AS SMALLINT) AS s, 3 AS i, CAST(4 AS BIGINT) AS l,
    CAST(1.5 AS FLOAT) AS f, CAST(2.5 AS DOUBLE) AS d, true AS flag, 'x' AS text, CAST('x' AS BINARY) AS raw,
    CAST('1.25' AS DECIMAL(5,2)) AS small, CAST('1.25' AS DECIMAL(15,2)) AS middle,
    CAST('1.25' AS DECIMAL(30,4)) AS wide, DATE'2024-01-02' AS day,
    TIMESTAMP'2024-01-02 03:04:05.123456' AS ts, TIMESTAMP_NTZ'2024-01-02 03:04:05' AS local,
    named_struct('a', 1, 'b', array(named_struct('c', 'x'))) AS nested,
    map('k', array(1, 2)) AS mapped, array(array(CAST(1 AS BIGINT))) AS lists
"""


def _settings(spark: Any) -> footers.ParquetSettings:
    return footers.ParquetSettings.of(spark)


def _python(path: Path, settings: footers.ParquetSettings) -> Any:
    with path.open("rb") as file:
        return footers.parquet_schema(file, settings)


def _converted(path: Path, settings: footers.ParquetSettings) -> Any:
    """The footer's Parquet schema converted by the rules alone (not the Spark schema kept there)."""
    return footers.converted(pq.read_metadata(path).schema, settings)


@pytest.mark.parametrize(
    "conf",
    [
        {},
        {"spark.sql.parquet.outputTimestampType": "INT96"},
        {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS"},
        {"spark.sql.parquet.writeLegacyFormat": "true"},
    ],
)
def test_footers_of_files_spark_writes_give_spark_s_own_schema(
    spark: Any, tmp_path: Path, conf: dict[str, str]
) -> None:
    """Files written by Spark (timestamps as INT96, TIMESTAMP_MICROS or _MILLIS; decimals and lists in
    the legacy layout too): the schema read here, and the footer's Parquet schema converted by the
    rules alone, are the schema Spark reads."""
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        spark.sql(f"SELECT {SPARK_COLUMNS}").coalesce(1).write.parquet(str(tmp_path / "out"))
    finally:
        for key in conf:
            spark.conf.unset(key)
    [path] = (tmp_path / "out").glob("*.parquet")
    expected = spark.read.parquet(str(path)).schema
    assert _python(path, _settings(spark)) == expected
    assert _converted(path, _settings(spark)) == expected
    assert filesystem(spark, str(path)).parquet_schema(f"file:{path}") in (expected, None)


def _arrow_file(path: Path) -> Path:
    """A file as Python tools write it: unsigned integers, timestamps of each unit and time zone
    setting, INT96, decimals, binary, JSON strings, dates, structs, lists and maps."""
    moment = datetime.datetime(2024, 1, 2, 3, 4, 5, 123000)
    columns = {
        "u8": pa.array([1], pa.uint8()),
        "u16": pa.array([1], pa.uint16()),
        "u32": pa.array([1], pa.uint32()),
        "u64": pa.array([1], pa.uint64()),
        "i8": pa.array([1], pa.int8()),
        "utc_us": pa.array([moment], pa.timestamp("us", tz="UTC")),
        "utc_ms": pa.array([moment], pa.timestamp("ms", tz="UTC")),
        "local_us": pa.array([moment], pa.timestamp("us")),
        "dec": pa.array([decimal.Decimal("1.23")], pa.decimal128(5, 2)),
        "blob": pa.array([b"x"]),
        "text": pa.array(["x"]),
        "day": pa.array([datetime.date(2024, 1, 2)]),
        "nested": pa.array([{"a": 1, "b": [{"c": "x"}]}]),
        "mapped": pa.array([[("k", [1])]], pa.map_(pa.string(), pa.list_(pa.int64()))),
    }
    pq.write_table(pa.table(columns), path)
    return path


def test_footers_of_files_python_tools_write_give_spark_s_schema(spark: Any, tmp_path: Path) -> None:
    path = _arrow_file(tmp_path / "arrow.parquet")
    assert _python(path, _settings(spark)) == spark.read.parquet(str(path)).schema
    int96 = tmp_path / "int96.parquet"
    pq.write_table(
        pa.table({"t": pa.array([datetime.datetime(2024, 1, 2)], pa.timestamp("ns"))}),
        int96,
        use_deprecated_int96_timestamps=True,
    )
    assert _python(int96, _settings(spark)) == spark.read.parquet(str(int96)).schema


def test_the_session_s_parquet_settings_are_followed(spark: Any, tmp_path: Path) -> None:
    path = _arrow_file(tmp_path / "arrow.parquet")
    for key in ("spark.sql.parquet.binaryAsString", "spark.sql.parquet.inferTimestampNTZ.enabled"):
        spark.conf.set(key, "true" if key.endswith("String") else "false")
    try:
        settings = _settings(spark)
        assert settings.binary_as_string and not settings.infer_ntz
        assert _python(path, settings) == spark.read.parquet(str(path)).schema
    finally:
        spark.conf.unset("spark.sql.parquet.binaryAsString")
        spark.conf.unset("spark.sql.parquet.inferTimestampNTZ.enabled")


def test_a_type_the_rules_do_not_convert_is_left_to_spark(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "nanos.parquet"
    pq.write_table(pa.table({"t": pa.array([1], pa.timestamp("ns"))}), path, version="2.6")
    assert _python(path, _settings(spark)) is None
    assert _python(path, footers.ParquetSettings(nanos_as_long=True)) == spark.createDataFrame([], "t BIGINT").schema


def test_the_avro_header_gives_the_writer_schema(spark: Any, tmp_path: Path) -> None:
    """The header of a file written as Kafka Connect's sinks write them (with its ``connect.*``
    properties), and of one Spark writes (compressed blocks): the schema Spark reads them with."""
    schema = avro_schema(EVENTS)
    path = avro_files.write(tmp_path / "in" / "a.avro", schema, [avro_row(EVENTS, "c", None, ROW, lsn=1)])
    with path.open("rb") as file:
        found = footers.avro_schema(file)
    assert found is not None and json.loads(found)["fields"][0]["name"] == "before"
    assert from_avro(found)["amount"].name == "org.apache.kafka.connect.data.Decimal"
    written_by_spark = spark.sql("SELECT 1 AS id, 'x' AS v").write.format("avro").option("compression", "deflate")
    written_by_spark.save(str(tmp_path / "s"))
    [written] = (tmp_path / "s").glob("*.avro")
    with written.open("rb") as file:
        header = footers.avro_schema(file)
    assert header is not None and [f["name"] for f in json.loads(header)["fields"]] == ["id", "v"]
    with (tmp_path / "s" / "not-avro.txt").open("wb") as file:
        file.write(b"plain text")
    with (tmp_path / "s" / "not-avro.txt").open("rb") as file:
        assert footers.avro_schema(file) is None


@pytest.mark.classic
def test_the_python_readers_agree_with_the_jvm_s(spark: Any, tmp_path: Path) -> None:
    """In a classic session the footer and header are read by Spark's and Avro's own classes; the
    readers here give the same."""
    from lakemerge.storage.arrow import ArrowFileSystem
    from lakemerge.storage.hadoop import HadoopFileSystem

    hadoop, arrow = HadoopFileSystem(spark), ArrowFileSystem(spark, "file")
    parquet = f"file:{_arrow_file(tmp_path / 'arrow.parquet')}"
    assert arrow.parquet_schema(parquet) == hadoop.parquet_schema(parquet)
    schema = avro_schema(EVENTS)
    avro = f"file:{avro_files.write(tmp_path / 'a.avro', schema, [avro_row(EVENTS, 'c', None, ROW, lsn=1)])}"
    found, jvm = arrow.avro_schema(avro), hadoop.avro_schema(avro)
    assert found is not None and jvm is not None and from_avro(found) == from_avro(jvm) != {}
    meta = tmp_path / "meta.parquet"
    table = pa.table({"x": [1]}).replace_schema_metadata({"parquet.avro.schema": json.dumps(schema)})
    pq.write_table(table, meta)
    assert arrow.parquet_metadata(f"file:{meta}", "parquet.avro.schema") == json.dumps(schema)
    assert hadoop.parquet_metadata(f"file:{meta}", "parquet.avro.schema") == json.dumps(schema)
