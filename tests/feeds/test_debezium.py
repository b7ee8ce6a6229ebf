"""Debezium feeds on events laid out as the PostgreSQL and MySQL connectors write them: values
decoded by their semantic types, several batches (late files, connector replays, re-inserted keys,
primary-key changes), each table read back with delta-rs and compared with the oracle."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.errors import ConfigError, InputError
from tests.feeds.debezium_events import (
    ACCOUNTS,
    Modes,
    Table,
    b64,
    heartbeat,
    new_uuid,
    schema_change,
    transaction_marker,
    unscaled_bytes,
)
from tests.helpers import read_table, write_lines
from tests.oracle import Oracle

D = decimal.Decimal
UTC = dt.UTC


def account(n: int, version: int = 0) -> dict[str, Any]:
    """Row ``n`` of the accounts table at ``version``: negative and wide decimals included."""
    sign = -1 if n % 2 else 1
    return {
        "id": n,
        "name": f"acct-{n}-v{version}",
        "balance": D(sign * (3501_79 + n * 1000 + version)).scaleb(-2),
        "amount": D(f"{sign * n}.{version:03d}{n}") if n != 3 else D("-12345678901234567890.123456789"),
        "opened": dt.date(1969 + n, 12, 31),
        "updated_at": dt.datetime(2024, 3, n, 10, version, 59, 123456 + n, tzinfo=UTC),
        "created": dt.datetime(2023, 1, 1, n, 0, 0, 250000, tzinfo=UTC),
        "alarm": dt.time(n % 24, 30, version % 60, 500 + n),
        "active": bool(n % 2),
        "doc": {"n": n, "tags": ["a", "b"][: version + 1]},
        "ref": new_uuid(n),
        "blob": bytes([n, 0, 255, version]),
    }


def stored(row: dict[str, Any], lsn: int) -> dict[str, Any]:
    """What the table holds for ``row``: each value as its column type reads back in delta-rs."""
    import json

    out = dict(row)
    out["alarm"] = row["alarm"].strftime("%H:%M:%S.%f")
    out["doc"] = json.dumps(row["doc"], separators=(",", ":"))
    out["ref"] = str(row["ref"])
    out["amount"] = str(row["amount"])
    out["__source_lsn"] = lsn
    return out


def config(tmp_path: Path, sequence: str = "__source_lsn", **feed: Any) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name="accounts",
        path=str(tmp_path / "table"),
        key=("id",),
        sequence=(sequence,),
        feed=lakemerge.FeedConfig(location=(str(tmp_path / "in"),), format="debezium", **feed),
    )


def by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


class Run:
    """A table fed file by file, checked against the oracle after every batch."""

    def __init__(self, spark: Any, tmp_path: Path, table: Table, config: lakemerge.TableConfig, schema: bool) -> None:
        self.spark, self.tmp_path, self.table, self.config, self.schema = spark, tmp_path, table, config, schema
        self.oracle = Oracle(key=("id",), seq="__source_lsn", op="op")

    def batch(self, files: dict[str, list[tuple[str, Any, Any, int]]]) -> Any:
        """Write ``files`` (name → events: (op, before, after, lsn), or ("tombstone", ...)), apply
        the batch, compare the table with the oracle's."""
        ordered: list[list[dict[str, Any]]] = []
        ignored = 0
        for name in sorted(files):
            lines, rows = [], []
            for op, before, after, lsn in files[name]:
                if op == "tombstone":
                    lines.append("null")
                    ignored += 1
                    continue
                lines.append(self.table.event(op, before, after, lsn, schema=self.schema))
                row = before if op == "d" else after
                rows.append({**stored(row, lsn), "op": "D" if op == "d" else "U"})
            write_lines(self.tmp_path / "in" / name, lines)
            ordered.append(rows)
        result = lakemerge.apply_table(self.config, spark=self.spark)
        counts = self.oracle.apply(ordered)
        assert result.metrics.rows_read == counts.rows_read + ignored
        assert result.metrics.ignored == ignored
        expected = (counts.inserted, counts.updated, counts.deleted, counts.late, counts.deletes_absent)
        m = result.metrics
        assert (m.inserted, m.updated, m.deleted, m.late, m.deletes_absent) == expected
        assert by_id(read_table(self.config.path)) == by_id(self.oracle.rows())
        return result


