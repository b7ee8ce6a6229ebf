"""Persisted frames planned as a leaf (lakemerge.spark.cache): what a batch builds on its cached
records reads the cache without carrying, analysing and matching the records' whole plan again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakemerge.batch.plan import plan_batch
from lakemerge.batch.select import NothingPending
from lakemerge.spark.cache import persisted
from tests.helpers import csv_table, write_lines


def _logical(frame: Any) -> str:
    return str(frame._jdf.queryExecution().logical().getClass().getSimpleName())


def _cached(spark: Any) -> int:
    """How many RDDs the session keeps persisted (a cached frame's, once a query computed it)."""
    return int(spark.sparkContext._jsc.getPersistentRDDs().size())


def test_the_frame_to_build_on_reads_the_cache_as_a_leaf(spark: Any) -> None:
    source = spark.range(0, 40).selectExpr("id", "id % 7 AS k", "concat('v', id) AS v").filter("k != 3")
    kept, leaf = persisted(source)
    try:
        assert kept.is_cached
        assert _logical(leaf) == "InMemoryRelation"
        assert _logical(kept) != "InMemoryRelation"
        assert leaf.schema == source.schema
        built = leaf.filter("k = 1").join(leaf.select("id", "v"), "id")  # a self-join, as a batch's joins are
        assert sorted(r.id for r in built.collect()) == [i for i in range(40) if i % 7 == 1]
        assert "InMemoryTableScan" in built._jdf.queryExecution().executedPlan().toString()
    finally:
        kept.unpersist()
    assert not kept.is_cached


def test_a_batch_builds_on_its_cached_records_and_releases_them(spark: Any, tmp_path: Path) -> None:
    table = csv_table(tmp_path)
    write_lines(tmp_path / "in" / "f1.csv", ["k,seq,op,v", "1,1,I,a", "2,1,I,b", "1,2,U,c"])
    before = _cached(spark)
    plan = plan_batch(table, spark=spark)
    assert not isinstance(plan, NothingPending)
    try:
        assert _logical(plan.classified) == "InMemoryRelation"
        assert _cached(spark) > before
        assert (plan.metrics.inserted, plan.metrics.rows_read) == (2, 3)
    finally:
        plan.release()
    assert _cached(spark) == before
