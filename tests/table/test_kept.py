"""A ``log`` table's table kept in memory between the batches of one process
(lakemerge.table.kept): kept from the second batch that reads a version, read from memory while
that version is the latest, and read anew once a compaction (or any writer) makes a newer one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.operations.compact import compact
from lakemerge.table import kept, snapshots, stats
from tests.helpers import csv_table, read_log_view, write_lines
from tests.oracle import apply_batch, state_rows

COLUMNS = ("k", "seq", "v")


@pytest.fixture(autouse=True)
def _nothing_kept_before_or_after() -> Iterator[None]:
    kept.release_all()
    yield
    kept.release_all()


def _read(spark: Any, path: str) -> Any:
    return stats.read_listed(spark, path).select("id")


def _persisted_plan(frame: Any) -> str:
    """The plan Spark runs for ``frame`` once its cached data is substituted (a kept table reads the cache)."""
    return str(frame._jdf.queryExecution().withCachedData().toString())


def test_a_version_is_kept_from_its_second_read_until_a_newer_one(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark.range(0, 10).write.format("delta").save(path)
    sides = []
    for _ in range(3):
        with snapshots.one_snapshot_each():
            sides.append(kept.table_side(spark, path, _read(spark, path)))
    first, second, third = sides
    assert "InMemoryRelation" not in _persisted_plan(first)  # one read: nothing kept yet
    assert "InMemoryRelation" in _persisted_plan(second)
    assert third is second
    assert sorted(r.id for r in third.collect()) == list(range(10))
    held = kept._kept[path].persisted
    assert held is not None and held.storageLevel.useMemory

    spark.range(10, 12).write.format("delta").mode("append").save(path)  # another writer
    with snapshots.one_snapshot_each():
        newer = kept.table_side(spark, path, _read(spark, path))
    assert "InMemoryRelation" not in _persisted_plan(newer)
    assert sorted(r.id for r in newer.collect()) == list(range(12))
    assert not held.storageLevel.useMemory  # the older version was released
    with snapshots.one_snapshot_each():
        again = kept.table_side(spark, path, _read(spark, path))
    assert "InMemoryRelation" in _persisted_plan(again)
    assert sorted(r.id for r in again.collect()) == list(range(12))


def test_at_most_a_few_tables_are_kept(spark: Any, tmp_path: Path) -> None:
    paths = [str(tmp_path / f"t{i}") for i in range(kept.MAX_KEPT_TABLES + 1)]
    for path in paths:
        spark.range(0, 3).write.format("delta").save(path)
        for _ in range(2):
            with snapshots.one_snapshot_each():
                kept.table_side(spark, path, _read(spark, path))
    assert list(kept._kept) == paths[1:]  # the least recently read left first


@pytest.mark.parametrize("limit", ["switched off", "too large"])
def test_a_table_is_not_kept_when_switched_off_or_too_large(
    spark: Any, tmp_path: Path, limit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "t")
    spark.range(0, 10).write.format("delta").save(path)
    if limit == "too large":
        monkeypatch.setattr(kept, "MAX_KEPT_BYTES", 10 * 8 - 1)
    else:
        spark.conf.set(kept.ENABLED_CONF, "false")
    try:
        for _ in range(3):
            with snapshots.one_snapshot_each():
                side = kept.table_side(spark, path, _read(spark, path))
            assert "InMemoryRelation" not in _persisted_plan(side)
    finally:
        spark.conf.unset(kept.ENABLED_CONF)
    assert path not in kept._kept or kept._kept[path].leaf is None


def _rows(lines: list[str]) -> list[dict[str, Any]]:
    found = []
    for line in lines:
        k, seq, op, v = line.split(",")
        found.append({"k": int(k), "seq": int(seq), "op": op, "v": v})
    return found


def test_log_batches_classify_against_the_kept_table_and_each_compacted_version(spark: Any, tmp_path: Path) -> None:
    """Batches between compactions classify against the kept table; after a compaction (the log
    folded into a new table version and emptied) a late change is still late: a batch planned
    against the older, kept version would find the key's older row and apply it."""
    table = csv_table(tmp_path, "log")
    state: dict[Any, Any] = {}
    graves: dict[Any, Any] = {}
    batches = [
        [f"{k},1,I,v{k}" for k in range(1, 41)],
        ["1,2,U,a", "2,2,U,b", "3,2,D,"],
        ["1,3,U,c", "4,3,U,d", "3,1,I,late"],  # key 3 was deleted at 2: late
        ["5,4,U,e", "1,2,U,late", "41,4,I,new"],  # key 1 is at 3: late
        ["1,2,U,late", "4,5,U,f", "42,5,I,g"],  # after the second compaction: key 1 still at 3
    ]
    for number, lines in enumerate(batches, start=1):
        if number in (2, 5):
            compact(table, spark=spark)
        write_lines(tmp_path / "in" / f"f{number:02d}.csv", ["k,seq,op,v", *lines])
        result = lakemerge.apply_table(table, spark=spark)
        state, counts = apply_batch(state, [(f"f{number:02d}.csv", _rows(lines))], key=("k",), tombstones=graves)
        metrics = result.metrics
        assert (metrics.inserted, metrics.updated, metrics.deleted, metrics.late) == (
            counts["inserted"],
            counts["updated"],
            counts["deleted"],
            counts["late"],
        ), number
        assert read_log_view(table.path, table.log_table, "k", COLUMNS) == state_rows(state, COLUMNS), number
        if number == 4:  # the third batch since the compaction: the table was kept by the second
            held = kept._kept[table.path]
            assert held.leaf is not None and held.version[1] == snapshots.latest_snapshot(spark, table.path).version
    held = kept._kept[table.path]
    assert held.version[1] == snapshots.latest_snapshot(spark, table.path).version
    assert held.leaf is None  # one batch since the second compaction: that version is not kept yet
