"""Streams from a real Kafka broker: records ordered by sequence, or by partition and offset; a
poison message quarantined or failing its micro-batch with topic, partition and offset; compared
with the plain-Python oracle, read back with delta-rs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from bench.kafka import produce
from tests.helpers import read_table
from tests.oracle import Oracle
from tests.streams.ranges import table_stream

pytestmark = pytest.mark.kafka

_topics = itertools.count()


def topic() -> str:
    return f"shop.orders.{next(_topics)}"


def pipeline(root: Path, bootstrap: str, name: str, **table: Any) -> lakemerge.PipelineConfig:
    stream = table_stream(root, bootstrap, name, **table.pop("stream", {}))
    settings = {"path": str(root / "orders"), "key": "id", "sequence": "seq", "stream": stream, **table}
    return lakemerge.PipelineConfig.model_validate({"tables": {"orders": settings}})


def message(id: int, seq: int, op: str, v: str | None = None) -> str:
    return json.dumps({"id": id, "seq": seq, "op": op, "v": v})


def changes(*rows: tuple[int, int, str, str | None]) -> list[dict[str, Any]]:
    return [{"id": i, "seq": s, "op": o, "v": v} for i, s, o, v in rows]


def test_a_kafka_stream_applies_each_micro_batch_once_and_matches_the_oracle(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    name = topic()
    config = pipeline(tmp_path, kafka, name)
    oracle = Oracle(key=("id",), seq="seq", op="op")
    first = [
        (0, "1", message(1, 1, "I", "a")),
        (1, "2", message(2, 1, "I", "b")),
        (0, "1", message(1, 2, "U", "a2")),
        (2, "3", message(3, 1, "I", "c")),
        (2, "3", message(3, 5, "D")),
    ]
    produce(spark, kafka, name, first)
    results = lakemerge.stream(config, spark=spark)
    assert [(r.source, r.source_batch) for r in results] == [("stream:orders", 0)]
    oracle.apply([changes((1, 1, "I", "a"), (2, 1, "I", "b"), (1, 2, "U", "a2"), (3, 1, "I", "c"), (3, 5, "D", None))])
    assert read_table(tmp_path / "orders", ["id", "seq", "v"]) == [
        {c: r[c] for c in ("id", "seq", "v")} for r in oracle.rows()
    ]
    # Out of order across partitions: the sequence decides; an update older than the stored row,
    # and one older than a delete (its tombstone), are late.
    second = [(1, "2", message(2, 3, "U", "b3")), (0, "2", message(2, 2, "U", "b2")), (0, "1", message(1, 1, "U"))]
    second.append((1, "3", message(3, 4, "U", "older than its delete")))
    produce(spark, kafka, name, second)
    results = lakemerge.stream(config, spark=spark)
    assert [r.source_batch for r in results] == [1] and results[0].metrics.late == 2
    oracle.apply(
        [changes((2, 3, "U", "b3"), (2, 2, "U", "b2"), (1, 1, "U", None), (3, 4, "U", "older than its delete"))]
    )
    assert read_table(tmp_path / "orders", ["id", "seq", "v"]) == [
        {c: r[c] for c in ("id", "seq", "v")} for r in oracle.rows()
    ]
    assert lakemerge.stream(config, spark=spark) == [], "nothing new"


def test_without_a_sequence_partition_and_offset_order_a_keys_changes(spark: Any, tmp_path: Path, kafka: str) -> None:
    """Each key's messages are in one partition (as Kafka partitions by key): their offsets order
    them; the message key fills the record's key where the value lacks it."""
    name = topic()
    config = pipeline(
        tmp_path,
        kafka,
        name,
        sequence=[],
        stream={"schema": "id INT, op STRING, v STRING", "message_key": "json"},
    )
    produce(
        spark,
        kafka,
        name,
        [
            (0, '{"id": 1}', '{"op": "I", "v": "a"}'),
            (1, '{"id": 2}', '{"op": "I", "v": "b"}'),
            (0, '{"id": 1}', '{"op": "U", "v": "a2"}'),
            (1, '{"id": 2}', '{"op": "D"}'),
            (0, '{"id": 1}', '{"op": "U", "v": "a3"}'),
        ],
    )
    lakemerge.stream(config, spark=spark)
    assert read_table(tmp_path / "orders", ["id", "v"]) == [{"id": 1, "v": "a3"}]
    produce(spark, kafka, name, [(1, '{"id": 2}', '{"op": "I", "v": "again"}')])
    lakemerge.stream(config, spark=spark)
    assert read_table(tmp_path / "orders", ["id", "v"]) == [{"id": 1, "v": "a3"}, {"id": 2, "v": "again"}]