def scenario(run: Run) -> None:
    """Snapshot, changes, a delete with its tombstone, a connector replay, a late file, a
    re-inserted key and a primary-key change (delete of the old key, create of the new one)."""
    a = {n: account(n) for n in range(1, 6)}
    run.batch(
        {
            "accounts+0+0000000000.json": [("r", None, a[n], 10 + n) for n in range(1, 5)],
            "accounts+0+0000000004.json": [
                ("c", None, a[5], 20),
                ("u", a[1], account(1, 1), 21),
                ("d", a[2], None, 22),
                ("tombstone", None, None, 22),
            ],
        }
    )
    run.batch(
        {
            # The connector restarted and sent the last events again (at-least-once delivery).
            "accounts+0+0000000008.json": [
                ("u", a[1], account(1, 1), 21),
                ("d", a[2], None, 22),
                ("tombstone", None, None, 22),
                ("u", a[3], account(3, 1), 30),
            ],
            # A file that arrives late, with older changes: late against the stored rows.
            "accounts+1+0000000000.json": [("u", a[1], account(1, 9), 15), ("u", a[5], account(5, 9), 19)],
        }
    )
    run.batch(
        {
            "accounts+0+0000000012.json": [
                ("c", None, account(2, 2), 40),  # the deleted key comes back
                ("d", a[4], None, 41),  # primary key 4 becomes 40: a delete, a tombstone, a create
                ("tombstone", None, None, 41),
                ("c", None, {**account(4, 3), "id": 40}, 41),
            ]
        }
    )


def test_postgres_events_with_their_schema(spark: Any, tmp_path: Path) -> None:
    table = Table("accounts", ACCOUNTS)
    scenario(Run(spark, tmp_path, table, config(tmp_path), schema=True))


def test_events_without_schema_read_by_the_declared_types(spark: Any, tmp_path: Path) -> None:
    columns = {k: v for k, v in ACCOUNTS.items() if k != "alarm"}
    table = Table("accounts", columns)
    types = {
        "balance": "decimal(10,2)",
        "amount": "string",
        "opened": "date",
        "updated_at": "timestamp",
        "created": "timestamp",
        "blob": "binary",
    }
    run = Run(
        spark, tmp_path, table, config(tmp_path, types=types, debezium={"fractional_digits": {"updated_at": 6}}), False
    )
    a = {n: account(n) for n in (1, 2)}
    for row in a.values():
        row.pop("alarm")
    files = {"accounts+0+0000000000.json": [("r", None, a[1], 11), ("c", None, a[2], 12), ("d", a[2], None, 13)]}
    lines = [table.event(op, b, af, lsn, schema=False) for op, b, af, lsn in files["accounts+0+0000000000.json"]]
    write_lines(tmp_path / "in" / "accounts+0+0000000000.json", lines)
    result = lakemerge.apply_table(run.config, spark=spark)
    assert (result.metrics.inserted, result.metrics.deletes_absent) == (1, 1)
    (row,) = read_table(run.config.path)
    assert row["balance"] == a[1]["balance"] == D("-3511.79")
    assert row["opened"] == dt.date(1970, 12, 31)
    assert row["updated_at"] == a[1]["updated_at"]
    assert row["created"] == a[1]["created"]
    assert row["blob"] == a[1]["blob"]
    # Without a schema, a variable-scale decimal declared as text is its exact decimal text.
    assert row["amount"] == str(a[1]["amount"]) == "-1.0001"


