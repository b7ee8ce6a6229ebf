"""A whole database's Debezium topics streamed by one source from a real Kafka broker: each table
created on its first event (its key from the message keys' schemas, its types from the values'),
each micro-batch one transaction over the tables it touches, a table's own settings over the
source's defaults, a keyless table or a changed primary key stopping the stream before anything is
committed, and a lost checkpoint resuming from the offsets the source's points and tables recorded.
Read back with delta-rs, compared with the plain-Python oracle."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import json
import random
import shutil
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import deltalake
import pytest

import lakemerge
from bench.kafka import produce
from tests.feeds.debezium_events import Table
from tests.helpers import read_table, table_columns
from tests.oracle import Oracle
from tests.streams.ranges import assert_each_offset_applied_once

pytestmark = pytest.mark.kafka

_prefixes = itertools.count()
UTC = dt.UTC

ORDERS = Table("orders", {"id": "int", "total": "numeric(10,2)", "placed": "timestamp(6)", "note": "text"})
CUSTOMERS = Table("customers", {"id": "int", "name": "text", "born": "date"})
LINES = Table("lines", {"order_id": "int", "line_no": "int", "qty": "int"}, key=("order_id", "line_no"))
PRODUCTS = Table("products", {"sku": "text", "price": "numeric(8,3)"}, key=("sku",))
AUDIT = Table("audit", {"id": "int", "what": "text"})


def prefix() -> str:
    return f"db{next(_prefixes)}x{random.randrange(10**6)}"


def message_key(table: Table, row: dict[str, Any]) -> str:
    """The record key Debezium's JSON converter writes with ``schemas.enable``: the primary key's
    columns as a struct, with its schema."""
    fields = [table.field_schema(k) for k in table.key]
    schema = {"type": "struct", "fields": fields, "optional": False, "name": f"shop.public.{table.name}.Key"}
    return json.dumps({"schema": schema, "payload": {k: table.encode(k, row[k]) for k in table.key}})


@dataclass
class Database:
    """A source database's tables sending change events to ``<prefix>.public.<table>``: every
    event kept, per table, for the oracle; each key's events in one partition, in order."""

    prefix: str
    lsn: int = 100
    sent: dict[str, list[tuple[int, str, dict[str, Any]]]] = field(default_factory=dict)
    counts: dict[tuple[str, int], int] = field(default_factory=dict)

    def topic(self, table: Table) -> str:
        return f"{self.prefix}.public.{table.name}"

    def send(self, spark: Any, kafka: str, table: Table, changes: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Send ``(op, row)`` changes of ``table`` (``d``: ``row`` is the deleted one, its ``before``)."""
        messages = []
        for op, row in changes:
            self.lsn += 1
            before, after = (row, None) if op == "d" else (None, row)
            partition = zlib.crc32(repr([row[k] for k in table.key]).encode()) % 3
            messages.append((partition, message_key(table, row), table.event(op, before, after, self.lsn)))
            self.sent.setdefault(table.name, []).append((self.lsn, op, row))
            place = (self.topic(table), partition)
            self.counts[place] = self.counts.get(place, 0) + 1
        produce(spark, kafka, self.topic(table), messages)

    def expected(self, table: Table) -> list[dict[str, Any]]:
        oracle = Oracle(key=table.key, seq="lsn", op="op")
        oracle.apply([[{**row, "lsn": lsn, "op": "D" if op == "d" else "U"} for lsn, op, row in self.sent[table.name]]])
        return [{c: r[c] for c in table.columns} for r in oracle.rows()]

    def sent_to(self, table: Table) -> dict[tuple[str, int], int]:
        return {p: n for p, n in self.counts.items() if p[0] == self.topic(table)}


def source(root: Path, kafka: str, db: Database, **settings: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": kafka,
        "topic_pattern": f"{db.prefix}\\..*",
        "table_path": str(root / "lake" / "{schema}" / "{table}"),
        "checkpoint": str(root / "checkpoint"),
        "defaults": {"sequence": "__source_lsn"},
        **settings,
    }


def pipeline(root: Path, kafka: str, db: Database, *, tables: Any = None, **settings: Any) -> lakemerge.PipelineConfig:
    return lakemerge.PipelineConfig.model_validate(
        {"sources": {"shop": source(root, kafka, db, **settings)}, "tables": tables or {}}
    )


def order(n: int, total: str, note: str) -> dict[str, Any]:
    return {"id": n, "total": decimal.Decimal(total), "placed": dt.datetime(2024, 5, n, 8, 30, 0, 123456), "note": note}


def lake(root: Path, table: str) -> Path:
    return root / "lake" / "public" / table


def assert_like_the_oracle(root: Path, db: Database, *tables: Table) -> None:
    for table in tables:
        path = lake(root, table.name)
        if "__current" in table_columns(path):  # (an SCD type 2 table: its current versions)
            got = [r for r in read_table(path, [*table.columns, "__current"]) if r.pop("__current")]
        else:
            got = read_table(path, list(table.columns))
        if table is ORDERS:  # (delta-rs gives the timestamps in UTC; the events' are UTC wall times)
            got = [{**r, "placed": r["placed"].replace(tzinfo=None)} for r in got]
        assert got == sorted(db.expected(table), key=lambda r: [(v is None, str(v)) for v in r.values()]), table.name


def test_a_source_mirrors_each_topic_into_its_own_table_one_transaction_per_micro_batch(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    """Four tables from one pattern, each created on its first event with its key from the message
    keys (``lines``: two columns) and its types from the values' schemas (decimals, timestamps,
    dates); ``products`` first sees a delete; ``audit`` is excluded and Debezium's transaction topic
    is no table; ``lines`` has settings of its own (SCD type 2 history) over the defaults."""
    db = Database(prefix())
    config = pipeline(
        tmp_path,
        kafka,
        db,
        exclude=["public\\.aud.*"],
        tables={"lines": {"source": "shop", "history": "scd2"}},
    )
    db.send(spark, kafka, PRODUCTS, [("d", {"sku": "A-1", "price": decimal.Decimal("1.500")})])
    db.send(spark, kafka, ORDERS, [("c", order(1, "10.50", "new")), ("c", order(2, "-3.25", "new"))])
    db.send(spark, kafka, ORDERS, [("u", order(1, "11.00", "paid")), ("d", order(2, "-3.25", "new"))])
    born = dt.date(1990, 2, 28)
    db.send(spark, kafka, CUSTOMERS, [("r", {"id": 7, "name": "Ada", "born": born})])
    db.send(spark, kafka, LINES, [("c", {"order_id": 1, "line_no": n, "qty": n}) for n in (1, 2)])
    db.send(spark, kafka, LINES, [("u", {"order_id": 1, "line_no": 2, "qty": 20})])
    db.send(spark, kafka, AUDIT, [("c", {"id": 1, "what": "excluded"})])
    marker = json.dumps({"status": "BEGIN", "id": "571:1", "event_count": None, "data_collections": None})
    produce(spark, kafka, f"{db.prefix}.transaction", [(0, json.dumps({"id": "571:1"}), marker)])

    results = lakemerge.stream(config, spark=spark)
    assert sorted((r.table, r.source, r.source_batch) for r in results) == [
        (t, "group:shop", 1) for t in ("customers", "lines", "orders", "products")
    ], "one transaction, over the four tables"
    point = lakemerge.snapshot(config, "shop", spark=spark)
    assert point is not None and point.transaction == 1
    assert point.versions == {"customers": 0, "lines": 0, "orders": 0, "products": 0}
    assert_like_the_oracle(tmp_path, db, ORDERS, CUSTOMERS, LINES, PRODUCTS)
    assert read_table(lake(tmp_path, "products")) == [], "created by its delete, empty"
    assert not lake(tmp_path, "audit").exists() and not (tmp_path / "lake" / "transaction").exists()
    assert "__current" in table_columns(lake(tmp_path, "lines")) and "__current" not in table_columns(
        lake(tmp_path, "orders")
    ), "the table's own settings over the source's defaults"
    schema = {f.name: str(f.type) for f in deltalake.DeltaTable(str(lake(tmp_path, "orders"))).schema().fields}
    assert "decimal(10,2)" in schema["total"].lower() and "timestamp" in schema["placed"].lower()
    assert (
        "date"
        in {f.name: str(f.type) for f in deltalake.DeltaTable(str(lake(tmp_path, "customers"))).schema().fields}[
            "born"
        ].lower()
    )

    # A second transaction touching two tables and a table whose topic is new: the point lists
    # every table, the untouched ones at the versions the last point gave them.
    db.send(spark, kafka, PRODUCTS, [("c", {"sku": "A-1", "price": decimal.Decimal("2.125")})])
    db.send(spark, kafka, CUSTOMERS, [("u", {"id": 7, "name": "Ada L.", "born": born})])
    late = Table("refunds", {"id": "int", "amount": "numeric(6,2)"})
    db.send(spark, kafka, late, [("c", {"id": 1, "amount": decimal.Decimal("0.99")})])
    results = lakemerge.stream(config, spark=spark)
    assert sorted((r.table, r.source_batch) for r in results) == [("customers", 2), ("products", 2), ("refunds", 2)]
    point = lakemerge.snapshot(config, "shop", spark=spark)
    assert point is not None and point.transaction == 2
    assert point.versions == {"customers": 1, "lines": 0, "orders": 0, "products": 1, "refunds": 0}
    assert_like_the_oracle(tmp_path, db, ORDERS, CUSTOMERS, LINES, PRODUCTS, late)
    assert lakemerge.stream(config, spark=spark) == [], "nothing new"


def test_a_topic_created_while_the_source_streams_becomes_a_table(spark: Any, tmp_path: Path, kafka: str) -> None:
    db = Database(prefix())
    config = pipeline(tmp_path, kafka, db, trigger="500 ms", options={"kafka.metadata.max.age.ms": "500"})
    db.send(spark, kafka, ORDERS, [("c", order(1, "1.00", "first"))])
    stop = threading.Event()
    committed: list[Any] = []
    runner = threading.Thread(
        target=lambda: committed.extend(lakemerge.stream(config, spark=spark, stop=stop, on_result=lambda r: None))
    )
    runner.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not lake(tmp_path, "orders").exists():
            time.sleep(0.3)
        db.send(spark, kafka, CUSTOMERS, [("c", {"id": 1, "name": "new topic", "born": dt.date(2000, 1, 1)})])
        while time.monotonic() < deadline and not (lake(tmp_path, "customers") / "_delta_log").exists():
            time.sleep(0.3)
    finally:
        stop.set()
        runner.join(timeout=240)
    assert not runner.is_alive()
    assert {r.table for r in committed} == {"orders", "customers"}
    assert_like_the_oracle(tmp_path, db, ORDERS, CUSTOMERS)


def test_a_keyless_table_stops_the_stream_before_anything_is_committed(spark: Any, tmp_path: Path, kafka: str) -> None:
    """A table without a primary key: Debezium sends its events without a message key. The stream
    (here ``lakemerge stream`` on a pipeline file) stops with one line naming the topic, partition,
    offset and table, exit code 3, and nothing of the micro-batch is committed; a key given in the
    table's own section lets it through."""
    db = Database(prefix())
    logs = Table("logs", {"id": "int", "line": "text"})
    db.send(spark, kafka, ORDERS, [("c", order(1, "1.00", "kept back"))])
    produce(spark, kafka, db.topic(logs), [(1, None, logs.event("c", None, {"id": 1, "line": "no key"}, 500))])
    file = tmp_path / "pipeline.toml"
    file.write_text(
        f'[sources.shop]\nbootstrap_servers = "{kafka}"\ntopic_pattern = "{db.prefix}[.].*"\n'
        'table_path = "lake/{schema}/{table}"\ncheckpoint = "checkpoint"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "lakemerge.cli.app", "stream", str(file), "--available-now"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"LAKEMERGE_SPARK_LOG": str(tmp_path / "spark.log"), **_env()},
        timeout=600,
    )
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"topic {db.topic(logs)}, partition 1, offset 0: table 'logs' has no key" in lines[0]
    assert not (tmp_path / "lake").exists(), "nothing of the micro-batch is committed"

    keyed = pipeline(tmp_path, kafka, db, tables={"logs": {"source": "shop", "key": "id", "sequence": []}})
    results = lakemerge.stream(keyed, spark=spark)
    assert sorted(r.table for r in results) == ["logs", "orders"]
    assert read_table(lake(tmp_path, "logs"), ["id", "line"]) == [{"id": 1, "line": "no key"}]


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}


