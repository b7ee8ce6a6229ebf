"""A Kafka stream on the older supported Spark line: ``lakemerge stream`` from the wheel installed
beside PySpark 4.1 (which takes Spark's Kafka source 4.1.1), against the suite's broker, twice, each
micro-batch applied once and the table matching the oracle (``python -m pytest -m compat``)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from bench.kafka import produce
from tests.helpers import read_table
from tests.oracle import apply_batch, state_rows
from tests.wheels import Venv

pytestmark = pytest.mark.compat

COLUMNS = ("id", "seq", "v")


def _messages(rng: random.Random, start: int) -> list[tuple[int, str, str]]:
    found = []
    for n in range(30):
        k = rng.randrange(12)
        found.append(
            (
                k % 3,
                str(k),
                json.dumps(
                    {"id": k, "seq": start + n - rng.randrange(20), "op": rng.choice("IUD"), "v": f"m{start + n}"}
                ),
            )
        )
    return found


def test_a_kafka_stream_on_spark_4_1_applies_each_message_once(
    spark: Any, spark41: Venv, kafka: str, tmp_path: Path
) -> None:
    topic = "compat.orders"
    (tmp_path / "pipeline.toml").write_text(
        '[tables.orders]\npath = "lake/orders"\nkey = "id"\nsequence = "seq"\n'
        f'[tables.orders.stream]\nbootstrap_servers = "{kafka}"\ntopics = ["{topic}"]\nformat = "json"\n'
        'schema = "id INT, seq BIGINT, op STRING, v STRING"\nop_column = "op"\nupsert_codes = ["I", "U"]\n'
        'checkpoint = "checkpoints/orders"\nstarting_offsets = "earliest"\n'
    )
    rng = random.Random(7)
    state: dict[Any, Any] = {}
    tombstones: dict[Any, Any] = {}
    for round, start in enumerate((100, 200)):
        messages = _messages(rng, start)
        produce(spark, kafka, topic, messages)
        ran = spark41.run(["lakemerge", "stream", "pipeline.toml", "--available-now", "--json"], cwd=tmp_path)
        assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
        batches = json.loads(ran.stdout)["batches"]
        assert [b["batch_id"] is not None for b in batches] == [True], round
        # (one micro-batch: partition, then offset, order a key's changes of equal sequence)
        ordered = [json.loads(value) for _, _, value in sorted(messages, key=lambda m: m[0])]
        state, _ = apply_batch(state, [("batch", ordered)], key=("id",), seq="seq", op="op", tombstones=tombstones)
        assert read_table(tmp_path / "lake" / "orders", COLUMNS) == state_rows(state, COLUMNS), round
    log = Path(spark41.env["LAKEMERGE_SPARK_LOG"]).read_text(errors="replace")
    assert "spark-sql-kafka-0-10_2.13;4.1.1" in log
