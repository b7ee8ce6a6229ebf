"""Settings lakemerge chooses per batch (`lakemerge.spark.tuning`): a batch runs without
adaptive execution, except the parts that read the whole table (the MERGE, compaction, and the
classification of a large batch), which keep the session's settings; a batch small enough to
broadcast is classified and logged in shuffle partitions sized from its rows; the session's own
settings are back when the batch is done, also when it fails; a session that turned tuning off
keeps its settings throughout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.batch import attempts as batch_module
from lakemerge.batch import classify as classify_module
from lakemerge.batch import commit as commit_module
from lakemerge.batch import plan as plan_module
from lakemerge.spark import tuning
from lakemerge.spark.scoped import scoped_conf as scoped
from lakemerge.table import direct as direct_table
from lakemerge.write import log as log_module
from tests.helpers import read_table, write_lines

ADAPTIVE = "spark.sql.adaptive.enabled"
PARTITIONS = "spark.sql.shuffle.partitions"


def _table(tmp_path: Path, write_mode: str = "log") -> lakemerge.TableConfig:
    feed = lakemerge.FeedConfig(
        location=(str(tmp_path / "in"),),
        format="csv",
        header=True,
        schema="id INT, seq BIGINT, op STRING, a STRING",
        op_column="op",
    )
    return lakemerge.TableConfig(
        name="t", path=str(tmp_path / "table"), key=("id",), sequence=("seq",), feed=feed, write_mode=write_mode
    )


def _apply(spark: Any, table: lakemerge.TableConfig, folder: Path, lines: list[str]) -> lakemerge.BatchResult:
    write_lines(folder / "f.csv", ["id,seq,op,a", *lines])
    return lakemerge.apply_table(table, inputs=[str(folder)], spark=spark)


def _settings(spark: Any) -> tuple[str | None, str | None]:
    return spark.conf.get(ADAPTIVE, None), spark.conf.get(PARTITIONS, None)


class _Spy:
    """Records the session's settings whenever the wrapped function is called."""

    def __init__(self, spark: Any, function: Any) -> None:
        self.spark, self.function, self.seen = spark, function, []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.seen.append(_settings(self.spark))
        return self.function(*args, **kwargs)


def test_shuffle_partitions_follow_the_rows_between_one_and_two_per_core() -> None:
    per = tuning.ROWS_PER_PARTITION
    assert tuning.shuffle_partitions(10, 2) == 2
    assert tuning.shuffle_partitions(3 * per, 2) == 3
    assert tuning.shuffle_partitions(100 * per, 2) == 4
    assert tuning.shuffle_partitions(3 * per, 16) == 16
    assert tuning.shuffle_partitions(100 * per, 16) == 32
    assert tuning.shuffle_partitions(0, 0) == 1


def test_a_log_batchs_keys_are_broadcast_up_to_a_byte_budget_wider_keys_fewer() -> None:
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("day", T.DateType()),
            T.StructField("name", T.StringType()),
        ]
    )
    rows = plan_module.KEY_BROADCAST_ROWS
    assert plan_module.key_broadcast_rows(schema, ["id"]) == rows
    assert plan_module.key_broadcast_rows(schema, ["id", "day"]) == rows * 16 // 24
    assert plan_module.key_broadcast_rows(schema, ["name"]) == rows * 16 // 40
    assert plan_module.key_broadcast_rows(schema, ["name"]) > plan_module.BROADCAST_ROWS


def test_scoped_settings_are_put_back_set_or_unset_even_when_the_block_fails(spark: Any) -> None:
    key, unset = "spark.lakemerge.test.scoped", "spark.lakemerge.test.unset"
    spark.conf.set(key, "before")
    try:
        with pytest.raises(RuntimeError), scoped(spark, {key: "inside", unset: "inside"}):
            assert spark.conf.get(key) == spark.conf.get(unset) == "inside"
            raise RuntimeError("boom")
        assert spark.conf.get(key) == "before"
        assert spark.conf.get(unset, None) is None
    finally:
        spark.conf.unset(key)


