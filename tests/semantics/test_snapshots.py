"""Full-snapshot feeds (docs/semantics.md §5, docs/history.md), Gobblin's cases: keys a snapshot
lacks are deleted as of the snapshot, unchanged rows are not rewritten, a delta record wins over the
snapshot only when newer, partitioned snapshots delete within their partitions, snapshots apply in
order. Tables are read back with delta-rs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import deltalake
import pytest

import lakemerge
from tests.helpers import write_lines


def snap_table(root: Path, *, scope: str = "table", order: str = "name_number", **extra: Any) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name="t",
        path=str(root / "t"),
        key="id",
        sequence="ts",
        partition_by=("region",) if scope == "partitions" else (),
        feeds=[
            {
                "location": str(root / "snap"),
                "format": "csv",
                "header": True,
                "schema": "id INT, ts BIGINT, region STRING, v STRING, taken BIGINT",
                "snapshot": True,
                "snapshot_scope": scope,
                "snapshot_order": order,
                **({"snapshot_column": "taken"} if order == "column" else {}),
            },
            {
                "location": str(root / "delta"),
                "format": "csv",
                "header": True,
                "schema": "id INT, ts BIGINT, region STRING, v STRING, taken BIGINT, op STRING",
                "op_column": "op",
                "upsert_codes": ["U"],
                "delete_codes": ["D"],
            },
        ],
        **extra,
    )


def snap(root: Path, name: str, rows: list[tuple[Any, ...]]) -> None:
    write_lines(root / "snap" / name, ["id,ts,region,v,taken", *[",".join(map(str, r)) + ",0" for r in rows]])


def delta_file(root: Path, name: str, rows: list[tuple[Any, ...]]) -> None:
    write_lines(root / "delta" / name, ["id,ts,region,v,taken,op", *[",".join(map(str, r)) for r in rows]])


def rows(path: str) -> list[tuple[Any, ...]]:
    found = deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted((r["id"], r["ts"], r["region"], r["v"]) for r in found)


def last_operation(path: str) -> dict[str, Any]:
    return dict(deltalake.DeltaTable(path).history(1)[0])


def test_snapshots_delete_absent_keys_and_overlap_with_a_delta_feed(spark: object, tmp_path: Path) -> None:
    config = snap_table(tmp_path)
    (tmp_path / "delta").mkdir()
    snap(tmp_path, "snapshot_100.csv", [(1, 10, "e", "a"), (2, 10, "e", "b"), (3, 10, "e", "c")])
    first = lakemerge.apply_table(config, spark=spark)
    assert first.metrics.inserted == 3

    # Snapshot 200 is taken at ts 20: it lacks key 3, repeats key 1 unchanged, changes key 2, adds
    # key 4. The delta feed has key 3 at ts 25 (newer than the snapshot: it wins) and key 1 at ts 5
    # (older than the snapshot's row: it loses).
    snap(tmp_path, "snapshot_200.csv", [(1, 10, "e", "a"), (2, 20, "e", "b2"), (4, 15, "e", "d")])
    delta_file(tmp_path, "d_1.csv", [(3, 25, "e", "c-late", 0, "U"), (1, 5, "e", "stale", 0, "U")])
    second = lakemerge.apply_table(config, spark=spark)
    m = second.metrics
    assert (m.rows_read, m.snapshot_absent, m.changes, m.superseded) == (5, 1, 4, 2)
    assert (m.unchanged, m.updated, m.inserted, m.deleted, m.late) == (1, 2, 1, 0, 0)
    assert rows(config.path) == [(1, 10, "e", "a"), (2, 20, "e", "b2"), (3, 25, "e", "c-late"), (4, 15, "e", "d")]
    merged = last_operation(config.path)["operationMetrics"]
    assert int(merged["numTargetRowsUpdated"]) == 2, "the unchanged row is not part of the MERGE"

    # Snapshot 300, taken at ts 40, holds key 1 only: keys 2, 3 and 4 go, but key 4 changed at ts 45
    # in the delta feed, after the snapshot: it stays.
    snap(tmp_path, "snapshot_300.csv", [(1, 40, "e", "a1")])
    delta_file(tmp_path, "d_2.csv", [(4, 45, "e", "d-late", 0, "U")])
    third = lakemerge.apply_table(config, spark=spark)
    m = third.metrics
    assert (m.snapshot_absent, m.deleted, m.updated, m.superseded, m.tombstones_written) == (3, 2, 2, 1, 2)
    assert rows(config.path) == [(1, 40, "e", "a1"), (4, 45, "e", "d-late")]

    # A delete of key 1 older than the snapshot arrives late: the snapshot's row is newer, it stays.
    delta_file(tmp_path, "d_3.csv", [(1, 30, "e", "", 0, "D")])
    assert lakemerge.apply_table(config, spark=spark).metrics.late == 1

    # An older snapshot is an error naming the file and both positions; nothing is committed.
    version = deltalake.DeltaTable(config.path).version()
    snap(tmp_path, "snapshot_250.csv", [(9, 50, "e", "x")])
    with pytest.raises(lakemerge.InputError) as caught:
        lakemerge.apply_table(config, spark=spark)
    assert "snapshot_250.csv" in str(caught.value) and "250" in str(caught.value) and "300" in str(caught.value)
    assert deltalake.DeltaTable(config.path).version() == version


def test_an_identical_snapshot_rewrites_nothing(spark: object, tmp_path: Path) -> None:
    config = snap_table(tmp_path)
    (tmp_path / "delta").mkdir()
    content = [(1, 10, "e", "a"), (2, 11, "w", "b")]
    snap(tmp_path, "s_1.csv", content)
    snap(tmp_path, "s_2.csv", content)
    results = lakemerge.run(lakemerge.PipelineConfig(tables={"t": config}), spark=spark)
    assert [r.metrics.inserted for r in results] == [2, 0], "one snapshot per batch, oldest first"
    assert results[1].metrics.unchanged == 2 and results[1].files_added == 0
    assert last_operation(config.path)["operation"] != "MERGE", "a metadata-only commit records the batch"
    assert rows(config.path) == [(1, 10, "e", "a"), (2, 11, "w", "b")]


def test_partitioned_snapshots_delete_within_their_partitions(spark: object, tmp_path: Path) -> None:
    config = snap_table(tmp_path, scope="partitions")
    (tmp_path / "delta").mkdir()
    snap(tmp_path, "s_1.csv", [(1, 1, "east", "e1"), (2, 1, "east", "e2"), (3, 1, "west", "w1")])
    lakemerge.apply_table(config, spark=spark)
    snap(tmp_path, "s_2.csv", [(1, 2, "east", "e1b")])  # covers east only: key 2 goes, west stays
    second = lakemerge.apply_table(config, spark=spark)
    assert (second.metrics.snapshot_absent, second.metrics.deleted) == (1, 1)
    assert rows(config.path) == [(1, 2, "east", "e1b"), (3, 1, "west", "w1")]
    snap(tmp_path, "s_3.csv", [(4, 3, "west", "w2")])  # west's next snapshot: key 3 goes, east stays
    lakemerge.apply_table(config, spark=spark)
    assert rows(config.path) == [(1, 2, "east", "e1b"), (4, 3, "west", "w2")]
    snap(tmp_path, "s_0.csv", [(5, 9, "east", "old")])  # older than east's last snapshot
    with pytest.raises(lakemerge.InputError, match="partition"):
        lakemerge.apply_table(config, spark=spark)


def test_snapshots_ordered_by_a_column_or_by_mtime(spark: object, tmp_path: Path) -> None:
    for order in ("column", "mtime"):
        root = tmp_path / order
        config = snap_table(root, order=order)
        (root / "delta").mkdir(parents=True)
        # b.csv is older by the column (taken = 1) and by modification time; a.csv is newer.
        write_lines(root / "snap" / "b.csv", ["id,ts,region,v,taken", "1,1,e,old,1", "2,1,e,old,1"])
        write_lines(root / "snap" / "a.csv", ["id,ts,region,v,taken", "1,2,e,new,2"])
        os.utime(root / "snap" / "b.csv", (1_000_000, 1_000_000))
        results = lakemerge.run(lakemerge.PipelineConfig(tables={"t": config}), spark=spark)
        assert [r.files[0].path.rsplit("/", 1)[1] for r in results] == ["b.csv", "a.csv"], order
        assert rows(config.path) == [(1, 2, "e", "new")], order


def test_snapshot_closes_scd2_history(spark: object, tmp_path: Path) -> None:
    config = snap_table(tmp_path, history="scd2")
    (tmp_path / "delta").mkdir()
    snap(tmp_path, "s_1.csv", [(1, 10, "e", "a"), (2, 10, "e", "b")])
    snap(tmp_path, "s_2.csv", [(1, 10, "e", "a"), (3, 20, "e", "c")])
    results = lakemerge.run(lakemerge.PipelineConfig(tables={"t": config}), spark=spark)
    assert [(r.metrics.inserted, r.metrics.unchanged, r.metrics.deleted) for r in results] == [(2, 0, 0), (1, 1, 1)]
    found = deltalake.DeltaTable(config.path).to_pyarrow_table().to_pylist()
    history = sorted((r["id"], r["__start_at"], r["__end_at"], r["__current"]) for r in found)
    assert history == [(1, 10, None, True), (2, 10, 20, False), (3, 20, None, True)]


def test_snapshot_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="snapshot_column"):
        lakemerge.FeedConfig(location=(str(tmp_path),), format="csv", snapshot=True, snapshot_order="column")
    feed = {"location": str(tmp_path), "format": "csv", "snapshot": True, "snapshot_scope": "partitions"}
    with pytest.raises(ValueError, match="partitioned"):
        lakemerge.TableConfig(name="t", path=str(tmp_path / "t"), key="id", sequence="ts", feed=feed)
    with pytest.raises(ValueError, match="at most one"):
        lakemerge.TableConfig(
            name="t", path=str(tmp_path / "t"), key="id", sequence="ts", partition_by="p", feeds=[feed, feed]
        )


def test_an_empty_snapshot_is_an_error(spark: object, tmp_path: Path) -> None:
    config = snap_table(tmp_path)
    (tmp_path / "delta").mkdir()
    snap(tmp_path, "s_1.csv", [])
    with pytest.raises(lakemerge.InputError, match=r"s_1\.csv.*no valid row|no valid row.*s_1\.csv"):
        lakemerge.apply_table(config, spark=spark)
    assert not (tmp_path / "t").exists()
