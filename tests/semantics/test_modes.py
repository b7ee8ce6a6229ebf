"""Write modes (docs/modes.md): the ``log`` table's merged view equals the oracle and a
copy-on-write table fed the same batches, before and after compaction and across a compaction
that fails between its steps; deletion-vector tables read back with delta-rs and Spark and lose
their deletion vectors when compacted; config errors; the CLI's compact."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import lakemerge
from lakemerge.config.loading import validate
from lakemerge.operations import compact as compaction
from tests.helpers import read_table, write_lines
from tests.oracle import Oracle

COLUMNS = ["k", "seq", "a", "b"]
SCHEMA = "k INT, seq BIGINT, op STRING, a STRING, b STRING"
counter = itertools.count()
value = st.one_of(st.none(), st.sampled_from(["p", "q"]))
change = st.fixed_dictionaries(
    {"k": st.integers(0, 4), "seq": st.integers(0, 5), "op": st.sampled_from(["U", "U", "D"]), "a": value, "b": value}
)
change_sets = st.lists(
    st.lists(st.lists(change, min_size=1, max_size=5), min_size=1, max_size=2), min_size=1, max_size=3
)


def config(root: Path, name: str, **table: Any) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name=name,
        path=str(root / name),
        key=("k",),
        sequence=("seq",),
        feed=lakemerge.FeedConfig(
            location=(str(root / "in"),), format="csv", header=True, schema=SCHEMA, op_column="op"
        ),
        ignore_null_updates=True,
        **table,
    )


def write_batch(folder: Path, files: list[list[dict[str, Any]]]) -> None:
    for f, rows in enumerate(files):
        lines = [",".join("" if r[c] is None else str(r[c]) for c in ["k", "seq", "op", "a", "b"]) for r in rows]
        write_lines(folder / f"f_{f:02d}.csv", ["k,seq,op,a,b", *lines])


def canonical(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(
        ({c: r.get(c) for c in COLUMNS} for r in rows), key=lambda r: [(v is None, str(v)) for v in r.values()]
    )


def merged(spark: Any, table: lakemerge.TableConfig) -> list[dict[str, Any]]:
    frame = lakemerge.read_merged(spark, table)
    return [] if frame is None else canonical([r.asDict() for r in frame.collect()])


def read_dv(path: str) -> list[dict[str, Any]]:
    """Rows of a table that may hold deletion vectors, read by delta-rs's query engine."""
    found = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("SELECT * FROM t")
    return canonical([row for batch in found for row in pa.record_batch(batch).to_pylist()])


def live_deletion_vectors(path: str) -> int:
    """Files of the table's current version carrying a deletion vector, replayed from the JSON log."""
    live: dict[str, dict[str, Any]] = {}
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        # A commit that marks rows removes the file's old entry and adds it again with its deletion
        # vector, in either order within the commit: removes first, then adds.
        for action in actions:
            if "remove" in action:
                live.pop(action["remove"]["path"], None)
        for action in actions:
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
    return sum(1 for add in live.values() if add.get("deletionVector"))