@pytest.mark.internals
@pytest.mark.parametrize("size", ["broadcast", "keys broadcast"])
def test_a_small_batch_is_classified_and_logged_with_its_own_settings_and_the_session_keeps_its_own(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: str
) -> None:
    """A log batch whose keys can be broadcast reads only its keys' rows of the merged view, also
    when it is too large for its stored rows to be broadcast (the bound lowered to 0): it is tuned."""
    table = _table(tmp_path)
    _apply(spark, table, tmp_path / "1", ["1,1,U,a", "2,1,U,b", "3,1,U,c"])
    if size == "keys broadcast":
        monkeypatch.setattr(plan_module, "BROADCAST_ROWS", 0)
    before = _settings(spark)
    classify = _Spy(spark, classify_module.classify)
    append = _Spy(spark, log_module.append)
    monkeypatch.setattr(classify_module, "classify", classify)
    monkeypatch.setattr(log_module, "append", append)
    plan = plan_module.plan_batch(table, spark=spark, inputs=[str(_lines(tmp_path / "2", ["1,2,U,x", "3,2,D,"]))])
    assert isinstance(plan, plan_module.BatchPlan)
    assert (plan.small, plan.keyed) == (size == "broadcast", True)
    try:
        cores = spark.sparkContext.defaultParallelism
        expected = {ADAPTIVE: "false", PARTITIONS: str(tuning.shuffle_partitions(2, cores))}
        assert plan.settings == expected
        assert classify.seen == [("false", expected[PARTITIONS])]
        # The classification was planned with them: its cached rows are in that many partitions.
        assert plan.classified.rdd.getNumPartitions() == int(expected[PARTITIONS])
        assert _settings(spark) == before
        result = commit_module.commit_batch(plan, spark=spark)
    finally:
        plan.release()
    assert append.seen == [("false", expected[PARTITIONS])]
    assert _settings(spark) == before
    assert (result.metrics.updated, result.metrics.deleted) == (1, 1)
    merged = lakemerge.read_merged(spark, table)
    assert merged is not None
    assert sorted((r["id"], r["a"]) for r in merged.collect()) == [(1, "x"), (2, "b")]


def _lines(folder: Path, lines: list[str]) -> Path:
    write_lines(folder / "f.csv", ["id,seq,op,a", *lines])
    return folder


