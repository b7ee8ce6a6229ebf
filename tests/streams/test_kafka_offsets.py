"""The table is a Kafka stream's checkpoint: its commits record the offsets they applied, a
micro-batch applies only its records above them whatever its id, and a query whose checkpoint is
lost or older starts (or goes on) where the tables say: nothing skipped, nothing applied twice.
Read back with delta-rs, compared with the plain-Python oracle."""

from __future__ import annotations

import itertools
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from bench.kafka import produce
from tests.helpers import read_table
from tests.oracle import Oracle
from tests.streams.ranges import assert_each_offset_applied_once, sent_counts, table_stream

pytestmark = pytest.mark.kafka

_topics = itertools.count()
COLUMNS = ("id", "seq", "v")


def topic() -> str:
    return f"shop.offsets.{next(_topics)}"


def pipeline(root: Path, bootstrap: str, name: str, **stream: Any) -> lakemerge.PipelineConfig:
    settings = {"path": str(root / "orders"), "key": "id", "sequence": "seq"}
    settings["stream"] = table_stream(root, bootstrap, name, **stream)
    return lakemerge.PipelineConfig.model_validate({"tables": {"orders": settings}})


class Changes:
    """Random changes of a few keys, each key's in one partition, with rising sequences; every
    message sent is kept for the oracle."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.sequence = 0
        self.sent: list[tuple[int, str, str]] = []

    def send(self, spark: Any, bootstrap: str, name: str, count: int) -> None:
        batch = []
        for _ in range(count):
            key = self.rng.randrange(12)
            self.sequence += 1
            op = self.rng.choice(["I", "U", "U", "D"])
            batch.append((key % 3, str(key), json.dumps({"id": key, "seq": self.sequence, "op": op, "v": f"v{key}"})))
        produce(spark, bootstrap, name, batch)
        self.sent.extend(batch)

    def expected(self) -> list[dict[str, Any]]:
        oracle = Oracle(key=("id",), seq="seq", op="op")
        oracle.apply([[json.loads(value) for _, _, value in self.sent]])
        return [{c: r[c] for c in COLUMNS} for r in oracle.rows()]


def test_a_stream_whose_checkpoint_is_lost_resumes_where_its_table_says(spark: Any, tmp_path: Path, kafka: str) -> None:
    """Deleted mid-stream, then started again with ``starting_offsets = "latest"`` and another
    ``max_records_per_batch``: the micro-batch ids start again at 0, and still every record sent
    is applied once (the ids of the batches applied before do not hide the new ones)."""
    name = topic()
    changes = Changes(11)
    config = pipeline(tmp_path, kafka, name, max_records_per_batch=9)
    changes.send(spark, kafka, name, 45)
    first = lakemerge.stream(config, spark=spark)
    assert len(first) >= 5 and all(r.source_offsets for r in first)
    assert sum(r.metrics.rows_read for r in first) == 45

    shutil.rmtree(tmp_path / "checkpoint")
    changes.send(spark, kafka, name, 30)
    resumed = pipeline(tmp_path, kafka, name, max_records_per_batch=13, starting_offsets="latest")
    second = lakemerge.stream(resumed, spark=spark)
    assert second and second[0].source_batch is not None and first[-1].source_batch is not None
    assert second[0].source_batch < first[-1].source_batch, "a new checkpoint numbers micro-batches from 0 again"
    assert sum(r.metrics.rows_read for r in second) == 30, "the records sent while it was away, once"
    assert read_table(tmp_path / "orders", list(COLUMNS)) == changes.expected()
    assert_each_offset_applied_once(tmp_path / "orders", sent_counts(name, (p for p, _, _ in changes.sent)))

    shutil.rmtree(tmp_path / "checkpoint")
    assert lakemerge.stream(resumed, spark=spark) == [], "nothing new: nothing applied"


def test_a_stream_run_from_an_older_checkpoint_applies_only_the_records_its_table_lacks(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    """A checkpoint put back from a copy (a restore, say) replays micro-batches whose records the
    table holds, whole or in part (another ``max_records_per_batch`` cuts them elsewhere): only
    the records above the offsets the table applied are applied; the others are applied before."""
    name = topic()
    changes = Changes(5)
    changes.send(spark, kafka, name, 30)
    lakemerge.stream(pipeline(tmp_path, kafka, name, max_records_per_batch=10), spark=spark)
    shutil.copytree(tmp_path / "checkpoint", tmp_path / "copy")
    changes.send(spark, kafka, name, 31)
    lakemerge.stream(pipeline(tmp_path, kafka, name, max_records_per_batch=10), spark=spark)

    shutil.rmtree(tmp_path / "checkpoint")
    shutil.copytree(tmp_path / "copy", tmp_path / "checkpoint")
    changes.send(spark, kafka, name, 8)
    replayed = lakemerge.stream(pipeline(tmp_path, kafka, name, max_records_per_batch=7), spark=spark)
    assert any(r.applied_before for r in replayed), "micro-batches whose records were all applied commit nothing"
    committed = [r for r in replayed if r.version is not None]
    assert sum(r.metrics.rows_read for r in committed) == 8, "the 8 new records, none of the 31 applied"
    assert read_table(tmp_path / "orders", list(COLUMNS)) == changes.expected()
    assert_each_offset_applied_once(tmp_path / "orders", sent_counts(name, (p for p, _, _ in changes.sent)))


def test_a_groups_stream_resumes_where_its_point_says_after_its_checkpoint_is_lost(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    """The group's point records the offsets its transactions applied: a query with a new
    checkpoint goes on from there, its transactions numbered on from the last point."""
    orders, lines = topic(), topic()
    per_table = {"orders": Changes(1), "lines": Changes(2)}

    def config(**stream: Any) -> lakemerge.PipelineConfig:
        tables = {
            name: {
                "path": str(tmp_path / name),
                "key": "id",
                "sequence": "seq",
                "stream": table_stream(tmp_path, kafka, t, checkpoint=str(tmp_path / f"unused-{name}"), **stream),
            }
            for name, t in (("orders", orders), ("lines", lines))
        }
        group = {"tables": ["orders", "lines"], "state": str(tmp_path / "sales")}
        group["stream"] = {"checkpoint": str(tmp_path / "checkpoint"), "max_records_per_batch": 15}
        return lakemerge.PipelineConfig.model_validate({"tables": tables, "groups": {"sales": group}})

    per_table["orders"].send(spark, kafka, orders, 20)
    per_table["lines"].send(spark, kafka, lines, 12)
    lakemerge.stream(config(), spark=spark)
    before = lakemerge.snapshot(config(), "sales", spark=spark)
    assert before is not None and before.transaction is not None and before.transaction >= 2

    shutil.rmtree(tmp_path / "checkpoint")
    per_table["orders"].send(spark, kafka, orders, 9)
    per_table["lines"].send(spark, kafka, lines, 7)
    results = lakemerge.stream(config(starting_offsets="latest"), spark=spark)
    assert sum(r.metrics.rows_read for r in results if r.version is not None) == 16
    numbers = sorted({r.source_batch for r in results if r.source_batch is not None})
    assert numbers == list(range(before.transaction + 1, before.transaction + 1 + len(numbers))), "numbered on"
    point = lakemerge.snapshot(config(), "sales", spark=spark)
    assert point is not None and point.transaction == numbers[-1]
    for name, t in (("orders", orders), ("lines", lines)):
        assert read_table(tmp_path / name, list(COLUMNS)) == per_table[name].expected()
        sent = sent_counts(t, (p for p, _, _ in per_table[name].sent))
        assert_each_offset_applied_once(tmp_path / name, sent)
    shutil.rmtree(tmp_path / "checkpoint")
    assert lakemerge.stream(config(), spark=spark) == [], "every record was applied"


def test_a_groups_transaction_whose_point_was_not_recorded_is_completed_once(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    """Its tables committed, then the process died before the point (here: the point removed) and
    the checkpoint was lost: the query starts from the point before, every table finds its records
    applied (by their offsets), and the transaction's point is recorded, under the same id."""
    orders, lines = topic(), topic()
    per_table = {"orders": Changes(3), "lines": Changes(4)}
    tables = {
        name: {
            "path": str(tmp_path / name),
            "key": "id",
            "sequence": "seq",
            "stream": table_stream(tmp_path, kafka, t, checkpoint=str(tmp_path / f"unused-{name}")),
        }
        for name, t in (("orders", orders), ("lines", lines))
    }
    group = {"tables": ["orders", "lines"], "state": str(tmp_path / "sales")}
    group["stream"] = {"checkpoint": str(tmp_path / "checkpoint")}
    config = lakemerge.PipelineConfig.model_validate({"tables": tables, "groups": {"sales": group}})
    per_table["orders"].send(spark, kafka, orders, 10)
    per_table["lines"].send(spark, kafka, lines, 6)
    lakemerge.stream(config, spark=spark)
    per_table["orders"].send(spark, kafka, orders, 5)
    per_table["lines"].send(spark, kafka, lines, 4)
    second = lakemerge.stream(config, spark=spark)
    assert {r.source_batch for r in second} == {2}
    spark.sql(f"DELETE FROM delta.`{tmp_path / 'sales'}` WHERE transaction = 2")
    shutil.rmtree(tmp_path / "checkpoint")

    again = lakemerge.stream(config, spark=spark)
    assert again and all(r.applied_before and r.version is None for r in again), "nothing applied twice"
    point = lakemerge.snapshot(config, "sales", spark=spark)
    assert point is not None and point.transaction == 2
    assert point.versions == {"orders": 1, "lines": 1}
    for name, t in (("orders", orders), ("lines", lines)):
        assert read_table(tmp_path / name, list(COLUMNS)) == per_table[name].expected()
        assert_each_offset_applied_once(tmp_path / name, sent_counts(t, (p for p, _, _ in per_table[name].sent)))
