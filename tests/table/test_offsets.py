"""What a stream's commits say it applied: per partition everything below the greatest end
recorded; a micro-batch's new records are those at or above it; a query without a checkpoint
resumes there, a partition with nothing applied at its earliest offset."""

from __future__ import annotations

import json
from typing import Any

from lakemerge.table import ledger
from lakemerge.table.offsets import as_record, from_record, starting_offsets, unapplied
from lakemerge.table.walk import Walk


def test_a_batch_whose_offsets_overlap_the_applied_ones_keeps_only_the_records_above_them() -> None:
    ranges = {("t", 0): (10, 20), ("t", 1): (5, 9), ("t", 2): (0, 4), ("u", 0): (7, 8)}
    applied = {("t", 0): 14, ("t", 1): 9, ("t", 2): 0, ("u", 0): 100}
    assert unapplied(ranges, applied) == {("t", 0): (14, 20), ("t", 2): (0, 4)}
    assert unapplied(ranges, {}) == ranges
    assert unapplied({("t", 0): (10, 20)}, {("t", 0): 20}) == {}, "every record applied"
    assert from_record(as_record(ranges)) == ranges
    assert as_record(ranges)["t"] == {"0": [10, 20], "1": [5, 9], "2": [0, 4]}


def test_a_query_without_a_checkpoint_starts_each_partition_at_its_applied_end() -> None:
    found = json.loads(starting_offsets([("t", 0), ("t", 1), ("u", 0)], {("t", 0): 14, ("gone", 3): 9}))
    assert found == {"t": {"0": 14, "1": -2}, "u": {"0": -2}}, "unknown partitions from the earliest"


def _row(version: int, record: dict[str, Any]) -> dict[str, Any]:
    return {"version": version, "userMetadata": ledger.record_metadata(record)}


def test_the_newest_commit_alone_says_where_the_source_is() -> None:
    """Each commit records the ends of every partition applied so far: a history whose older
    commits were cleaned up still knows a partition the newest commit read nothing of."""
    older = {"batch_id": "a", "source": {"name": "s", "batch": 0, "offsets": {"t": {"1": [0, 40]}}}}
    newest = {
        "batch_id": "b",
        "source": {"name": "s", "batch": 1, "offsets": {"t": {"0": [0, 5]}}, "ends": {"t": {"0": 5, "1": 40}}},
    }
    whole = Walk(table_id="x")
    for version, record in enumerate((older, newest)):
        whole.add(_row(version, record))
    cleaned = Walk(table_id="x")
    cleaned.add(_row(1, newest))
    assert whole.ledger().offsets == cleaned.ledger().offsets == {"s": {("t", 0): 5, ("t", 1): 40}}


def test_a_rollback_that_reapplies_makes_the_offsets_it_undoes_unapplied() -> None:
    def batch(version: int, first: int, end: int) -> dict[str, Any]:
        offsets = {"t": {"0": [first, end]}}
        return _row(version, {"batch_id": f"b{version}", "source": {"name": "s", "batch": version, "offsets": offsets}})

    def rollback(version: int, reapply: bool) -> dict[str, Any]:
        return _row(version, {"rollback": {"from_version": version - 1, "to_version": 0, "reapply": reapply}})

    for reapply, expected in ((True, 10), (False, 25)):
        walk = Walk(table_id="x")
        for row in (batch(0, 0, 10), batch(1, 10, 25), rollback(2, reapply)):
            walk.add(row)
        assert walk.ledger().offsets == {"s": {("t", 0): expected}}
