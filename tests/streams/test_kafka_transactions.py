"""A database's transactions kept whole by a source, from a real Kafka broker: Debezium's events
carry their transaction (``provide.transaction.metadata``) and the transaction topic its BEGIN and
END records. Transactions span two and three tables, their events land in three partitions per
table and arrive in micro-batches of a few records, their END records late, one transaction's last
events only after a stream has stopped. At every point the source recorded, every table read back
with delta-rs at the point's version holds the database's first k transactions, each entirely;
at the end, all of them (the plain-Python oracle). A transaction whose END never comes stops the
stream once it has waited longer than the source's timeout, naming where it is, with nothing
committed; a lost checkpoint while a transaction waits loses nothing."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import deltalake
import pytest

import lakemerge
from bench.kafka import produce
from tests.feeds.debezium_events import Table
from tests.oracle import Oracle
from tests.streams.ranges import assert_each_offset_applied_once
from tests.streams.test_kafka_sources import message_key, prefix

pytestmark = pytest.mark.kafka

CUSTOMERS = Table("customers", {"id": "int", "name": "text"})
STOCK = Table("stock", {"id": "int", "qty": "int"})
LINES = Table("lines", {"order_id": "int", "line_no": "int", "qty": "int"}, key=("order_id", "line_no"))
PRODUCTS = Table("products", {"sku": "text", "price": "int"}, key=("sku",))
TABLES = (CUSTOMERS, STOCK, LINES, PRODUCTS)
PARTITIONS = 3


def some_row(rng: random.Random, table: Table) -> dict[str, Any]:
    if table is LINES:
        return {"order_id": rng.randrange(1, 4), "line_no": rng.randrange(1, 3), "qty": rng.randrange(100)}
    if table is PRODUCTS:
        return {"sku": f"S-{rng.randrange(4)}", "price": rng.randrange(100)}
    if table is CUSTOMERS:
        return {"id": rng.randrange(1, 5), "name": f"n{rng.randrange(100)}"}
    return {"id": rng.randrange(1, 5), "qty": rng.randrange(100)}


@dataclass
class Source:
    """A database committing transactions, and what Debezium writes for them: each event to its
    table's topic (the partition its key hashes to), in commit order, with its transaction's id
    and order; a BEGIN and an END per transaction to ``<prefix>.transaction``."""

    prefix: str
    lsn: int = 100
    committed: list[list[tuple[Table, str, dict[str, Any], int]]] = field(default_factory=list)
    counts: dict[tuple[str, int], int] = field(default_factory=dict)

    def topic(self, table: Table) -> str:
        return f"{self.prefix}.public.{table.name}"

    def transaction(self, changes: list[tuple[Table, str, dict[str, Any]]]) -> tuple[list[Any], list[Any]]:
        """Commit ``changes`` as one transaction: its events (topic, partition, key, value) and its
        BEGIN and END records, not yet sent."""
        number = len(self.committed) + 1
        name = f"{number}:{self.lsn}"
        orders: dict[str, int] = {}
        events = []
        done = []
        for total, (table, op, row) in enumerate(changes, start=1):
            self.lsn += 1
            collection = f"public.{table.name}"
            orders[collection] = orders.get(collection, 0) + 1
            before, after = (row, None) if op == "d" else (None, row)
            event = json.loads(table.event(op, before, after, self.lsn))
            event["payload"]["transaction"] = {
                "id": name,
                "total_order": total,
                "data_collection_order": orders[collection],
            }
            partition = zlib.crc32(repr([row[k] for k in table.key]).encode()) % PARTITIONS
            events.append((self.topic(table), partition, message_key(table, row), json.dumps(event)))
            done.append((table, op, row, self.lsn))
        self.committed.append(done)
        counted = [{"data_collection": c, "event_count": n} for c, n in sorted(orders.items())]
        begin = {"status": "BEGIN", "id": name, "ts_ms": self.lsn, "event_count": None, "data_collections": None}
        end = {"status": "END", "id": name, "ts_ms": self.lsn, "event_count": len(changes), "data_collections": counted}
        key = json.dumps({"id": name})
        markers = [(f"{self.prefix}.transaction", 0, key, json.dumps(begin)), (None, 0, key, json.dumps(end))]
        return events, markers

    def send(self, spark: Any, kafka: str, records: list[Any]) -> None:
        by_topic: dict[str, list[tuple[int, str, str]]] = {}
        for topic, partition, key, value in records:
            topic = topic or f"{self.prefix}.transaction"
            by_topic.setdefault(topic, []).append((partition, key, value))
            self.counts[(topic, partition)] = self.counts.get((topic, partition), 0) + 1
        for topic, messages in by_topic.items():
            produce(spark, kafka, topic, messages)

    def state(self, transactions: int) -> dict[str, list[str]]:
        """Every table after the first ``transactions`` transactions (each row as sorted text)."""
        found = {}
        for table in TABLES:
            oracle = Oracle(key=table.key, seq="lsn", op="op")
            changes = [
                {**row, "lsn": lsn, "op": "D" if op == "d" else "U"}
                for done in self.committed[:transactions]
                for t, op, row, lsn in done
                if t is table
            ]
            oracle.apply([changes] if changes else [])
            found[table.name] = sorted(json.dumps({c: r[c] for c in table.columns}) for r in oracle.rows())
        return found


def pipeline(root: Path, kafka: str, db: Source, **settings: Any) -> lakemerge.PipelineConfig:
    source = {
        "bootstrap_servers": kafka,
        "topic_pattern": f"{db.prefix}\\..*",
        "table_path": str(root / "lake" / "{schema}" / "{table}"),
        "checkpoint": str(root / "checkpoint"),
        "defaults": {"sequence": "__source_lsn"},
        **settings,
    }
    return lakemerge.PipelineConfig.model_validate({"sources": {"shop": source}})


def lake(root: Path, table: Table) -> Path:
    return root / "lake" / "public" / table.name


def tables_at(root: Path, versions: dict[str, int]) -> dict[str, list[str]]:
    found = {}
    for table in TABLES:
        if table.name not in versions:
            found[table.name] = []
            continue
        rows = deltalake.DeltaTable(str(lake(root, table)), version=versions[table.name]).to_pyarrow_table()
        found[table.name] = sorted(json.dumps({c: r[c] for c in table.columns}) for r in rows.to_pylist())
    return found


def points(root: Path) -> list[dict[str, int]]:
    state = deltalake.DeltaTable(str(root / "lake" / "_sources" / "shop")).to_pyarrow_table()
    return [json.loads(r["versions"]) for r in sorted(state.to_pylist(), key=lambda r: r["point"])]


def assert_every_point_holds_whole_transactions(root: Path, db: Source) -> list[int]:
    """At each point, the tables hold the first k transactions for some k, k never going back;
    the ks."""
    states = [db.state(k) for k in range(len(db.committed) + 1)]
    found = []
    for versions in points(root):
        seen = tables_at(root, versions)
        matching = [k for k, state in enumerate(states) if state == seen]
        assert matching, f"the point {versions} holds no prefix of whole transactions"
        found.append(max(matching))
    assert found == sorted(found), found
    return found


def random_transactions(db: Source, rng: random.Random, count: int) -> list[tuple[list[Any], list[Any]]]:
    made = []
    for _ in range(count):
        tables = rng.sample(TABLES, rng.choice((1, 2, 2, 3)))
        changes = [(t, rng.choice("cuud"), some_row(rng, t)) for t in tables for _ in range(rng.randrange(1, 3))]
        made.append(db.transaction(changes))
    return made


def test_every_point_holds_the_databases_transactions_whole(spark: Any, tmp_path: Path, kafka: str) -> None:
    """Twelve transactions over four tables, their events interleaved across three partitions per
    table and read four records a micro-batch, each END sent two transactions late; the last
    transaction's events on one table sent only after the first stream stopped."""
    db = Source(prefix())
    rng = random.Random(7)
    made = random_transactions(db, rng, 11)
    made.append(db.transaction([(CUSTOMERS, "c", {"id": 99, "name": "new"}), (STOCK, "c", {"id": 99, "qty": 1})]))
    late: list[Any] = []
    records: list[Any] = []
    for number, (events, markers) in enumerate(made):
        if number == len(made) - 1:
            events, late = events[:1], events[1:]
        records += [markers[0], *events]
        late_end = made[number - 2][1][1] if number >= 2 else None
        if late_end is not None:
            records.append(late_end)
    records += [m[1][1] for m in made[-2:]]
    db.send(spark, kafka, records)
    config = pipeline(tmp_path, kafka, db, max_records_per_batch=4)

    first = lakemerge.stream(config, spark=spark)
    assert first, "the complete transactions applied"
    ks = assert_every_point_holds_whole_transactions(tmp_path, db)
    assert ks[-1] < len(made), "the last transaction waits for its events"
    staged = tmp_path / "lake" / "_sources" / "shop_staging"
    assert deltalake.DeltaTable(str(staged)).to_pyarrow_table().num_rows > 0, "its events wait, staged"

    db.send(spark, kafka, late)
    lakemerge.stream(config, spark=spark)
    ks = assert_every_point_holds_whole_transactions(tmp_path, db)
    assert ks[-1] == len(made), "every transaction, once its events came"
    assert len(set(ks)) > 3, f"the transactions applied over several points: {ks}"
    for table in TABLES:
        assert_each_offset_applied_once(
            lake(tmp_path, table), {p: n for p, n in db.counts.items() if p[0] == db.topic(table)}
        )


