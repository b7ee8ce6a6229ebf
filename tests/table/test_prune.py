"""Key-range pruning (apply/prune.py): the ranges cover every key of a batch, results equal the
oracle's, and files outside the ranges are never read (they are deleted from disk before the batch:
reading one would fail)."""

from __future__ import annotations

import itertools
import os
import random
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakemerge
from lakemerge.batch import attempts as batch_module
from lakemerge.batch import plan as plan_module
from lakemerge.spark import tuning
from lakemerge.spark.scoped import scoped_conf
from lakemerge.table import prune as prune_module
from lakemerge.table import stats as stats_module
from lakemerge.table import store as store_module
from lakemerge.table.prune import KeyRanges, key_ranges, skipped_share
from lakemerge.table.stats import file_key_bounds
from tests.helpers import classes_compiled, jobs_of, read_log_view, read_table, write_lines
from tests.oracle import apply_batch, state_rows

COLUMNS = ("id", "seq", "v")


@pytest.fixture(autouse=True)
def _prune_small_tables(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """This module's tables are a few KB: pruning them is what it tests, so the size below which a
    table is read whole is lowered to nothing (but where a test says otherwise)."""
    if "small_tables_whole" not in request.keywords:
        monkeypatch.setattr(prune_module, "MIN_PRUNED_BYTES", 0)


def _table(tmp_path: Path, write_mode: str = "copy_on_write", key_type: str = "BIGINT") -> lakemerge.TableConfig:
    feed = lakemerge.FeedConfig(
        location=(str(tmp_path / "in"),),
        format="csv",
        header=True,
        schema=f"id {key_type}, seq BIGINT, op STRING, v STRING",
        op_column="op",
    )
    return lakemerge.TableConfig(
        name="t", path=str(tmp_path / "table"), key=("id",), sequence=("seq",), feed=feed, write_mode=write_mode
    )


def _clustered(
    spark: Any, table: lakemerge.TableConfig, keys: int, files: int
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """A table of ``keys`` rows in ``files`` files with disjoint key ranges; the oracle's state."""
    frame = spark.range(keys).selectExpr("id", "CAST(1 AS BIGINT) AS seq", "CAST(id AS STRING) AS v")
    frame.repartitionByRange(files, "id").sortWithinPartitions("id").write.format("delta").save(table.path)
    return {(i,): {"id": i, "seq": 1, "v": str(i)} for i in range(keys)}


def _apply(spark: Any, table: lakemerge.TableConfig, folder: Path, rows: list[dict[str, Any]]) -> Any:
    lines = ["id,seq,op,v", *[f"{r['id']},{r['seq']},{r['op']},{r['v'] or ''}" for r in rows]]
    write_lines(folder / "batch.csv", lines)
    return lakemerge.apply_table(table, inputs=[str(folder)], spark=spark)


def test_ranges_cut_the_widest_gaps_and_cover_every_key(spark: Any) -> None:
    frame = spark.createDataFrame([(k,) for k in (1, 2, 3, 100, 101, 1000, 3)], "id BIGINT")
    span = (0, 1200)  # the table's keys: a slice holds fewer than one of them
    assert key_ranges(frame, ("id",), limit=3, span=span).ranges == ((1, 3), (100, 101), (1000, 1000))  # type: ignore[union-attr]
    assert key_ranges(frame, ("id",), limit=1, span=span).ranges == ((1, 1000),)  # type: ignore[union-attr]
    # Gaps under a 64th of the span (999) are not cut, however many ranges are allowed.
    assert key_ranges(frame, ("id",), limit=20, span=span).ranges == ((1, 3), (100, 101), (1000, 1000))  # type: ignore[union-attr]
    assert key_ranges(frame, ("id",), limit=20, min_share=0, span=span).ranges == (  # type: ignore[union-attr]
        (1, 1),
        (2, 2),
        (3, 3),
        (100, 100),
        (101, 101),
        (1000, 1000),
    )
    # Keys outside the table's span have slices of their own below it and above it.
    assert key_ranges(frame, ("id",), limit=3, span=(10, 20)).ranges == ((1, 3), (100, 1000))  # type: ignore[union-attr]
    # Without a span (no statistics of the table's key), the batch's own, found by one job more.
    assert key_ranges(frame, ("id",), limit=3).ranges == ((1, 3), (100, 101), (1000, 1000))  # type: ignore[union-attr]
    # The query's own columns do not clash with the feed's, whatever they are called.
    odd = frame.selectExpr("id", "id AS slice", "id AS lo", "id AS hi", "id AS `_lm_kr_slices`")
    assert key_ranges(odd, ("id",), limit=3, span=span).ranges == ((1, 3), (100, 101), (1000, 1000))  # type: ignore[union-attr]
    names = spark.createDataFrame([("b",), ("a",), ("q",)], "id STRING")
    assert key_ranges(names, ("id",), span=("a", "z")).ranges == (("a", "q"),)  # type: ignore[union-attr]
    assert key_ranges(frame.selectExpr("id", "id AS j"), ("id", "j"), span=span) is None
    assert key_ranges(frame.filter("id < 0"), ("id",), span=span) is None


def test_keys_over_the_whole_range_of_their_type_do_not_overflow(spark: Any) -> None:
    """Hash keys span the 64-bit range: their span and gaps overflow a BIGINT (an error under ANSI
    mode, Spark's default), so they are measured as doubles; the ranges keep the keys exact."""
    low, high = -(2**63), 2**63 - 1
    hashes = spark.createDataFrame([(k,) for k in (low, low + 1, -5, 7, high - 1, high)], "id BIGINT")
    found = key_ranges(hashes, ("id",), limit=3, span=(low, high))
    assert found is not None and found.ranges == ((low, low + 1), (-5, 7), (high - 1, high))
    small = spark.createDataFrame([(k,) for k in (-(2**31), 0, 2**31 - 1)], "id INT")
    cut = key_ranges(small, ("id",), limit=2, min_share=0, span=(-(2**31), 2**31 - 1))
    assert cut is not None and cut.ranges == ((-(2**31), -(2**31)), (0, 2**31 - 1))  # the wider gap, by one


def test_keys_spread_evenly_get_one_range_and_a_few_keys_keep_their_gaps(spark: Any) -> None:
    """A gap narrower than a 64th of the batch's span skips no file on a table of up to 64 files
    over it and costs Delta's planning on every read: it is not cut. Wide gaps still are, and dates
    and timestamps measure them too."""
    rng = random.Random(7)
    spread = spark.createDataFrame([(k,) for k in rng.sample(range(6_000_000), 1500)], "id BIGINT")
    (only,) = key_ranges(spread, ("id",), span=(0, 6_000_000)).ranges  # type: ignore[union-attr]
    assert only == (min(r["id"] for r in spread.collect()), max(r["id"] for r in spread.collect()))
    few = spark.createDataFrame([(k,) for k in (10, 11, 500, 501, 900, 4000, 4001)], "id INT")
    assert key_ranges(few, ("id",), span=(0, 5000)).ranges == ((10, 11), (500, 501), (900, 900), (4000, 4001))  # type: ignore[union-attr]
    days = spark.createDataFrame([("2024-01-01",), ("2024-01-02",), ("2024-06-30",)], "d STRING").selectExpr(
        "CAST(d AS DATE) AS d", "CAST(d AS TIMESTAMP) AS t"
    )
    for column in ("d", "t"):  # (Delta keeps no exact statistics of timestamps: the batch's own span)
        found = key_ranges(days.select(column), (column,)).ranges  # type: ignore[union-attr]
        assert [(str(a)[:10], str(b)[:10]) for a, b in found] == [
            ("2024-01-01", "2024-01-02"),
            ("2024-06-30", "2024-06-30"),
        ]


def test_ranges_cover_every_key_of_slices_out_of_key_order() -> None:
    """A range runs from the smallest to the largest key of its slices, and overlapping ranges
    merge: a key is covered even where slices do not follow key order (a timestamp without time
    zone around a daylight-saving change, say)."""
    query = prune_module.RangeQuery(parts=(), column="id", limit=3, min_share=0)
    slices = [{"slice": 0, "lo": 5, "hi": 50}, {"slice": 1, "lo": 10, "hi": 20}, {"slice": 2, "lo": 100, "hi": 100}]
    found = query.ranges({prune_module.BOUNDS: {"_lm_kr_slices": slices}})
    assert found is not None and found.ranges == ((5, 50), (100, 100))
    assert query.ranges({prune_module.BOUNDS: {"_lm_kr_slices": None}}) is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keys=st.lists(st.one_of(st.none(), st.integers(-(2**40), 2**40)), min_size=1, max_size=60),
    span=st.tuples(st.integers(-(2**41), 2**41), st.integers(0, 2**42)),
    limit=st.integers(1, 8),
    min_share=st.sampled_from([0.0, 1 / 64, 0.5]),
)
def test_ranges_cover_every_key_in_at_most_limit_ordered_ranges(
    spark: Any, keys: list[int | None], span: tuple[int, int], limit: int, min_share: float
) -> None:
    """Whatever the table's span (keys below it, above it, a span of one key), every key lies in a
    range, the ranges are ordered and apart, and there are at most ``limit`` of them, each from a
    key to a key; null keys are in none, and a batch of none has no ranges."""
    frame = spark.createDataFrame([(k,) for k in keys], "id BIGINT")
    found = key_ranges(frame, ("id",), limit=limit, min_share=min_share, span=(span[0], span[0] + span[1]))
    present = [k for k in keys if k is not None]
    if not present:
        assert found is None
        return
    assert found is not None
    keys = present
    ranges = found.ranges
    assert 1 <= len(ranges) <= limit
    assert all(low <= high for low, high in ranges)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    assert all(any(low <= k <= high for low, high in ranges) for k in keys)
    assert {r for pair in ranges for r in pair} <= set(keys)


#: A ``log`` table whose checksum lists none of its files (one of many files): Delta's file
#: skipping chooses the files its batches read.
THROUGH_DELTA = "log, table read through Delta"


def _unlisted(monkeypatch: pytest.MonkeyPatch, table: lakemerge.TableConfig) -> None:
    """Make ``table``'s own files unlisted (see :data:`THROUGH_DELTA`); its log's stay listed."""
    listed = stats_module.read_listed
    monkeypatch.setattr(
        stats_module, "read_listed", lambda spark, path, **kw: None if path == table.path else listed(spark, path, **kw)
    )


@pytest.mark.internals
@pytest.mark.parametrize("mode", ["copy_on_write", "log", THROUGH_DELTA])
def test_files_outside_the_batch_key_ranges_are_never_read(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """In ``log`` mode the table's files are chosen by lakemerge from the list in Delta's checksum
    (no Spark job for Delta's file skipping); in copy-on-write mode, and for a ``log`` table whose
    checksum lists no files, Delta's file skipping chooses."""
    table = _table(tmp_path, "log" if mode.startswith("log") else mode)
    if mode == THROUGH_DELTA:
        _unlisted(monkeypatch, table)
    state = _clustered(spark, table, keys=400, files=8)
    batch = [
        {"id": 12, "seq": 2, "op": "U", "v": "x"},
        {"id": 13, "seq": 2, "op": "D", "v": None},
        {"id": 13, "seq": 0, "op": "U", "v": "late"},
        {"id": 397, "seq": 3, "op": "U", "v": "y"},
        {"id": 500, "seq": 1, "op": "U", "v": "new"},
    ]
    # Drop every data file that holds none of the batch's keys nor lies in a gap it spans: a read
    # of one of them fails, so the batch succeeds only if classification and MERGE skip them.
    actions = pa.table(deltalake.DeltaTable(table.path).get_add_actions(flatten=True)).to_pylist()
    assert len(actions) == 8
    spans = [(12, 13), (397, 397), (500, 500)]
    kept = 0
    for action in actions:
        low, high = action["min.id"], action["max.id"]
        if any(low <= b and a <= high for a, b in spans):
            kept += 1
            continue
        os.remove(os.path.join(table.path, action["path"]))
    assert kept == 2
    results: list[Any] = []
    ran = jobs_of(spark, lambda: results.append(_apply(spark, table, tmp_path / "b1", batch)))
    (result,) = results
    assert (result.metrics.updated, result.metrics.deleted, result.metrics.inserted, result.metrics.late) == (
        2,
        1,
        1,
        0,
    )
    assert result.files_removed <= 2
    if mode == "log":
        assert not [job for job in ran if "Filtering files" in job], ran
    expected, _ = apply_batch(state, [("batch.csv", batch)], key=("id",))
    wanted = [r for r in state_rows(expected, COLUMNS) if r["id"] < 50 or r["id"] >= 350]
    if table.log_mode:
        # (The table's files that hold none of the batch's keys are gone: its keys' rows are the log's.)
        ids = {b["id"] for b in batch}
        logged = deltalake.DeltaTable(table.log_table).to_pyarrow_table().to_pylist()
        assert {r["id"] for r in logged} == ids
        rows = sorted(({c: r[c] for c in COLUMNS} for r in logged if r["_lm_op"] == "U"), key=lambda r: r["id"])
        wanted = [r for r in wanted if r["id"] in ids]
    else:
        got = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(table.path))
        rows = pa.table(got.execute("SELECT id, seq, v FROM t WHERE id < 50 OR id >= 350 ORDER BY id")).to_pylist()
    assert rows == sorted(wanted, key=lambda r: r["id"])


@pytest.mark.internals
@pytest.mark.parametrize("mode", ["log", "copy_on_write", "deletion_vectors"])
def test_a_batch_pruned_by_its_key_ranges_reuses_the_code_of_the_batch_before(
    spark: Any, tmp_path: Path, mode: str
) -> None:
    """Neither a batch's key ranges nor its batch number (nor, with tombstones appended, when they
    were written) are written into the code Spark generates: a warm batch on other keys than the
    batch before compiles no new class (bench/RESULTS.md, "Generated code per batch": new code costs
    every batch its compile and its run cold in the JVM)."""
    table = _table(tmp_path, mode)
    _clustered(spark, table, keys=400, files=8)
    compiled = []
    deleted: set[int] = set()
    began = int(time.time() * 1000)
    for number, centre in enumerate((20, 120, 220, 320), start=1):
        batch = [{"id": centre + i, "seq": 5, "op": "UD"[i % 2], "v": f"b{number}"} for i in range(4)]
        batch.append({"id": 1000 + number, "seq": 5, "op": "U", "v": "new"})
        deleted |= {centre + i for i in range(4) if i % 2}
        folder = tmp_path / f"b{number}"
        compiled.append(classes_compiled(spark, lambda f=folder, b=batch: _apply(spark, table, f, b)))
    assert compiled[-1] == 0, compiled
    if table.log_mode:
        logged = deltalake.DeltaTable(table.log_table).to_pyarrow_table().to_pylist()
        assert {r["id"]: r["_lm_batch"] for r in logged if r["id"] >= 1000} == {1000 + n: n for n in range(1, 5)}
        return
    rows = {r["id"]: r["v"] for r in read_table(table.path)}
    assert {i for i in rows if i >= 1000} == {1001, 1002, 1003, 1004} and not deleted & set(rows)
    assert rows[20] == "b1" and rows[322] == "b4" and len(rows) == 400 - len(deleted) + 4
    tombstones = deltalake.DeltaTable(table.tombstone_table).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["_lm_batch"]) for r in tombstones) == sorted((i, 1 + i // 100) for i in deleted)
    assert all(began <= r["_lm_written_at"] <= time.time() * 1000 for r in tombstones), "when each was written"


@pytest.mark.parametrize("mode", ["copy_on_write", "log"])
def test_a_batch_keyed_unlike_the_table_is_refused_by_the_schema_check(spark: Any, tmp_path: Path, mode: str) -> None:
    """Key ranges are found before the batch's columns are checked against the table's: string keys
    against a table's numeric statistics prune nothing, and the schema check names the column."""
    _clustered(spark, _table(tmp_path, mode), keys=400, files=8)
    table = _table(tmp_path, mode, key_type="STRING")
    with pytest.raises(lakemerge.SchemaError, match="id"):
        _apply(spark, table, tmp_path / "b1", [{"id": "12", "seq": 2, "op": "U", "v": "x"}])
    assert deltalake.DeltaTable(table.path).version() == 0


def test_a_listed_read_within_key_ranges_leaves_out_only_the_files_they_miss(spark: Any, tmp_path: Path) -> None:
    """delta.read_listed(within=): the files of the checksum's list whose key statistics meet the
    ranges, and all of them where statistics cannot bound the key (a string, a partition column, no
    statistics kept); within the ranges, the rows Delta reads."""
    path = str(tmp_path / "t")
    spark.range(80).selectExpr("id", "CAST(id AS STRING) AS name", "id % 2 AS p").repartitionByRange(
        8, "id"
    ).write.format("delta").save(path)
    ranges = KeyRanges(column="id", ranges=((3, 12), (55, 55)))
    listed = stats_module.read_listed(spark, path, within=("id", ranges.overlaps))
    assert listed is not None
    bounds = file_key_bounds(spark, path, "id") or []
    assert len(bounds) == 8
    assert len(listed.inputFiles()) == sum(1 for low, high, _ in bounds if ranges.overlaps(low, high)) == 3

    def inside(frame: Any) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in frame.filter(ranges.predicate()).collect())

    assert inside(listed) == inside(store_module.read_pinned(spark, path)) and len(inside(listed)) == 11
    names = KeyRanges(column="name", ranges=(("3", "4"),))
    whole = stats_module.read_listed(spark, path, within=("name", names.overlaps))
    assert whole is not None and len(whole.inputFiles()) == 8, "string statistics are truncated: no file is left out"
    partitioned = str(tmp_path / "p")
    spark.range(10).selectExpr("id", "id % 2 AS p").write.format("delta").partitionBy("p").save(partitioned)
    by_partition = stats_module.read_listed(spark, partitioned, within=("p", KeyRanges("p", ((0, 0),)).overlaps))
    assert by_partition is not None and sorted(r.id for r in by_partition.collect()) == list(range(10))
    unindexed = str(tmp_path / "unindexed")
    spark.range(40).selectExpr("0 AS n", "id").repartitionByRange(4, "id").write.format("delta").option(
        "delta.dataSkippingNumIndexedCols", "1"
    ).save(unindexed)
    kept = stats_module.read_listed(spark, unindexed, within=("id", KeyRanges("id", ((0, 0),)).overlaps))
    assert kept is not None and len(kept.inputFiles()) == 4, "no statistics of id: every file is read"


@pytest.mark.parametrize(
    ("mode", "keys_broadcast", "shuffled"),
    [
        ("copy_on_write", True, True),
        ("copy_on_write", True, False),
        ("log", True, True),
        ("log", False, True),
        (THROUGH_DELTA, True, True),
        (THROUGH_DELTA, False, True),
    ],
)
def test_pruned_batches_equal_the_oracle(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, keys_broadcast: bool, shuffled: bool
) -> None:
    """Pruned batches give the oracle's table. The classification join is the shuffled one where
    ``shuffled`` (the bound lowered to 0), else the broadcast one of small batches, whose stored rows
    and tombstones are both cut to the batch's keys within its ranges. A ``log`` batch reads only the
    files that can hold its keys, from the checksum's list, or through Delta's file skipping where the
    checksum lists none (a table of many files); it reads only its keys' rows of the merged view when
    its keys are broadcast, else the whole view within its ranges."""
    if shuffled:
        monkeypatch.setattr(plan_module, "BROADCAST_ROWS", 0)
    if not keys_broadcast:
        monkeypatch.setattr(plan_module, "key_broadcast_rows", lambda schema, key: 0)
    rng = random.Random(1)
    table = _table(tmp_path, "log" if mode.startswith("log") else mode)
    if mode == THROUGH_DELTA:
        _unlisted(monkeypatch, table)
    state = _clustered(spark, table, keys=300, files=6)
    tombstones: dict[tuple[Any, ...], Any] = {}
    for number in range(1, 4):
        # Keys in two or three clusters (some new), duplicates, deletes, late changes.
        centres = [rng.randrange(0, 360) for _ in range(rng.randint(1, 3))]
        batch = []
        for _ in range(25):
            key = max(0, rng.choice(centres) + rng.randint(-6, 6))
            batch.append(
                {
                    "id": key,
                    "seq": rng.randint(0, 3) + number,
                    "op": rng.choice("UUUD"),
                    "v": f"b{number}-{rng.randint(0, 9)}",
                }
            )
        state, _ = apply_batch(state, [("batch.csv", batch)], key=("id",), tombstones=tombstones)
        _apply(spark, table, tmp_path / f"b{number}", batch)
        got = (
            read_log_view(table.path, table.log_table, "id", COLUMNS)
            if table.log_mode
            else read_table(table.path, list(COLUMNS))
        )
        assert got == sorted(state_rows(state, COLUMNS), key=lambda r: [(v is None, str(v)) for v in r.values()])


def _tombstoned(
    spark: Any, tmp_path: Path, mode: str
) -> tuple[lakemerge.TableConfig, dict[tuple[Any, ...], Any], dict[tuple[Any, ...], Any]]:
    """A clustered table (400 keys, 8 files) whose first batch deleted keys 12 and 390 and the
    absent key 500 at sequence 5; the oracle's state and tombstones after it."""
    table = _table(tmp_path, mode)
    state = _clustered(spark, table, keys=400, files=8)
    deletes = [{"id": k, "seq": 5, "op": "D", "v": None} for k in (12, 390, 500)]
    _apply(spark, table, tmp_path / "b1", deletes)
    tombstones: dict[tuple[Any, ...], Any] = {}
    state, _ = apply_batch(state, [("batch.csv", deletes)], key=("id",), tombstones=tombstones)
    return table, state, tombstones


@pytest.mark.parametrize("mode", ["copy_on_write", "deletion_vectors"])
@pytest.mark.parametrize("shuffled", [False, True])
def test_tombstones_within_a_batch_s_key_ranges_are_honoured(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, shuffled: bool
) -> None:
    """A batch reads the tombstones within its key ranges only, as it reads the stored rows: changes
    older than a delete of their key stay late, whether the key was stored (12) or absent (500) when
    it was deleted, and a key deleted outside the batch's ranges (390) is not in its way."""
    if shuffled:
        monkeypatch.setattr(plan_module, "BROADCAST_ROWS", 0)
    table, state, tombstones = _tombstoned(spark, tmp_path, mode)
    second = [
        {"id": 12, "seq": 3, "op": "U", "v": "late"},
        {"id": 500, "seq": 4, "op": "U", "v": "late"},
        {"id": 13, "seq": 6, "op": "U", "v": "updated"},
        {"id": 501, "seq": 6, "op": "U", "v": "new"},
    ]
    result = _apply(spark, table, tmp_path / "b2", second)
    state, _ = apply_batch(state, [("batch.csv", second)], key=("id",), tombstones=tombstones)
    assert (result.metrics.late, result.metrics.updated, result.metrics.inserted) == (2, 1, 1)
    assert read_table(table.path, list(COLUMNS)) == state_rows(state, COLUMNS)


@pytest.mark.internals
def test_a_small_batch_broadcasts_its_keys_once_for_stored_rows_and_tombstones(spark: Any, tmp_path: Path) -> None:
    """The stored rows and the tombstones are both cut to the batch's keys within its ranges, so the
    two semi-joins share one broadcast of those keys (a reused exchange), and the newest tombstone
    of each key is found without a shuffle (the few tombstones of the batch's keys in one partition)."""
    table, _, _ = _tombstoned(spark, tmp_path, "copy_on_write")
    plans: list[str] = []
    real = plan_module.outcome_counts

    def spy(classified: Any, source: Any, **options: Any) -> Any:
        plans.append(str(classified._jdf.queryExecution().executedPlan().toString()))
        return real(classified, source, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plan_module, "outcome_counts", spy)
        _apply(spark, table, tmp_path / "b2", [{"id": 12, "seq": 3, "op": "U", "v": "late"}])
    (plan,) = plans
    assert "ReusedExchange" in plan, plan
    assert plan.count("Exchange hashpartitioning") == 1, plan  # (the collapse's, by key)


def test_the_share_of_bytes_outside_the_ranges_counts_only_files_known_to_lie_outside() -> None:
    ranges = KeyRanges(column="id", ranges=((10, 20), (50, 50)))
    files = [(0, 9, 100), (10, 15, 200), (21, 49, 300), (45, 60, 400), (None, None, 500), (51, 90, 500)]
    # Outside: 0-9, 21-49 and 51-90 (900 bytes); the file without statistics may hold any key.
    assert skipped_share(files, ranges) == pytest.approx(900 / 2000)
    assert skipped_share([(0, 100, 7)], ranges) == 0.0
    assert skipped_share([], ranges) is None
    # A batch's key typed unlike the table's: nothing is left out (the batch's schema check refuses it).
    names = KeyRanges(column="id", ranges=(("a", "q"),))
    assert names.overlaps(0, 9) and skipped_share(files, names) == 0.0


def test_file_key_bounds_come_from_the_delta_log_and_refuse_what_statistics_cannot_bound(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "t")
    spark.range(40).selectExpr(
        "id", "CAST(id AS STRING) AS name", "CAST(id AS DOUBLE) AS x", "id % 2 AS p"
    ).repartitionByRange(4, "id").write.format("delta").save(path)
    bounds = sorted(file_key_bounds(spark, path, "id") or [])
    assert [(low, high) for low, high, _ in bounds] == [(0, 9), (10, 19), (20, 29), (30, 39)]
    assert all(size > 0 for _, _, size in bounds)
    assert file_key_bounds(spark, path, "name") is None, "string statistics are truncated"
    assert file_key_bounds(spark, path, "x") is None
    monkeypatch.setattr(stats_module, "MAX_BOUNDED_FILES", 3)
    assert file_key_bounds(spark, path, "id") is None, "too many files to bring their statistics to the driver"
    monkeypatch.undo()
    partitioned = str(tmp_path / "p")
    spark.range(10).selectExpr("id", "id % 2 AS p").write.format("delta").partitionBy("p").save(partitioned)
    assert file_key_bounds(spark, partitioned, "p") is None


@pytest.mark.parametrize(
    "key",
    ["id", "CAST(id AS INT)", "CAST(id * 1.25 AS DECIMAL(12, 2))", "DATE_ADD(DATE'2020-02-27', CAST(id AS INT))"],
)
def test_file_key_bounds_of_a_few_files_come_from_the_checksum_without_a_job(
    spark: Any, tmp_path: Path, key: str
) -> None:
    """A version of few files lists them, with their statistics, in Delta's checksum: their bounds
    are read from it, with no Spark job, and equal what the job over Delta's statistics gives (the
    same table written without that list)."""
    frame = spark.range(40).selectExpr(f"{key} AS k", "id AS n").repartitionByRange(4, "n")
    listed, unlisted = str(tmp_path / "listed"), str(tmp_path / "unlisted")
    frame.write.format("delta").save(listed)
    spark.conf.set("spark.databricks.delta.allFilesInCrc.enabled", "false")
    try:
        frame.write.format("delta").save(unlisted)
    finally:
        spark.conf.unset("spark.databricks.delta.allFilesInCrc.enabled")
    jobs: dict[str, list[Any] | None] = {}
    tracker = spark.sparkContext.statusTracker()
    for name, path in (("listed", listed), ("unlisted", unlisted)):
        stats_module.file_key_bounds(spark, path, "k")  # (Delta's snapshot brought up to date)
        spark.sparkContext.setJobGroup(f"bounds-{name}", "file_key_bounds")
        try:
            jobs[name] = stats_module.file_key_bounds(spark, path, "k")
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            spark.sparkContext.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
    assert tracker.getJobIdsForGroup("bounds-listed") == [], "bounds from the checksum need no job"
    assert tracker.getJobIdsForGroup("bounds-unlisted"), "without the checksum's list, one job reads them"
    assert jobs["listed"] is not None and len(jobs["listed"]) == 4
    assert sorted(jobs["listed"]) == sorted(jobs["unlisted"] or [])
    assert [type(low) for low, _, _ in jobs["listed"]] == [type(low) for low, _, _ in jobs["unlisted"] or []]
    unindexed = str(tmp_path / "unindexed")
    frame.write.format("delta").option("delta.dataSkippingNumIndexedCols", "1").save(unindexed)
    assert stats_module.file_key_bounds(spark, unindexed, "k") is not None
    assert stats_module.file_key_bounds(spark, unindexed, "n") is None, "Delta keeps no statistics of n"


def test_batches_use_key_ranges_only_where_they_skip_files(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose ranges would leave out less than MIN_SKIPPED_SHARE of the table's bytes runs
    without them (they would only cost it); one whose keys cluster keeps them."""
    planned: list[Any] = []
    original = batch_module.plan_batch

    def spy(*args: Any, **kwargs: Any) -> Any:
        plan = original(*args, **kwargs)
        planned.append(plan.ranges)
        return plan

    monkeypatch.setattr(batch_module, "plan_batch", spy)
    table = _table(tmp_path)
    state = _clustered(spark, table, keys=400, files=8)
    spread = [{"id": k, "seq": 2, "op": "U", "v": "s"} for k in range(5, 400, 20)]  # in every file
    clustered = [{"id": k, "seq": 3, "op": "U", "v": "c"} for k in (101, 102, 140)]
    _apply(spark, table, tmp_path / "b1", clustered)
    _apply(spark, table, tmp_path / "b2", spread)
    assert planned[0] is not None and planned[0].ranges == ((101, 101), (102, 102), (140, 140))
    assert planned[1] is None, "ranges over every file skip nothing"
    state, _ = apply_batch(state, [("b1.csv", clustered)], key=("id",))
    state, _ = apply_batch(state, [("b2.csv", spread)], key=("id",))
    assert read_table(table.path, list(COLUMNS)) == sorted(
        state_rows(state, COLUMNS), key=lambda r: [(v is None, str(v)) for v in r.values()]
    )


@pytest.mark.small_tables_whole
def test_a_small_table_is_read_whole_without_ranges_or_their_check(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below MIN_PRUNED_BYTES (by the size in Delta's commit checksum) a batch neither cuts its keys
    into ranges nor reads the files' statistics; above it, the same batch does both."""
    planned: list[Any] = []
    bounds: list[str] = []
    original, original_bounds = batch_module.plan_batch, stats_module.file_key_bounds

    def spy(*args: Any, **kwargs: Any) -> Any:
        plan = original(*args, **kwargs)
        planned.append(plan.ranges)
        return plan

    def counted(spark: Any, path: str, column: str) -> Any:
        bounds.append(path)
        return original_bounds(spark, path, column)

    monkeypatch.setattr(batch_module, "plan_batch", spy)
    monkeypatch.setattr(stats_module, "file_key_bounds", counted)
    table = _table(tmp_path)
    state = _clustered(spark, table, keys=400, files=8)
    size = stats_module.table_bytes(spark, table.path)
    assert size is not None and 0 < size == sum(
        a["size_bytes"] for a in pa.table(deltalake.DeltaTable(table.path).get_add_actions(flatten=True)).to_pylist()
    )
    clustered = [{"id": k, "seq": 2, "op": "U", "v": "c"} for k in (101, 102, 140)]
    _apply(spark, table, tmp_path / "b1", clustered)
    assert planned == [None] and bounds == []
    monkeypatch.setattr(prune_module, "MIN_PRUNED_BYTES", size + 1_000_000)
    _apply(spark, table, tmp_path / "b2", [{**r, "seq": 3} for r in clustered])
    assert planned[1] is None and bounds == []
    monkeypatch.setattr(prune_module, "MIN_PRUNED_BYTES", 0)
    _apply(spark, table, tmp_path / "b3", [{**r, "seq": 4} for r in clustered])
    assert planned[2] is not None and planned[2].ranges == ((101, 101), (102, 102), (140, 140))
    assert bounds == [table.path]
    for seq, folder in ((2, "b1.csv"), (3, "b2.csv"), (4, "b3.csv")):
        state, _ = apply_batch(state, [(folder, [{**r, "seq": seq} for r in clustered])], key=("id",))
    assert read_table(table.path, list(COLUMNS)) == sorted(
        state_rows(state, COLUMNS), key=lambda r: [(v is None, str(v)) for v in r.values()]
    )


@pytest.mark.small_tables_whole
@pytest.mark.internals
def test_a_log_batch_reading_its_table_whole_lists_its_files_without_delta_s_file_skipping(
    spark: Any, tmp_path: Path
) -> None:
    """A small table is read whole, without key ranges: its files come from the checksum's list,
    with no Spark job for Delta's file skipping (it had nothing to skip)."""
    table = _table(tmp_path, "log")
    state = _clustered(spark, table, keys=400, files=8)
    batches = [
        [{"id": 5 + n, "seq": 2, "op": "U", "v": f"x{n}"}, {"id": 500 + n, "seq": 2, "op": "D", "v": None}]
        for n in range(3)
    ]
    for number, batch in enumerate(batches[:2]):
        _apply(spark, table, tmp_path / f"b{number}", batch)
    ran = jobs_of(spark, lambda: _apply(spark, table, tmp_path / "b2", batches[2]))
    assert any("writeAndReturnCommitData" in job for job in ran)
    assert not [job for job in ran if "Filtering files" in job], ran
    for number, batch in enumerate(batches):
        state, _ = apply_batch(state, [(f"b{number}.csv", batch)], key=("id",))
    assert read_log_view(table.path, table.log_table, "id", COLUMNS) == state_rows(state, COLUMNS)


@pytest.mark.internals
def test_a_batch_counts_its_rows_and_finds_its_key_ranges_in_one_spark_job(spark: Any, tmp_path: Path) -> None:
    """The batch's row counts and its key slices' bounds are one aggregate: one job, which reads the
    feed once (the gaps were found in a second read, whose keys were sorted in one task)."""
    table = _table(tmp_path)
    _clustered(spark, table, keys=400, files=8)
    clustered = [{"id": k, "seq": 2, "op": "U", "v": "c"} for k in (101, 102, 140, 300)]
    write_lines(tmp_path / "b1" / "batch.csv", ["id,seq,op,v", *[f"{r['id']},2,U,c" for r in clustered]])
    plans: list[Any] = []

    def planned() -> None:
        with scoped_conf(spark, tuning.batch_settings(spark)):  # as a batch runs: without adaptive execution
            plans.append(plan_module.plan_batch(table, spark=spark, inputs=[str(tmp_path / "b1")]))

    ran = jobs_of(spark, planned, stages=True)
    plan = plans[0]
    try:
        assert plan.ranges is not None and plan.ranges.ranges == ((101, 102), (140, 140), (300, 300))
        assert plan.metrics.rows_read == 4
        # The statistics job is the first collect of the batch's own modules (the ledger's history read
        # is a collect too, of commit metadata only).
        first = [
            job for job in ran if job[0].startswith("collect at") and ("prune.py" in job[0] or "plan.py" in job[0])
        ][:1]
        assert first, ran
        statistics = [job for job in ran if job[0] == first[0][0]]
        assert len(statistics) == 1, ran
        assert statistics[0][2] == len(clustered), ran  # the feed's rows, read once
    finally:
        plan.release()


@pytest.mark.internals
def test_finding_key_ranges_leaves_the_batch_s_cached_changes_in_the_cache(spark: Any, tmp_path: Path) -> None:
    """The key ranges are found over the batch's cached changes; once found, those changes must still
    be Spark's cached data (a temporary view over them, once dropped, took the cache with it, and
    each later job parsed the records again)."""
    table = _table(tmp_path)
    _clustered(spark, table, keys=400, files=8)
    write_lines(tmp_path / "b1" / "batch.csv", ["id,seq,op,v", "101,2,U,c", "140,2,D,", "300,2,U,c"])
    cache = spark._jsparkSession.sharedState().cacheManager()
    with scoped_conf(spark, tuning.batch_settings(spark)):
        plan = plan_module.plan_batch(table, spark=spark, inputs=[str(tmp_path / "b1")])
    assert isinstance(plan, plan_module.BatchPlan)
    try:
        assert plan.ranges is not None  # the ranges were looked for
        assert plan.cached.frames
        assert all(cache.lookupCachedData(frame._jdf).isDefined() for frame in plan.cached.frames)
    finally:
        plan.release()