@pytest.mark.parametrize(
    ("connector", "modes", "columns"),
    [
        ("postgresql", Modes("precise", "adaptive_time_microseconds"), {"t": "time(3)", "ts": "timestamp(3)"}),
        ("postgresql", Modes("double", "connect"), {"t": "time(6)", "ts": "timestamp(6)"}),
        ("postgresql", Modes("string", "adaptive"), {"t": "time(3)", "ts": "timestamp(6)"}),
        ("postgresql", Modes("precise", "nanoseconds", "hex"), {"t": "time(6)", "ts": "timestamp(6)"}),
        ("mysql", Modes("precise", "adaptive_time_microseconds", "base64"), {"t": "time(6)", "ts": "datetime(3)"}),
        ("mysql", Modes("precise", "adaptive_time_microseconds"), {"flag": "tinyint(1)", "ts": "datetime(6)"}),
    ],
)
@pytest.mark.parametrize("schema", [True, False])
def test_connector_modes(
    spark: Any, tmp_path: Path, connector: str, modes: Modes, columns: dict[str, str], schema: bool
) -> None:
    """Each documented ``decimal.handling.mode`` and ``time.precision.mode`` (PostgreSQL, MySQL),
    with the event's schema and, without it, with the feed's declared types and modes."""
    layout = {"id": "int", "price": "numeric(12,3)", "day": "date", "bin": "bytea", **columns}
    table = Table("items", layout, connector=connector, modes=modes)
    at = dt.datetime(2024, 2, 29, 23, 59, 58, 987654, tzinfo=UTC)
    values = [
        {"id": 1, "price": D("-123456789.125"), "day": dt.date(2024, 2, 29), "bin": b"\x00\xff",
         "t": dt.time(1, 2, 3, 456789), "ts": at, "flag": True},
        {"id": 2, "price": D("0.001"), "day": dt.date(1960, 1, 1), "bin": b"", "t": dt.time(0, 0), "ts": at,
         "flag": False},
    ]  # fmt: skip
    values = [{k: v for k, v in row.items() if k in layout} for row in values]
    write_lines(
        tmp_path / "in" / "items.json", [table.event("c", None, v, 10 + i, schema=schema) for i, v in enumerate(values)]
    )
    digits = {"ts": int(layout["ts"].split("(")[1].rstrip(")"))}
    types = {"price": "decimal(12,3)", "day": "date", "ts": "timestamp", "bin": "binary", "flag": "boolean"}
    feed: dict[str, Any] = {"types": {k: v for k, v in types.items() if k in layout}}
    feed["debezium"] = {"binary_handling_mode": modes.binary}  # (the schema says "string" for any text of bytes)
    if not schema:
        settings = {"decimal_handling_mode": modes.decimal, "time_precision_mode": modes.time}
        feed["debezium"] = {**settings, "binary_handling_mode": modes.binary, "fractional_digits": digits}
    t = config(tmp_path, "__source_pos" if connector == "mysql" else "__source_lsn", **feed)
    lakemerge.apply_table(t, spark=spark)
    rows = by_id(read_table(t.path))
    for got, want in zip(rows, values, strict=True):
        assert got["price"] == want["price"]
        assert got["day"] == want["day"]
        assert got["bin"] == want["bin"]
        cut = 3 if digits["ts"] <= 3 or modes.time == "connect" else 6
        assert got["ts"] == want["ts"].replace(microsecond=want["ts"].microsecond // 10 ** (6 - cut) * 10 ** (6 - cut))
        if "flag" in layout:
            assert got["flag"] is want["flag"]
        if "t" in layout and schema:
            exact = 3 if modes.time == "connect" or (modes.time == "adaptive" and layout["t"] == "time(3)") else 6
            micro = want["t"].microsecond // 10 ** (6 - exact) * 10 ** (6 - exact)
            assert got["t"] == want["t"].replace(microsecond=micro).strftime("%H:%M:%S.%f")[: 9 + exact]


def test_files_of_events_that_change_no_row_are_batches(spark: Any, tmp_path: Path) -> None:
    """A file of tombstones only, of heartbeats, transaction markers and schema changes, or of a
    truncate: each is a batch of ignored records (counted, nothing written), never a stuck feed;
    a truncate is applied when ``truncate_codes`` asks for it, and is otherwise an error naming it."""
    table = Table("accounts", {"id": "int", "name": "text"})
    write_lines(tmp_path / "in" / "f0.json", ["null"])  # a new table's first file: a tombstone only
    t = config(tmp_path)
    nothing = lakemerge.apply_table(t, spark=spark)  # (it waits for a file with rows: they make the table)
    assert nothing.version is None and not (tmp_path / "table").exists()
    write_lines(
        tmp_path / "in" / "f1.json", [table.event("c", None, {"id": i, "name": f"n{i}"}, 10 + i) for i in (1, 2, 3)]
    )
    r = lakemerge.apply_table(t, spark=spark)
    assert (r.metrics.rows_read, r.metrics.ignored, r.metrics.inserted, len(r.files)) == (4, 1, 3, 2)
    before = read_table(t.path)
    assert [r["id"] for r in by_id(before)] == [1, 2, 3]
    write_lines(tmp_path / "in" / "f2.json", ["null", "null"])
    r = lakemerge.apply_table(t, spark=spark)
    assert (r.metrics.rows_read, r.metrics.ignored, r.metrics.inserted) == (2, 2, 0)
    write_lines(
        tmp_path / "in" / "f3.json",
        [heartbeat(1), transaction_marker("BEGIN", 2), transaction_marker("END", 3), schema_change(4)],
    )
    r = lakemerge.apply_table(t, spark=spark)
    assert (r.metrics.rows_read, r.metrics.ignored) == (4, 4)
    assert read_table(t.path) == before
    write_lines(tmp_path / "in" / "f4.json", [table.truncate(20)])
    with pytest.raises(InputError, match=r"f4\.json, row 1: .*truncate_codes = \[\"t\"\]"):
        lakemerge.apply_table(t, spark=spark)
    assert read_table(t.path) == before
    truncating = config(tmp_path, truncate_codes=["t"])
    r = lakemerge.apply_table(truncating, spark=spark)
    assert (r.metrics.truncates, r.metrics.truncated) == (1, 3)
    assert read_table(t.path) == []
    write_lines(tmp_path / "in" / "f5.json", [table.event("c", None, {"id": 9, "name": "old"}, 15)])
    r = lakemerge.apply_table(truncating, spark=spark)
    assert r.metrics.late == 1  # older than the truncate (docs/semantics.md §4)


def test_a_new_tables_first_batch_of_no_row_takes_every_pending_file(spark: Any, tmp_path: Path) -> None:
    """With one file a batch, a first file of tombstones cannot hold a new table back: the batch then
    takes every pending file, and the files' rows make the table."""
    table = Table("accounts", {"id": "int", "name": "text"})
    write_lines(tmp_path / "in" / "f0.json", ["null"])
    write_lines(tmp_path / "in" / "f1.json", [table.event("c", None, {"id": 1, "name": "n1"}, 10)])
    t = config(tmp_path).model_copy(update={"max_files_per_batch": 1})
    r = lakemerge.apply_table(t, spark=spark)
    assert (r.version, len(r.files), r.metrics.ignored, r.metrics.inserted) == (0, 2, 1, 1)
    assert [row["id"] for row in read_table(t.path)] == [1]


def test_debezium_rows_from_a_frame_of_event_texts(spark: Any) -> None:
    """Kafka message values as a DataFrame: decoded rows, the other columns carried through."""
    from lakemerge.feeds.debezium import debezium_rows

    table = Table("accounts", {"id": "int", "balance": "numeric(10,2)", "at": "timestamp(6)"})
    at = dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    values = [
        (table.event("c", None, {"id": 1, "balance": D("3501.79"), "at": at}, 5), 0, 7),
        (None, 0, 8),
        (table.event("d", {"id": 1, "balance": D("-0.01"), "at": at}, None, 6, schema=False), 1, 3),
    ]
    events = spark.createDataFrame(values, "value string, partition int, offset long")
    feed = lakemerge.FeedConfig(location=("unused",), format="debezium")
    read = debezium_rows(spark, events, feed)
    assert read.columns[:3] == ("id", "balance", "at") and "__source_lsn" in read.columns
    rows = sorted(read.frame.collect(), key=lambda r: (r["partition"], r["offset"]))
    assert [(r["id"], r["balance"], r["__op"], r["partition"], r["offset"]) for r in rows] == [
        (1, D("3501.79"), "c", 0, 7),
        (None, None, "tombstone", 0, 8),
        (1, D("-0.01"), "d", 1, 3),  # without its schema, the others' schema decodes it
    ]
    assert rows[0]["at"].replace(tzinfo=UTC) == at


def test_undecodable_values_and_missing_settings_are_named(spark: Any, tmp_path: Path) -> None:
    table = Table("accounts", {"id": "int", "balance": "numeric(10,2)"})
    good = table.event("c", None, {"id": 1, "balance": D("1.00")}, 5)
    write_lines(
        tmp_path / "in" / "bad.json", [good, good.replace(f'"{b64(unscaled_bytes(D("1.00"), 2))}"', '"not base64!"')]
    )
    with pytest.raises(
        InputError, match=r"bad\.json, row 2: cannot decode column 'balance' value 'not base64!' as Debezium Decimal"
    ):
        lakemerge.apply_table(config(tmp_path), spark=spark)
    plain = tmp_path / "plain"
    write_lines(
        plain / "in" / "e.json",
        ['{"before": null, "after": {"id": 1, "at": 1700000000000000}, "op": "c", "source": {"lsn": 1}}'],
    )
    with pytest.raises(ConfigError, match=r"feed\.debezium\.fractional_digits.*\{ at = 6 \}"):
        lakemerge.apply_table(config(plain, types={"at": "timestamp"}), spark=spark)


def test_decimal_bytes_of_every_size_and_sign(spark: Any) -> None:
    """The unscaled bytes → decimal decoding, against Python's integers, at the edges of each byte
    width and of Spark's 38 digits."""
    from pyspark.sql import functions as F

    from lakemerge.feeds.logical import decimal_text

    numbers = [
        0,
        1,
        -1,
        127,
        128,
        -128,
        -129,
        255,
        256,
        -256,
        2**63 - 1,
        2**63,
        -(2**63),
        -(2**63) - 1,
        2**64,
        -(2**64),
    ]
    numbers += [10**38 - 1, -(10**38 - 1), 2**100 + 12345, -(2**100) - 12345]
    cases = [(n, s) for n in numbers for s in (0, 2, 9)]
    wide = decimal.Context(prec=100)
    frame = spark.createDataFrame(
        [(b64(unscaled_bytes(D(n).scaleb(-s, wide), s)), s) for n, s in cases], "b string, s int"
    )
    text = decimal_text(F.unbase64("b"), F.col("s"))
    got = [r[0] for r in frame.select(text).collect()]
    assert got == [format(D(n).scaleb(-s, wide), "f") for n, s in cases]
    assert frame.select(decimal_text(F.unbase64(F.lit(b64((2**130).to_bytes(17, "big")))), F.lit(0))).first()[0] is None


def test_pretty_printed_events_with_multiline(spark: Any, tmp_path: Path) -> None:
    """``multiline = true``: each file one event as the documentation prints it, or a JSON array."""
    import json

    table = Table("accounts", {"id": "int", "name": "text"})
    events = [json.loads(table.event("c", None, {"id": i, "name": f"n{i}"}, 10 + i)) for i in (1, 2)]
    write_lines(tmp_path / "in" / "a.json", [json.dumps([*events, None], indent=2)])
    write_lines(tmp_path / "in" / "b.json", [json.dumps(json.loads(table.truncate(20)), indent=4)])
    write_lines(
        tmp_path / "in" / "c.json",
        [json.dumps(json.loads(table.event("c", None, {"id": 3, "name": "c"}, 30)), indent=2)],
    )
    t = config(tmp_path, multiline=True, truncate_codes=["t"])
    r = lakemerge.apply_table(t, spark=spark)
    assert (r.metrics.rows_read, r.metrics.ignored, r.metrics.truncates, r.metrics.superseded) == (5, 1, 1, 2)
    assert read_table(t.path) == [{"id": 3, "name": "c", "__source_lsn": 30}]


def test_local_timestamps_isostring_and_structured_values(spark: Any) -> None:
    """A column declared ``timestamp_ntz`` keeps the wall time, whatever the session's zone;
    ``isostring`` values and ``structured`` ones (calendar and clock fields) decode too."""
    import json

    from lakemerge.feeds.debezium import debezium_rows

    parts = ("year", "month", "day", "hour", "minute", "second", "nanos")
    structured = {"type": "struct", "name": "io.debezium.time.StructuredTimestamp", "optional": True, "field": "s",
                  "fields": [{"type": "int32", "field": f} for f in parts]}  # fmt: skip
    fields = [{"type": "int32", "field": "id"},
              {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "m"},
              {"type": "string", "name": "io.debezium.time.IsoDate", "field": "d"},
              {"type": "string", "name": "io.debezium.time.IsoTimestamp", "field": "i"}, structured]  # fmt: skip
    row = {"type": "struct", "fields": fields, "optional": True}
    schema = {"type": "struct", "fields": [{**row, "field": "before"}, {**row, "field": "after"},
                                           {"type": "string", "field": "op"}]}  # fmt: skip
    clock = {"year": 2024, "month": 3, "day": 1, "hour": 11, "minute": 1, "second": 1, "nanos": 2_000}
    after = {"id": 1, "m": 1_709_290_861_000_001, "d": "2024-03-01Z", "i": "2024-03-01T11:01:01.5Z", "s": clock}
    event = json.dumps({"schema": schema, "payload": {"before": None, "after": after, "op": "c"}})
    feed = lakemerge.FeedConfig(location=("unused",), format="debezium", types={"m": "timestamp_ntz"})
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        (got,) = debezium_rows(spark, spark.createDataFrame([(event,)], "value string"), feed).frame.collect()
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    assert got["m"] == dt.datetime(2024, 3, 1, 11, 1, 1, 1)
    assert got["d"] == dt.date(2024, 3, 1)
    assert got["i"].astimezone(UTC) == dt.datetime(2024, 3, 1, 11, 1, 1, 500000, tzinfo=UTC)
    assert got["s"].astimezone(UTC) == dt.datetime(2024, 3, 1, 11, 1, 1, 2, tzinfo=UTC)