def test_a_transaction_whose_end_never_comes_stops_the_stream_once_it_has_waited_too_long(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    """Its events wait (the stream goes on); once it has waited longer than ``transaction_timeout``,
    the next micro-batch stops with one line naming the table, topic, partition and offset of its
    first event, and what it misses; nothing of that micro-batch is committed."""
    db = Source(prefix())
    events, _ = db.transaction(
        [(CUSTOMERS, "c", {"id": 1, "name": "a"}), (LINES, "c", some_row(random.Random(1), LINES))]
    )
    more, markers = db.transaction([(STOCK, "c", {"id": 1, "qty": 5})])
    sent = time.monotonic()
    db.send(spark, kafka, events)
    config = pipeline(tmp_path, kafka, db, transaction_timeout="15 seconds")
    assert lakemerge.stream(config, spark=spark) == [], "the transaction waits"
    before = lakemerge.snapshot(config, "shop", spark=spark)
    assert before is not None and before.versions == {}, "a point records what waits"
    time.sleep(max(0.0, sent + 16 - time.monotonic()))
    db.send(spark, kafka, [*more, *markers])
    with pytest.raises(lakemerge.InputError) as raised:
        lakemerge.stream(config, spark=spark)
    message = str(raised.value)
    assert "\n" not in message
    topic, partition = events[0][0], events[0][1]
    assert f"topic {topic}, partition {partition}, offset 0: " in message, message
    assert "table 'customers', source transaction 1:100 still misses its END record after" in message, message
    assert "transaction_timeout = '15 seconds'" in message
    assert lakemerge.snapshot(config, "shop", spark=spark) == before, "no point"
    assert not lake(tmp_path, STOCK).exists() and not lake(tmp_path, CUSTOMERS).exists(), "no table committed"


def test_a_lost_checkpoint_while_a_transaction_waits_loses_nothing(spark: Any, tmp_path: Path, kafka: str) -> None:
    """The checkpoint deleted while a transaction's events wait for its END; started again with
    ``starting_offsets = "latest"``: the staged events apply with their END, each offset once."""
    db = Source(prefix())
    made = random_transactions(db, random.Random(11), 4)
    sent = [r for events, (begin, _) in made[:3] for r in (begin, *events)] + [m[1][1] for m in made[:2]]
    db.send(spark, kafka, sent)
    config = pipeline(tmp_path, kafka, db, max_records_per_batch=5)
    lakemerge.stream(config, spark=spark)
    assert assert_every_point_holds_whole_transactions(tmp_path, db)[-1] == 2
    shutil.rmtree(tmp_path / "checkpoint")
    db.send(spark, kafka, [made[2][1][1], made[3][1][0], *made[3][0], made[3][1][1]])
    resumed = pipeline(tmp_path, kafka, db, max_records_per_batch=3, starting_offsets="latest")
    lakemerge.stream(resumed, spark=spark)
    assert assert_every_point_holds_whole_transactions(tmp_path, db)[-1] == 4
    for table in TABLES:
        sent_to = {p: n for p, n in db.counts.items() if p[0] == db.topic(table)}
        if sent_to:
            assert_each_offset_applied_once(lake(tmp_path, table), sent_to)


def test_a_source_killed_at_random_moments_keeps_every_transaction_whole(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    """``lakemerge stream`` on a source, killed with SIGKILL at random moments while transactions
    keep arriving (their END records late), once started again with its checkpoint deleted, from
    ``latest`` and with another micro-batch size: at every point, whole transactions; at the end,
    all of them, each offset applied once."""
    rng = random.Random(int(os.environ.get("LAKEMERGE_FAULT_SEED", "5")))
    db = Source(prefix())
    file = tmp_path / "p.toml"

    def write(size: int, starting: str = "earliest") -> None:
        file.write_text(
            f'[sources.shop]\nbootstrap_servers = "{kafka}"\ntopic_pattern = "{db.prefix}[.].*"\n'
            'table_path = "lake/{schema}/{table}"\ncheckpoint = "checkpoint"\ntrigger = "300 ms"\n'
            f'max_records_per_batch = {size}\nstarting_offsets = "{starting}"\n'
            '[sources.shop.defaults]\nsequence = "__source_lsn"\n'
        )

    write(12)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    env["LAKEMERGE_SPARK_LOG"] = str(tmp_path / "spark.log")
    owed: list[Any] = []
    for attempt in range(int(os.environ.get("LAKEMERGE_KAFKA_KILLS", "3"))):
        if attempt == 2:
            shutil.rmtree(tmp_path / "checkpoint", ignore_errors=True)
            write(30, starting="latest")
        process = subprocess.Popen(
            [sys.executable, "-m", "lakemerge.cli.app", "stream", str(file), "--json"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
        )
        deadline, latest = time.monotonic() + rng.uniform(10.0, 25.0), time.monotonic() + 300
        state = tmp_path / "lake" / "_sources" / "shop" / "_delta_log"
        while process.poll() is None and time.monotonic() < latest:
            if time.monotonic() > deadline and (attempt != 0 or any(state.glob("*.json"))):
                break
            records: list[Any] = []
            for events, (begin, end) in random_transactions(db, rng, rng.randrange(1, 4)):
                records += [begin, *events]
                owed.append(end)
            while owed and rng.random() < 0.6:
                records.append(owed.pop(0))
            db.send(spark, kafka, records)
            time.sleep(rng.uniform(0.3, 1.5))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    db.send(spark, kafka, owed)
    done = subprocess.run(
        [sys.executable, "-m", "lakemerge.cli.app", "stream", str(file), "--available-now", "--json"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        timeout=600,
    )
    assert done.returncode == 0
    ks = assert_every_point_holds_whole_transactions(tmp_path, db)
    assert ks[-1] == len(db.committed), "every transaction applied"
    for table in TABLES:
        sent_to = {p: n for p, n in db.counts.items() if p[0] == db.topic(table)}
        if sent_to:
            assert_each_offset_applied_once(lake(tmp_path, table), sent_to)