@pytest.mark.parametrize("why", ["large", "switched off"])
def test_a_large_batch_or_a_session_that_says_no_keeps_the_session_settings(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    table = _table(tmp_path, write_mode="copy_on_write")
    _apply(spark, table, tmp_path / "1", ["1,1,U,a", "2,1,U,b"])
    if why == "large":
        monkeypatch.setattr(plan_module, "BROADCAST_ROWS", 0)
    else:
        spark.conf.set(tuning.SWITCH, "false")
    classify = _Spy(spark, classify_module.classify)
    merge = _Spy(spark, commit_module.write_changes)
    direct = _Spy(spark, commit_module.write_direct)  # (the batch updates stored rows: written without MERGE)
    find = _Spy(spark, commit_module.ledger.find_commit)
    monkeypatch.setattr(classify_module, "classify", classify)
    monkeypatch.setattr(commit_module, "write_changes", merge)
    monkeypatch.setattr(commit_module, "write_direct", direct)
    monkeypatch.setattr(commit_module.ledger, "find_commit", find)
    before = _settings(spark)
    try:
        result = _apply(spark, table, tmp_path / "2", ["1,2,U,x", "2,2,D,", "5,1,U,e"])
    finally:
        spark.conf.unset(tuning.SWITCH)
    assert merge.seen == []
    assert classify.seen == direct.seen == [before]
    # A large batch still runs its bookkeeping without adaptive execution; a session that said no, with its own.
    assert {seen[0] for seen in find.seen} == ({"false"} if why == "large" else {before[0]})
    assert (result.metrics.inserted, result.metrics.updated, result.metrics.deleted) == (1, 1, 1)
    rows = read_table(table.path)
    assert sorted((r["id"], r["a"]) for r in rows) == [(1, "x"), (5, "e")]


@pytest.mark.internals
def test_a_log_batch_whose_keys_are_too_many_to_broadcast_keeps_the_session_settings(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(tmp_path)
    _apply(spark, table, tmp_path / "1", ["1,1,U,a", "2,1,U,b"])
    # Under the bound for stored rows, over the one for keys (wide keys): no broadcast at all.
    monkeypatch.setattr(plan_module, "KEY_BROADCAST_ROWS", 0)
    classify = _Spy(spark, classify_module.classify)
    broadcast: list[bool] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        broadcast.append(kwargs["broadcast"])
        return classify(*args, **kwargs)

    monkeypatch.setattr(classify_module, "classify", spy)
    before = _settings(spark)
    result = _apply(spark, table, tmp_path / "2", ["1,2,U,x", "2,2,D,", "5,1,U,e"])
    assert classify.seen == [before]
    assert broadcast == [False]
    assert (result.metrics.inserted, result.metrics.updated, result.metrics.deleted) == (1, 1, 1)
    merged = lakemerge.read_merged(spark, table)
    assert merged is not None
    assert sorted((r["id"], r["a"]) for r in merged.collect()) == [(1, "x"), (5, "e")]


def test_a_batch_that_fails_while_tuned_leaves_the_session_settings_and_the_table_as_they_were(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(tmp_path, write_mode="copy_on_write")
    _apply(spark, table, tmp_path / "1", ["1,1,U,a"])
    before = _settings(spark)
    seen: list[tuple[str | None, str | None]] = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        seen.append(_settings(spark))
        raise RuntimeError("classification failed")

    monkeypatch.setattr(classify_module, "classify", failing)
    with pytest.raises(RuntimeError, match="classification failed"):
        _apply(spark, table, tmp_path / "2", ["1,2,U,x"])
    assert seen and seen[0][0] == "false"
    assert _settings(spark) == before
    assert [(r["id"], r["a"]) for r in read_table(table.path)] == [(1, "a")]


@pytest.mark.internals
@pytest.mark.parametrize("write", ["merge", "direct"])
def test_a_small_batch_runs_whole_without_adaptive_execution_but_the_merge_and_compaction_keep_the_sessions(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    table = _table(tmp_path, write_mode="copy_on_write").model_copy(update={"compact_after_batches": 2})
    _apply(spark, table, tmp_path / "1", ["1,1,U,a", "2,1,U,b", "3,1,U,c"])
    before = _settings(spark)
    merge = _Spy(spark, commit_module.write_changes)
    direct = _Spy(spark, commit_module.write_direct)
    find = _Spy(spark, commit_module.ledger.find_commit)
    compact = _Spy(spark, batch_module.compaction.compact)
    monkeypatch.setattr(commit_module, "write_changes", merge)
    monkeypatch.setattr(commit_module, "write_direct", direct)
    monkeypatch.setattr(commit_module.ledger, "find_commit", find)
    monkeypatch.setattr(batch_module.compaction, "compact", compact)
    if write == "merge":
        spark.conf.set(direct_table.ENABLED_CONF, "false")
    try:
        result = _apply(spark, table, tmp_path / "2", ["1,2,U,x", "3,2,D,", "4,1,U,d"])
    finally:
        spark.conf.unset(direct_table.ENABLED_CONF)
    if write == "merge":
        # The MERGE reads the whole table: the session's settings, not the batch's.
        assert (merge.seen, direct.seen) == ([before], [])
    else:
        # Written without MERGE, the batch reads only the files it touches: the batch's settings.
        assert merge.seen == [] and [seen[0] for seen in direct.seen] == ["false"]
    # What the batch runs around it (here: finding its commit) runs without adaptive execution.
    assert find.seen and all(seen[0] == "false" for seen in find.seen)
    assert compact.seen == [before]
    assert result.compaction is not None
    assert _settings(spark) == before
    assert sorted((r["id"], r["a"]) for r in read_table(table.path)) == [(1, "x"), (2, "b"), (4, "d")]


@pytest.mark.parametrize("why", ["truncate", "scd2"])
def test_a_batch_that_reaches_the_whole_table_is_planned_with_the_session_settings(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    table = _table(tmp_path, write_mode="copy_on_write")
    if why == "truncate":
        feed = table.feeds[0].model_copy(update={"truncate_codes": ("T",)})
        table = table.model_copy(update={"feed": feed})
    else:
        table = table.model_copy(update={"history": "scd2"})
    _apply(spark, table, tmp_path / "1", ["1,1,U,a", "2,1,U,b"])
    # (an SCD2 table's batch is planned by scd2.build, not classify)
    owner, name = (classify_module, "classify") if why == "truncate" else (classify_module.scd2, "build")
    planned = _Spy(spark, getattr(owner, name))
    monkeypatch.setattr(owner, name, planned)
    before = _settings(spark)
    lines = ["2,2,T,", "3,3,U,c"] if why == "truncate" else ["1,2,U,x", "3,2,U,c"]
    _apply(spark, table, tmp_path / "2", lines)
    assert planned.seen == [before]
    assert _settings(spark) == before
    expected = [(3, "c")] if why == "truncate" else [(1, "a"), (1, "x"), (2, "b"), (3, "c")]
    assert sorted((r["id"], r["a"]) for r in read_table(table.path)) == expected


@pytest.mark.internals
@pytest.mark.parametrize("write", ["merge", "direct"])
def test_the_merge_of_a_small_batch_rewrites_the_table_in_the_sessions_partitions_not_the_batchs(
    spark: Any, tmp_path: Path, write: str
) -> None:
    # A small batch is classified in two partitions here (local[2]). Its changes, hashed on the
    # key, must not decide the partitions of the MERGE's join: Spark would shuffle the table into
    # those two and write the rewritten table as two files (SF10: 35 s instead of 31 s a batch).
    # Written without MERGE, each touched file is rewritten as one file, and the new rows as one.
    table = _table(tmp_path, write_mode="copy_on_write")
    with scoped(spark, {PARTITIONS: "3"}):
        _apply(spark, table, tmp_path / "1", [f"{i},1,U,a" for i in range(400)])
    off = {direct_table.ENABLED_CONF: "false"} if write == "merge" else {}
    with scoped(spark, {ADAPTIVE: "false", PARTITIONS: "5", **off}):
        result = _apply(spark, table, tmp_path / "2", [f"{i},2,U,b" for i in range(0, 400, 40)] + ["1000,1,U,c"])
        assert tuning.small_batch_settings(spark, 11)[PARTITIONS] == "2"
    assert result.files_added == (5 if write == "merge" else result.files_removed + 1)
    assert write == "merge" or result.files_removed > 1
    rows = sorted((r["id"], r["a"]) for r in read_table(table.path))
    assert len(rows) == 401 and rows[0] == (0, "b") and rows[1] == (1, "a") and rows[-1] == (1000, "c")


@pytest.mark.internals
def test_a_dataframe_batch_is_planned_without_constraint_propagation_unless_the_session_says(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DataFrame's records are typed and checked in projections of many aliased expressions, whose
    constraints Spark's optimizer infers and compares pair by pair: most of a micro-batch's time.
    A file batch, and a session that sets the setting itself, keep the session's."""
    constraints = "spark.sql.constraintPropagation.enabled"
    table = _table(tmp_path, write_mode="copy_on_write")
    _apply(spark, table, tmp_path / "1", ["1,1,U,a"])
    seen: list[str | None] = []
    original = classify_module.classify

    def spying(*args: Any, **kwargs: Any) -> Any:
        seen.append(spark.conf.get(constraints, None))
        return original(*args, **kwargs)

    monkeypatch.setattr(classify_module, "classify", spying)
    rows = spark.createDataFrame([(1, 2, "U", "b"), (2, 1, "U", "c")], "id INT, seq BIGINT, op STRING, a STRING")
    assert lakemerge.apply_changes(table, rows, source="job", batch_id=1, spark=spark).metrics.updated == 1
    _apply(spark, table, tmp_path / "2", ["1,3,U,x"])
    spark.conf.set(constraints, "true")
    try:
        lakemerge.apply_changes(table, rows, source="job", batch_id=2, spark=spark)
    finally:
        spark.conf.unset(constraints)
    assert seen == ["false", None, "true"]
    assert spark.conf.get(constraints, None) is None
