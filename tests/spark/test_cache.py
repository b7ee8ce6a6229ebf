"""Persisted frames planned as a leaf (lakemerge.spark.cache): what a batch builds on its cached
records reads the cache without carrying, analysing and matching the records' whole plan again;
a frame can be cached without Spark's column compression, as a batch caches its classification."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakemerge.batch.plan import plan_batch
from lakemerge.batch.select import NothingPending
from lakemerge.spark.cache import COMPRESSED, persisted
from lakemerge.spark.scoped import scoped_conf
from tests.helpers import csv_table, write_lines


def _logical(frame: Any) -> str:
    return str(frame._jdf.queryExecution().logical().getClass().getSimpleName())


def _cached(spark: Any) -> set[int]:
    """The ids of the RDDs the session keeps persisted (a cached frame's, once a query computed it)."""
    return {int(i) for i in spark.sparkContext._jsc.getPersistentRDDs().keySet()}


def test_the_frame_to_build_on_reads_the_cache_as_a_leaf(spark: Any) -> None:
    """On Spark 4.1 the frame to build on is the cache's own relation; on 4.2, whose analyser cannot
    compare two instances of that relation (a self-join failed), the persisted frame itself."""
    source = spark.range(0, 40).selectExpr("id", "id % 7 AS k", "concat('v', id) AS v").filter("k != 3")
    kept, leaf = persisted(source)
    try:
        assert kept.is_cached
        if spark.version.startswith("4.1."):
            assert _logical(leaf) == "InMemoryRelation"
            assert _logical(kept) != "InMemoryRelation"
        else:
            assert leaf is kept
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
        assert _logical(plan.classified) == "InMemoryRelation" or (
            not spark.version.startswith("4.1.") and plan.classified.is_cached
        )
        assert _cached(spark) - before
        assert (plan.metrics.inserted, plan.metrics.rows_read) == (2, 3)
    finally:
        plan.release()
    # (what earlier tests left, a log table kept between batches, may be released meanwhile)
    assert not _cached(spark) - before, "the batch's own cached records are released"


def _compressed(frame: Any) -> bool:
    """Whether the cached data of ``frame`` (persisted, or read from the cache) has its columns compressed."""
    relation = frame._jdf.queryExecution().logical()
    if _logical(frame) != "InMemoryRelation":
        found = frame.sparkSession._jsparkSession.sharedState().cacheManager().lookupCachedData(frame._jdf)
        relation = found.get().cachedRepresentation()
    return bool(relation.cacheBuilder().cachedPlan().conf().useCompression())


def _stored_bytes(spark: Any) -> int:
    """The bytes the session's cached data take, in memory and on disk."""
    infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
    return sum(int(i.memSize()) + int(i.diskSize()) for i in infos)


def _cached_as(spark: Any, frame: Any, *, compressed: bool) -> tuple[bool, int]:
    """Whether ``frame``, persisted with ``compressed``, has its columns compressed, and the bytes it
    takes once computed."""
    before = _stored_bytes(spark)
    kept, leaf = persisted(frame, compressed=compressed)
    try:
        assert leaf.count() == 20_000
        return _compressed(leaf), _stored_bytes(spark) - before
    finally:
        kept.unpersist(blocking=True)


def test_a_frame_can_be_cached_without_column_compression(spark: Any) -> None:
    frame = spark.range(0, 20_000, numPartitions=2).selectExpr("id", "repeat('x', 300) AS v")
    assert spark.conf.get(COMPRESSED, "true") == "true"
    plain, plain_bytes = _cached_as(spark, frame, compressed=False)
    packed, packed_bytes = _cached_as(spark, frame, compressed=True)
    assert (plain, packed) == (False, True)
    # (one value 20,000 times: a few bytes run-length encoded, far more when each row is stored)
    assert plain_bytes > 10 * packed_bytes
    assert spark.conf.get(COMPRESSED, "true") == "true"  # the session's setting is left as it was


def test_a_session_that_turned_column_compression_off_keeps_it_off(spark: Any) -> None:
    frame = spark.range(0, 20_000, numPartitions=2).selectExpr("id", "repeat('x', 300) AS v")
    with scoped_conf(spark, {COMPRESSED: "false"}):
        assert _cached_as(spark, frame, compressed=True)[0] is False


def test_a_batch_caches_its_classification_without_column_compression(spark: Any, tmp_path: Path) -> None:
    table = csv_table(tmp_path)
    write_lines(tmp_path / "in" / "f1.csv", ["k,seq,op,v", "1,1,I,a", "2,1,I,b"])
    plan = plan_batch(table, spark=spark)
    assert not isinstance(plan, NothingPending)
    try:
        assert plan.metrics.inserted == 2
        assert not _compressed(plan.classified)
        records = [f for f in plan.cached.frames if "_lm_outcome" not in f.columns]
        assert records and all(_compressed(f) for f in records)  # a text feed's records: as Spark's setting says
    finally:
        plan.release()
