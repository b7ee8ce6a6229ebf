"""A table's snapshots while a batch is planned (lakemerge.table.snapshots.one_snapshot_each): each
table's Delta log is brought up to date once, and the batch sees that one version throughout."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.batch.plan import plan_batch
from lakemerge.batch.select import NothingPending
from lakemerge.table import jvm_snapshot, snapshots
from tests.helpers import csv_table, write_lines


def _append(spark: Any, path: str, ids: range) -> None:
    spark.range(ids.start, ids.stop).write.format("delta").mode("append").save(path)


def test_within_the_block_a_table_keeps_the_version_first_seen(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _append(spark, path, range(0, 3))
    with snapshots.one_snapshot_each():
        first = snapshots.latest_snapshot(spark, path)
        _append(spark, path, range(3, 6))  # another writer commits meanwhile
        assert snapshots.latest_snapshot(spark, path).version == first.version == 0
        assert snapshots.is_delta(spark, path)
    assert snapshots.latest_snapshot(spark, path).version == 1  # outside it, the latest again


def test_a_table_missing_within_the_block_is_looked_for_again(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "later")
    with snapshots.one_snapshot_each():
        assert snapshots.latest_snapshot(spark, path).version == -1
        assert not snapshots.is_delta(spark, path)
        _append(spark, path, range(0, 2))
        assert snapshots.is_delta(spark, path)
        assert snapshots.latest_snapshot(spark, path).version == 0


@pytest.mark.classic
@pytest.mark.parametrize("mode", ["copy_on_write", "log"])
def test_planning_a_batch_updates_each_table_once(
    spark: Any, tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = csv_table(tmp_path, mode)
    write_lines(tmp_path / "in" / "f1.csv", ["k,seq,op,v", "1,1,I,a", "2,1,I,b"])
    assert lakemerge.apply_table(table, spark=spark).version is not None
    write_lines(tmp_path / "in" / "f2.csv", ["k,seq,op,v", "1,2,U,c", "3,1,I,d"])
    updates: Counter[str] = Counter()
    real = jvm_snapshot.jclass

    class Counted:
        def __init__(self, log: Any) -> None:
            self.log = log

        def forTable(self, session: Any, path: str) -> Any:
            updates[path] += 1
            return self.log.forTable(session, path)

    def jclass(spark: Any, name: str) -> Any:
        found = real(spark, name)
        return Counted(found) if name == jvm_snapshot.DELTA_LOG else found

    monkeypatch.setattr(jvm_snapshot, "jclass", jclass)
    plan = plan_batch(table, spark=spark)
    assert not isinstance(plan, NothingPending)
    try:
        assert plan.metrics.rows_read == 2
    finally:
        plan.release()
    assert updates and max(updates.values()) == 1, updates