def test_a_poison_message_fails_its_micro_batch_naming_its_place_or_goes_to_the_quarantine(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    name = topic()
    config = pipeline(tmp_path, kafka, name)
    produce(
        spark, kafka, name, [(0, "1", message(1, 1, "I", "a")), (1, None, "not json"), (1, "2", message(2, 1, "I"))]
    )
    with pytest.raises(lakemerge.InputError) as raised:
        lakemerge.stream(config, spark=spark)
    assert str(raised.value).startswith(
        f"stream:orders, batch 0, topic {name}, partition 1, offset 0: malformed JSON record (record: 'not json')"
    )
    assert not (tmp_path / "orders").exists(), "nothing of the micro-batch is committed"
    lenient = config.model_copy(
        update={"tables": {"orders": config.table("orders").model_copy(update={"max_bad_rows": 1})}}
    )
    results = lakemerge.stream(lenient, spark=spark)
    assert [(r.source_batch, r.metrics.rows_bad, r.metrics.inserted) for r in results] == [(0, 1, 2)]
    kept = lakemerge.quarantine(lenient.table("orders"), spark=spark)
    assert [(r.file, r.row, r.record) for r in kept] == [
        (f"stream:orders, batch 0, topic {name}, partition 1, offset", 0, "not json")
    ]


def test_a_groups_stream_commits_each_micro_batch_as_one_transaction(spark: Any, tmp_path: Path, kafka: str) -> None:
    orders, lines = topic(), topic()

    def stream(name: str) -> dict[str, Any]:
        return {
            "bootstrap_servers": kafka,
            "topics": [name],
            "format": "json",
            "schema": "id INT, seq BIGINT, op STRING, v STRING",
            "op_column": "op",
            "checkpoint": str(tmp_path / f"unused-{name}"),
        }

    config = lakemerge.PipelineConfig.model_validate(
        {
            "tables": {
                name: {"path": str(tmp_path / name), "key": "id", "sequence": "seq", "stream": stream(t)}
                for name, t in (("orders", orders), ("lines", lines))
            },
            "groups": {
                "sales": {
                    "tables": ["orders", "lines"],
                    "state": str(tmp_path / "sales"),
                    "stream": {"checkpoint": str(tmp_path / "checkpoint")},
                }
            },
        }
    )
    produce(spark, kafka, orders, [(0, "1", message(1, 1, "I", "o1"))])
    produce(spark, kafka, lines, [(0, "7", message(7, 1, "I", "l7")), (1, "8", message(8, 1, "I", "l8"))])
    results = lakemerge.stream(config, spark=spark)
    assert sorted((r.table, r.source, r.source_batch) for r in results) == [
        ("lines", "group:sales", 1),
        ("orders", "group:sales", 1),
    ]
    point = lakemerge.snapshot(config, "sales", spark=spark)
    assert point is not None and point.transaction == 1 and point.versions == {"orders": 0, "lines": 0}
    produce(spark, kafka, lines, [(1, "8", message(8, 2, "D"))])
    results = lakemerge.stream(config, spark=spark)
    assert [(r.table, r.source_batch) for r in results] == [("lines", 2)], "a table with no record is left alone"
    point = lakemerge.snapshot(config, "sales", spark=spark)
    assert point is not None and point.transaction == 2 and point.versions == {"orders": 0, "lines": 1}
    assert read_table(tmp_path / "lines", ["id"]) == [{"id": 7}]
    with pytest.raises(ValueError, match="a topic feeds one table only"):
        lakemerge.PipelineConfig.model_validate(
            {
                "tables": {n: {"path": str(tmp_path / n), "key": "id", "stream": stream(orders)} for n in ("a", "b")},
                "groups": {"g": {"tables": ["a", "b"], "state": "s", "stream": {"checkpoint": "c"}}},
            }
        )


def test_debezium_events_from_kafka_match_the_oracle(spark: Any, tmp_path: Path, kafka: str) -> None:
    """Events as Debezium's PostgreSQL connector sends them with the JSON converter: a snapshot read,
    inserts, updates, a delete and its tombstone, a key-changing update (a delete of the old key, a
    create of the new one), out of order across partitions (the LSN orders them), replayed events;
    decimals as base64 bytes decoded by their schema."""
    import decimal

    from tests.feeds.debezium_events import Table

    shop = Table("orders", {"id": "int", "total": "numeric(10,2)", "note": "text"})
    name = topic()
    config = lakemerge.PipelineConfig.model_validate(
        {
            "tables": {
                "orders": {
                    "path": str(tmp_path / "orders"),
                    "key": "id",
                    "sequence": "__source_lsn",
                    "stream": {"bootstrap_servers": kafka, "topics": [name], "checkpoint": str(tmp_path / "ck")},
                }
            }
        }
    )

    def row(id: int, total: str, note: str) -> dict[str, Any]:
        return {"id": id, "total": decimal.Decimal(total), "note": note}

    def key(id: int) -> str:
        return json.dumps({"id": id})

    first = [
        (0, key(1), shop.event("r", None, row(1, "10.50", "snapshot"), 100)),
        (1, key(2), shop.event("r", None, row(2, "-3.25", "snapshot"), 100)),
        (0, key(1), shop.event("u", row(1, "10.50", "snapshot"), row(1, "11.00", "updated"), 110)),
        (1, key(3), shop.event("c", None, row(3, "99999999.99", "created"), 120)),
        (1, key(2), shop.event("d", row(2, "-3.25", "snapshot"), None, 130)),
        (1, key(2), None),  # the delete's tombstone
    ]
    produce(spark, kafka, name, first)
    results = lakemerge.stream(config, spark=spark)
    assert results[0].metrics.ignored == 1, "the tombstone is ignored and counted"
    expected = {1: ("11.00", "updated"), 3: ("99999999.99", "created")}
    got = {r["id"]: (str(r["total"]), r["note"]) for r in read_table(tmp_path / "orders", ["id", "total", "note"])}
    assert got == expected
    # A key change (id 3 → 4: a delete of 3, then a create of 4), out of order across partitions, and
    # a replay of an event already applied.
    second = [
        (0, key(4), shop.event("c", None, row(4, "99999999.99", "moved"), 140)),
        (1, key(3), shop.event("d", row(3, "99999999.99", "created"), None, 140)),
        (0, key(1), shop.event("u", row(1, "11.00", "updated"), row(1, "12.00", "newest"), 160)),
        (1, key(1), shop.event("u", row(1, "10.50", "snapshot"), row(1, "11.00", "updated"), 110)),
    ]
    produce(spark, kafka, name, second)
    results = lakemerge.stream(config, spark=spark)
    assert (results[0].metrics.superseded, results[0].metrics.late) == (1, 0), "the replay is older than id 1's newest"
    got = {r["id"]: (str(r["total"]), r["note"]) for r in read_table(tmp_path / "orders", ["id", "total", "note"])}
    assert got == {1: ("12.00", "newest"), 4: ("99999999.99", "moved")}
