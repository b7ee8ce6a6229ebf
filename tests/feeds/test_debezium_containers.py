"""Debezium events in Avro and Parquet files, as Kafka Connect's S3 and HDFS sinks write them with
the Avro converter: the writer schema (with ``connect.name`` and ``connect.parameters``) in the Avro
file's header, in the Parquet file's footer (``parquet.avro.schema``)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.errors import InputError
from tests.feeds import avro_files
from tests.feeds.debezium_events import ACCOUNTS, Modes, Table, avro_row, avro_schema
from tests.helpers import read_table

D = decimal.Decimal
UTC = dt.UTC
COLUMNS = {c: ACCOUNTS[c] for c in ("id", "name", "balance", "amount", "opened", "updated_at", "created", "blob")}


def row(n: int, version: int = 0) -> dict[str, Any]:
    return {
        "id": n,
        "name": f"n{n}v{version}",
        "balance": D(-350179 - n - version).scaleb(-2),
        "amount": D(f"{n}.{version}5"),
        "opened": dt.date(2020, 1, n),
        "updated_at": dt.datetime(2024, 5, n, 12, version, 0, 654321, tzinfo=UTC),
        "created": dt.datetime(2023, 6, n, 8, 0, 0, tzinfo=UTC),
        "blob": bytes([n, version]),
    }


def expected(values: dict[str, Any], lsn: int, time_mode: str) -> dict[str, Any]:
    out = {**values, "amount": str(values["amount"]), "__source_lsn": lsn}
    if time_mode == "connect":
        out["updated_at"] = values["updated_at"].replace(microsecond=values["updated_at"].microsecond // 1000 * 1000)
    return out


EVENTS = [("r", None, row(1), 10), ("r", None, row(2), 11), ("u", row(1), row(1, 1), 12), ("d", row(2), None, 13)]


def config(tmp_path: Path, container: str) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name="accounts",
        path=str(tmp_path / "table"),
        key=("id",),
        sequence=("__source_lsn",),
        feed=lakemerge.FeedConfig(location=(str(tmp_path / "in"),), format="debezium", container=container),
    )


@pytest.mark.parametrize("time_mode", ["adaptive", "connect"])
def test_avro_files_of_the_s3_sink(spark: Any, tmp_path: Path, time_mode: str) -> None:
    table = Table("accounts", COLUMNS, modes=Modes(time=time_mode))
    records = [avro_row(table, op, b, a, lsn) for op, b, a, lsn in EVENTS]
    avro_files.write(tmp_path / "in" / "accounts+0+0000000000.avro", avro_schema(table), records)
    t = config(tmp_path, "avro")
    result = lakemerge.apply_table(t, spark=spark)
    assert (result.metrics.inserted, result.metrics.deletes_absent, result.metrics.superseded) == (1, 1, 2)
    (got,) = read_table(t.path)
    assert got == expected(row(1, 1), 12, time_mode)
    later = [avro_row(table, "c", None, row(3), 20), avro_row(table, "u", row(1, 1), row(1, 2), 5)]
    avro_files.write(tmp_path / "in" / "accounts+0+0000000004.avro", avro_schema(table), later)
    result = lakemerge.apply_table(t, spark=spark)
    assert (result.metrics.inserted, result.metrics.late) == (1, 1)
    assert sorted(read_table(t.path), key=lambda r: r["id"]) == [
        expected(row(1, 1), 12, time_mode),
        expected(row(3), 20, time_mode),
    ]


def test_parquet_files_of_the_s3_sink(spark: Any, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = Table("accounts", COLUMNS)
    value = pa.struct(
        [
            ("id", pa.int32()),
            ("name", pa.string()),
            ("balance", pa.decimal128(10, 2)),
            ("amount", pa.struct([("scale", pa.int32()), ("value", pa.binary())])),
            ("opened", pa.int32()),
            ("updated_at", pa.int64()),
            ("created", pa.string()),
            ("blob", pa.binary()),
        ]
    )
    source = pa.struct(
        [(k, pa.string() if isinstance(v, str) or v is None else pa.int64()) for k, v in table.source(1).items()]
    )

    def parquet_row(values: dict[str, Any] | None) -> dict[str, Any] | None:
        if values is None:
            return None
        avro = avro_row(table, "c", None, values, 0)["after"]
        return {**avro, "balance": values["balance"]}

    records = [
        {
            "before": parquet_row(b),
            "after": parquet_row(a),
            "source": {
                k: (None if v is None else str(v) if isinstance(v, str) else v) for k, v in table.source(lsn).items()
            },
            "op": op,
            "ts_ms": 1_700_000_000_000 + lsn,
        }
        for op, b, a, lsn in EVENTS
    ]
    schema = pa.schema(
        [("before", value), ("after", value), ("source", source), ("op", pa.string()), ("ts_ms", pa.int64())],
        metadata={"parquet.avro.schema": json.dumps(avro_schema(table))},
    )
    (tmp_path / "in").mkdir()
    pq.write_table(pa.Table.from_pylist(records, schema=schema), tmp_path / "in" / "accounts+0+0000000000.parquet")
    t = config(tmp_path, "parquet")
    lakemerge.apply_table(t, spark=spark)
    assert read_table(t.path) == [expected(row(1, 1), 12, "adaptive")]


def test_records_that_are_not_envelopes_are_named(spark: Any, tmp_path: Path) -> None:
    schema = {"type": "record", "name": "Plain", "fields": [{"name": "id", "type": "int"}]}
    avro_files.write(tmp_path / "in" / "plain.avro", schema, [{"id": 1}])
    with pytest.raises(InputError, match=r"plain\.avro: not Debezium change events: the avro records have no 'op'"):
        lakemerge.apply_table(config(tmp_path, "avro"), spark=spark)