def test_a_source_whose_checkpoint_is_lost_resumes_from_its_tables_offsets(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    """Deleted mid-stream, then started again with ``starting_offsets = "latest"`` and another
    ``max_records_per_batch``: transactions go on from the last point, every event applied once."""
    db = Database(prefix())
    rng = random.Random(4)
    tables = (ORDERS, CUSTOMERS)

    def changes(count: int) -> None:
        for _ in range(count):
            n = rng.randrange(1, 6)
            if rng.random() < 0.5:
                db.send(spark, kafka, ORDERS, [(rng.choice("cud"), order(n, f"{n}.{rng.randrange(99):02d}", "x"))])
            else:
                db.send(
                    spark,
                    kafka,
                    CUSTOMERS,
                    [(rng.choice("cu"), {"id": n, "name": f"c{rng.randrange(9)}", "born": None})],
                )

    changes(12)
    first = lakemerge.stream(pipeline(tmp_path, kafka, db, max_records_per_batch=4), spark=spark)
    transactions = {r.source_batch for r in first}
    assert len(transactions) >= 3
    shutil.rmtree(tmp_path / "checkpoint")
    changes(10)
    resumed = pipeline(tmp_path, kafka, db, max_records_per_batch=7, starting_offsets="latest")
    second = lakemerge.stream(resumed, spark=spark)
    assert second and min(r.source_batch or 0 for r in second) > max(t or 0 for t in transactions)
    assert_like_the_oracle(tmp_path, db, *tables)
    for table in tables:
        assert_each_offset_applied_once(lake(tmp_path, table.name), db.sent_to(table))
    shutil.rmtree(tmp_path / "checkpoint")
    assert lakemerge.stream(resumed, spark=spark) == [], "nothing new: nothing applied"


def test_a_sources_bad_event_fails_its_transaction_or_goes_to_its_tables_quarantine(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    """A batch's rules hold for each table of a source: over the threshold (the source's default,
    0), the micro-batch stops naming the event's place and no point is recorded; a table whose own
    settings allow one bad row quarantines it and commits the rest, counted."""
    db = Database(prefix())
    db.send(spark, kafka, CUSTOMERS, [("c", {"id": 1, "name": "Ada", "born": dt.date(1990, 1, 1)})])
    bad = (0, message_key(CUSTOMERS, {"id": 2}), "not json")
    produce(spark, kafka, db.topic(CUSTOMERS), [bad])
    with pytest.raises(lakemerge.InputError) as raised:
        lakemerge.stream(pipeline(tmp_path, kafka, db), spark=spark)
    assert f"group:shop, batch 1, topic {db.topic(CUSTOMERS)}, partition 0, offset" in str(raised.value)
    assert "malformed JSON event" in str(raised.value)
    assert lakemerge.snapshot(pipeline(tmp_path, kafka, db), "shop", spark=spark) is None
    lenient = pipeline(tmp_path, kafka, db, tables={"customers": {"source": "shop", "max_bad_rows": 1}})
    results = lakemerge.stream(lenient, spark=spark)
    assert [(r.table, r.metrics.rows_read, r.metrics.rows_bad, r.metrics.inserted) for r in results] == [
        ("customers", 2, 1, 1)
    ]
    kept = lakemerge.quarantine(lenient.sources["shop"].table(db.topic(CUSTOMERS), ("id",)), spark=spark)
    assert [r.record for r in kept] == ["not json"]
    assert_like_the_oracle(tmp_path, db, CUSTOMERS)


def test_a_table_whose_primary_key_changed_stops_the_stream_before_anything_is_committed(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    """``orders`` is created with the key ``id``; its primary key then becomes ``(id, note)`` in
    the database, and its events' message keys say so. The micro-batch (also holding the first
    event of ``customers``) stops with one line naming the topic, partition, offset, table, the
    stored key and the new one: no table commits and no point is recorded. The key given in the
    table's own section lets it through with that key."""
    db = Database(prefix())
    db.send(spark, kafka, ORDERS, [("c", order(1, "1.00", "a")), ("c", order(2, "2.00", "b"))])
    config = pipeline(tmp_path, kafka, db)
    assert {r.table for r in lakemerge.stream(config, spark=spark)} == {"orders"}
    before = lakemerge.snapshot(config, "shop", spark=spark)
    assert before is not None
    orders_version = deltalake.DeltaTable(str(lake(tmp_path, "orders"))).version()

    rekeyed = Table(ORDERS.name, dict(ORDERS.columns), key=("id", "note"))
    changed = order(3, "3.00", "c")
    partition = zlib.crc32(repr([changed[k] for k in rekeyed.key]).encode()) % 3
    offset = db.counts.get((db.topic(ORDERS), partition), 0)
    db.send(spark, kafka, CUSTOMERS, [("c", {"id": 1, "name": "Ada", "born": dt.date(1990, 1, 1)})])
    db.send(spark, kafka, rekeyed, [("c", changed)])
    with pytest.raises(lakemerge.InputError) as raised:
        lakemerge.stream(config, spark=spark)
    message = str(raised.value)
    assert "\n" not in message, "one line"
    assert f"topic {db.topic(ORDERS)}, partition {partition}, offset {offset}: " in message, message
    assert "table 'orders' has the key ['id'], its events' message keys name ['id', 'note']" in message, message
    assert deltalake.DeltaTable(str(lake(tmp_path, "orders"))).version() == orders_version
    assert not lake(tmp_path, "customers").exists(), "nothing of the micro-batch is committed"
    assert lakemerge.snapshot(config, "shop", spark=spark) == before

    keyed = pipeline(tmp_path, kafka, db, tables={"orders": {"source": "shop", "key": "id"}})
    assert {r.table for r in lakemerge.stream(keyed, spark=spark)} == {"orders", "customers"}
    assert_like_the_oracle(tmp_path, db, ORDERS, CUSTOMERS)