@settings(
    max_examples=2,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(batches=change_sets)
def test_log_view_and_deletion_vectors_match_copy_on_write_and_the_oracle(
    spark: Any, tmp_path: Path, batches: Any
) -> None:
    root = tmp_path / str(next(counter))
    oracle = Oracle(key=("k",), seq="seq", op="op", partial=("a", "b"))
    cow = config(root, "cow")
    log = config(root, "log", write_mode="log")
    dv = config(root, "dv", write_mode="deletion_vectors")
    for n, files in enumerate(batches):
        folder = root / f"batch_{n}"
        write_batch(folder, files)
        oracle.apply(files)
        expected = canonical(oracle.rows())
        results = [lakemerge.apply_table(t, inputs=[str(folder)], spark=spark) for t in (cow, log, dv)]
        assert results[0].metrics == results[1].metrics == results[2].metrics, f"batch {n}"
        assert read_table(cow.path, COLUMNS) == expected
        assert merged(spark, log) == expected, f"batch {n}: log view"
        assert read_dv(dv.path) == expected, f"batch {n}: deletion vectors"
        if n == 1:  # a compaction between batches folds the log; later batches go on from there
            lakemerge.compact(lakemerge.PipelineConfig(tables={"log": log}), spark=spark)
            assert merged(spark, log) == expected
    folded = compaction.compact(log, spark=spark)
    assert folded.log_rows_deleted >= folded.log_rows_folded
    assert merged(spark, log) == expected == canonical(read_dv(log.path))
    assert spark.read.format("delta").load(log.log_table).count() == 0
    compaction.compact(dv, spark=spark)
    assert live_deletion_vectors(dv.path) == 0
    assert read_dv(dv.path) == expected
    assert canonical([r.asDict() for r in spark.read.format("delta").load(dv.path).collect()]) == expected


@pytest.mark.parametrize("size", ["keys broadcast", "nothing broadcast"])
def test_large_log_batches_match_copy_on_write(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: str
) -> None:
    """A small batch classifies against (and folds partial updates with) only its keys' rows of the
    merged view (every other test here). A larger one (the bound lowered to 0) still reduces the
    view to its keys by broadcasting the keys alone; one whose keys are too many to broadcast (both
    bounds 0) ranks the whole view. Each gives copy-on-write's table."""
    from lakemerge.batch import plan as plan_module
    from lakemerge.table import logview as logview_module

    monkeypatch.setattr(plan_module, "BROADCAST_ROWS", 0)
    if size == "nothing broadcast":
        monkeypatch.setattr(plan_module, "KEY_BROADCAST_ROWS", 0)
    reduced: list[int] = []
    of_keys = logview_module.newest_of_keys

    def spy(*args: Any, **kwargs: Any) -> Any:
        reduced.append(1)
        return of_keys(*args, **kwargs)

    monkeypatch.setattr(logview_module, "newest_of_keys", spy)
    cow, log = config(tmp_path, "cow"), config(tmp_path, "log", write_mode="log")
    batches = [
        [[{"k": k, "seq": 2, "op": "U", "a": "p", "b": "q"} for k in range(4)]],
        [
            [
                {"k": 0, "seq": 3, "op": "U", "a": None, "b": "x"},  # partial: a carried from the view
                {"k": 1, "seq": 1, "op": "U", "a": "late", "b": None},  # older than stored: late
                {"k": 2, "seq": 3, "op": "D", "a": None, "b": None},
            ]
        ],
        [
            [
                {"k": 2, "seq": 2, "op": "U", "a": "dead", "b": None},  # older than the delete's tombstone
                {"k": 0, "seq": 4, "op": "U", "a": "y", "b": None},
                {"k": 4, "seq": 1, "op": "U", "a": None, "b": "n"},
            ]
        ],
    ]
    for n, files in enumerate(batches):
        write_batch(tmp_path / f"b{n}", files)
        results = [lakemerge.apply_table(t, inputs=[str(tmp_path / f"b{n}")], spark=spark) for t in (cow, log)]
        assert results[0].metrics == results[1].metrics, f"batch {n}"
        assert merged(spark, log) == read_table(cow.path, COLUMNS), f"batch {n}"
    # The first batch creates the table: there is no view to reduce.
    assert len(reduced) == (2 if size == "keys broadcast" else 0)
    assert merged(spark, log) == canonical(
        [
            {"k": 0, "seq": 4, "a": "y", "b": "x"},
            {"k": 1, "seq": 2, "a": "p", "b": "q"},
            {"k": 3, "seq": 2, "a": "p", "b": "q"},
            {"k": 4, "seq": 1, "a": None, "b": "n"},
        ]
    )


@pytest.mark.internals
def test_one_broadcast_of_a_batchs_keys_reduces_both_table_and_log(spark: Any, tmp_path: Path) -> None:
    """The merged view of a batch's keys reads table and log each reduced to those keys by a
    broadcast semi-join, and without adaptive execution (a tuned batch's) both use one broadcast of
    the keys. (With it, Spark 4.1 broadcasts them twice: at SF10, 1.3-1.5 s each for 1.5 M keys.)"""
    from pyspark.sql import functions as F

    from lakemerge.spark.scoped import scoped_conf
    from lakemerge.table import logview as logview_module

    table = config(tmp_path, "log", write_mode="log")
    for n in range(2):
        write_batch(tmp_path / f"b{n}", [[{"k": k, "seq": n, "op": "U", "a": "p", "b": None} for k in range(4)]])
        lakemerge.apply_table(table, inputs=[str(tmp_path / f"b{n}")], spark=spark)
        if n == 0:  # the first batch is in the log: compaction makes the table
            compaction.compact(table, spark=spark)
    keys = spark.range(2).select(F.col("id").cast("int").alias("k")).cache()
    try:
        with scoped_conf(spark, {"spark.sql.adaptive.enabled": "false"}):
            view = logview_module.newest_of_keys(spark, table, keys=keys)
            assert view is not None
            assert sorted(r["k"] for r in view.collect()) == [0, 1]
            plan = view._jdf.queryExecution().executedPlan().toString()
    finally:
        keys.unpersist()
    assert plan.count("- BroadcastExchange") == 1 and plan.count("- ReusedExchange") == 1, plan


def _broadcasts(plan: str) -> list[str]:
    """The subtrees of a physical plan's text under each ``BroadcastExchange``, as text."""
    lines = plan.splitlines()
    found = []
    for i, line in enumerate(lines):
        at = line.find("BroadcastExchange")
        if at < 0 or "ReusedExchange" in line:
            continue
        below = []
        for deeper in lines[i + 1 :]:
            if len(deeper) - len(deeper.lstrip(" :+-")) <= at:
                break
            below.append(deeper)
        found.append("\n".join([line, *below]))
    return found


@pytest.mark.internals
def test_a_log_batch_broadcasts_its_keys_but_never_the_stored_rows(spark: Any, tmp_path: Path) -> None:
    """A log batch reduces table and log to its keys by broadcasting the keys; the stored rows so
    found (ranked per key: a Window) are not marked for broadcast: joined by a shuffle unless Spark's
    own size threshold says otherwise (forced through the driver, they measured slower,
    bench/RESULTS.md, "A log batch's stored rows"). The threshold is off here, these tables being tiny."""
    from lakemerge.batch import plan as plan_module
    from lakemerge.spark.scoped import scoped_conf

    table = config(tmp_path, "log", write_mode="log")
    rows = [{"k": k, "seq": 1, "op": "U", "a": "p", "b": None} for k in range(6)]
    write_batch(tmp_path / "b0", [rows])
    lakemerge.apply_table(table, inputs=[str(tmp_path / "b0")], spark=spark)
    compaction.compact(table, spark=spark)
    write_batch(tmp_path / "b1", [[{**r, "seq": 2} for r in rows[:3]]])
    lakemerge.apply_table(table, inputs=[str(tmp_path / "b1")], spark=spark)
    write_batch(tmp_path / "b2", [[{"k": 1, "seq": 3, "op": "D", "a": None, "b": None}]])
    with scoped_conf(spark, {"spark.sql.autoBroadcastJoinThreshold": "-1"}):
        plan = plan_module.plan_batch(table, spark=spark, inputs=[str(tmp_path / "b2")])
        assert isinstance(plan, plan_module.BatchPlan)
        try:
            assert plan.small and plan.keyed
            text = plan.classified._jdf.queryExecution().executedPlan().toString()
            assert plan.metrics.deleted == 1
        finally:
            plan.release()
    broadcasts = _broadcasts(text)
    assert broadcasts, text
    assert not [b for b in broadcasts if "Window" in b], text


def test_a_compaction_failing_after_the_fold_changes_nothing_the_view_returns(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = config(tmp_path, "log", write_mode="log")
    rows = [{"k": k, "seq": 1, "op": "U", "a": "p", "b": None} for k in range(4)]
    write_batch(tmp_path / "b0", [rows])
    lakemerge.apply_table(log, inputs=[str(tmp_path / "b0")], spark=spark)
    write_batch(
        tmp_path / "b1",
        [[{"k": 0, "seq": 2, "op": "D", "a": None, "b": None}, {"k": 1, "seq": 2, "op": "U", "a": None, "b": "q"}]],
    )
    lakemerge.apply_table(log, inputs=[str(tmp_path / "b1")], spark=spark)
    before = merged(spark, log)
    assert before == canonical(
        [
            {"k": 1, "seq": 2, "a": "p", "b": "q"},
            {"k": 2, "seq": 1, "a": "p", "b": None},
            {"k": 3, "seq": 1, "a": "p", "b": None},
        ]
    )

    def crash(*args: object, **kwargs: object) -> int:
        assert merged(spark, log) == before, "between fold and cleanup the view is unchanged"
        raise RuntimeError("killed")

    assert log.tombstones  # (the tombstones move right after the fold: the crash happens there)
    with monkeypatch.context() as patched:
        patched.setattr(compaction, "_move_tombstones", crash)
        with pytest.raises(RuntimeError, match="killed"):
            compaction.compact(log, spark=spark)
    assert merged(spark, log) == before
    again = compaction.compact(log, spark=spark)
    assert again.log_rows_folded == 0 and again.log_rows_deleted == 6, "the rerun only cleans the log"
    assert merged(spark, log) == before == read_table(log.path, COLUMNS)
    # exactly once over table + log: the same files again are skipped
    repeat = lakemerge.apply_table(log, inputs=[str(tmp_path / "b1")], spark=spark)
    assert repeat.version is None and len(repeat.skipped_files) == 1
    # a late update older than the delete (tombstone) cannot bring k=0 back
    write_batch(tmp_path / "b2", [[{"k": 0, "seq": 1, "op": "U", "a": "z", "b": None}]])
    late = lakemerge.apply_table(log, inputs=[str(tmp_path / "b2")], spark=spark)
    assert late.metrics.late == 1 and merged(spark, log) == before
    view = lakemerge.register_view(spark, log)
    assert spark.sql(f"SELECT count(*) FROM {view}").collect()[0][0] == 3
    with pytest.raises(lakemerge.ConfigError, match="log"):
        lakemerge.rollback(log.path, to_version=0, reapply=False, spark=spark)
    assert lakemerge.vacuum(log, spark=spark).table == "log"


def test_a_log_table_keeps_its_tombstones_in_the_log_until_compaction_moves_them(spark: Any, tmp_path: Path) -> None:
    """A log table's deletes (of stored keys and of absent ones) are rows of its log, committed with
    their batch: no second commit to a tombstone table per batch. Compaction moves them to the
    tombstone table, confirmed and dated by their batch's commit, before it empties the log; they
    keep rejecting older records throughout, and vacuum expires them by the delete's date."""
    from lakemerge.table import ledger, tombstones
    from lakemerge.table import logview as log_mode

    table = config(tmp_path, "log", write_mode="log", tombstone_retention_days=1)
    before = [{"k": k, "seq": 1, "op": "U", "a": "p", "b": None} for k in range(3)]
    deletes = [{"k": 0, "seq": 5, "op": "D", "a": None, "b": None}, {"k": 9, "seq": 5, "op": "D", "a": None, "b": None}]
    late = [{"k": 0, "seq": 3, "op": "U", "a": "old", "b": None}, {"k": 9, "seq": 3, "op": "U", "a": "old", "b": None}]
    for n, rows in enumerate([before, deletes]):
        write_batch(tmp_path / f"b{n}", [rows])
        result = lakemerge.apply_table(table, inputs=[str(tmp_path / f"b{n}")], spark=spark)
    assert (result.metrics.deleted, result.metrics.deletes_absent, result.metrics.tombstones_written) == (1, 1, 2)
    assert not deltalake.DeltaTable.is_deltatable(table.tombstone_table), "no tombstone table written per batch"
    logged = deltalake.DeltaTable(table.log_table).to_pyarrow_table().to_pylist()
    assert sorted((r["k"], r["seq"], r[log_mode.LOG_OP]) for r in logged if r["_lm_batch"] == 2) == [
        (0, 5, "D"),
        (9, 5, "D"),
    ]
    view = merged(spark, table)
    write_batch(tmp_path / "b2", [late])
    assert lakemerge.apply_table(table, inputs=[str(tmp_path / "b2")], spark=spark).metrics.late == 2
    assert merged(spark, table) == view

    compacted = compaction.compact(table, spark=spark)
    assert compacted.tombstones_moved == 2
    assert (
        compaction._move_tombstones(  # a rerun moves nothing twice
            spark, table, spark.read.format("delta").load(table.log_table), upto=3
        )
        == 0
    )
    assert not [r for r in deltalake.DeltaTable(table.log_table).to_pyarrow_table().to_pylist()]
    committed = {
        record["txn_version"]: int(row["ts_ms"])
        for row in ledger.history_rows(spark, table.log_table)
        if (record := ledger.parse_record(row["userMetadata"]))
    }
    moved = deltalake.DeltaTable(table.tombstone_table).to_pyarrow_table().to_pylist()
    assert sorted((g["k"], g["seq"], g[tombstones.BATCH], g[tombstones.CONFIRMED]) for g in moved) == [
        (0, 5, 2, True),
        (9, 5, 2, True),
    ]
    assert {g[tombstones.WRITTEN_AT] for g in moved} == {committed[2]}, "dated by the delete's batch commit"
    write_batch(tmp_path / "b3", [late])
    assert lakemerge.apply_table(table, inputs=[str(tmp_path / "b3")], spark=spark).metrics.late == 2
    assert merged(spark, table) == view == canonical(before[1:])

    lakemerge.vacuum(table, spark=spark, now_ms=committed[2] + 2 * 86_400_000)
    write_batch(tmp_path / "b4", [late])
    assert lakemerge.apply_table(table, inputs=[str(tmp_path / "b4")], spark=spark).metrics.inserted == 2


def test_automatic_compaction_after_n_batches(spark: Any, tmp_path: Path) -> None:
    log = config(tmp_path, "log", write_mode="log", compact_after_batches=2, clustering="zorder")
    for n in range(2):
        write_batch(tmp_path / f"b{n}", [[{"k": n, "seq": 1, "op": "U", "a": "p", "b": None}]])
        result = lakemerge.apply_table(log, inputs=[str(tmp_path / f"b{n}")], spark=spark)
        assert (result.compaction is not None) == (n == 1)
    assert result.compaction is not None and result.compaction.log_rows_folded == 2
    assert read_table(log.path, COLUMNS) == merged(spark, log)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"write_mode": "log", "history": "scd2"}, "cannot be combined with history"),
        ({"clustering": "liquid", "partition_by": ("a",)}, "liquid"),
        ({"compact_after_log_rows": 5}, "needs write_mode"),
        ({"write_mode": "merge"}, "write_mode"),
    ],
)
def test_mode_config_errors(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(lakemerge.ConfigError, match=message):
        validate(
            lakemerge.TableConfig,
            {"name": "t", "path": str(tmp_path / "t"), "key": "k", "sequence": "seq", "feed": {"location": ["x"]}}
            | extra,
            source=None,
        )


def test_cli_compact(spark: Any, tmp_path: Path) -> None:
    from lakemerge.cli.app import app

    (tmp_path / "in").mkdir()
    write_batch(tmp_path / "in", [[{"k": 1, "seq": 1, "op": "U", "a": "p", "b": None}]])
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        f'[tables.t]\npath = "{tmp_path / "t"}"\nkey = "k"\nsequence = "seq"\nwrite_mode = "log"\n'
        f'[tables.t.feed]\nlocation = ["{tmp_path / "in"}"]\nheader = true\nop_column = "op"\n'
        'schema = "k INT, seq BIGINT, op STRING, a STRING, b STRING"\n'
    )
    runner = CliRunner()
    assert runner.invoke(app, ["apply", str(pipeline), "--json"]).exit_code == 0
    done = runner.invoke(app, ["compact", str(pipeline), "-t", "t", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["tables"][0]["log_rows_folded"] == 1


def test_an_update_marks_rows_in_a_deletion_vector_instead_of_rewriting_the_file(spark: Any, tmp_path: Path) -> None:
    dv = config(tmp_path, "dv", write_mode="deletion_vectors")
    oracle = Oracle(key=("k",), seq="seq", op="op", partial=("a", "b"))
    base = [{"k": k, "seq": 1, "op": "U", "a": f"a{k}", "b": "x"} for k in range(20)]
    changes = [
        {"k": 1, "seq": 2, "op": "U", "a": "new", "b": None},
        {"k": 3, "seq": 2, "op": "D", "a": None, "b": None},
    ]
    for n, rows in enumerate([base, changes]):
        oracle.apply([rows])
        write_batch(tmp_path / "in" / f"b{n}", [rows])
        result = lakemerge.apply_table(dv, spark=spark)
        assert read_dv(dv.path) == canonical(oracle.rows())
    assert result.files_removed == 0, "the stored file is marked, not rewritten"
    assert live_deletion_vectors(dv.path) >= 1
    compaction.compact(dv, spark=spark)
    assert live_deletion_vectors(dv.path) == 0
    rows = canonical([r.asDict() for r in spark.read.format("delta").load(dv.path).collect()])
    assert rows == read_dv(dv.path) == canonical(oracle.rows())
