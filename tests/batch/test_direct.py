"""Copy-on-write and deletion-vector batches written without Delta's MERGE (lakemerge.write.direct):
the table the oracle says and a MERGE gives, batch after batch, partitioned or not, in a folder whose
name needs escaping; the commit a MERGE in the history with its metrics; the batches it does not
serve run the MERGE; a commit of the table's data since the batch's snapshot fails the commit, which
plans again; a write that finds other stored rows than the batch counted commits nothing."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.batch import commit as commit_module
from lakemerge.batch import plan as plan_module
from lakemerge.errors import AccountingError
from lakemerge.table import direct as direct_table
from tests.helpers import query_rows, table_columns, table_version, write_lines
from tests.oracle import Oracle

COLUMNS = ["k", "seq", "region", "v"]
SCHEMA = "k INT, seq BIGINT, op STRING, region STRING, v STRING"


def config(root: Path, name: str, mode: str, **table: Any) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name=name,
        path=str(root / name),
        key=("k",),
        sequence=("seq",),
        write_mode=mode,
        feed=lakemerge.FeedConfig(
            location=(str(root / "in"),), format="csv", header=True, schema=SCHEMA, op_column="op"
        ),
        **table,
    )


def rows_of(path: str) -> list[dict[str, Any]]:
    """The table's rows, read by delta-rs's query engine (deletion vectors applied), by key."""
    return sorted(query_rows(path, COLUMNS), key=lambda r: r["k"])


def random_batches(seed: int, count: int) -> list[list[list[dict[str, Any]]]]:
    """``count`` batches of one or two files: updates, inserts, deletes and late changes of 40 keys,
    some moving their row to another region (another partition of a partitioned table)."""
    draw = random.Random(seed)
    batches = []
    for n in range(count):
        files = []
        for _ in range(draw.randint(1, 2)):
            rows = []
            for _ in range(draw.randint(1, 12)):
                op = draw.choice("UUUD")
                region = draw.choice(["east", "west", "north"]) if op == "U" else None
                value = draw.choice([None, f"v{n}", 'é, "quoted"']) if op == "U" else None
                rows.append(
                    {"k": draw.randint(0, 39), "seq": draw.randint(0, n + 3), "op": op, "region": region, "v": value}
                )
            files.append(rows)
        batches.append(files)
    return batches


def land(folder: Path, files: list[list[dict[str, Any]]]) -> None:
    def field(value: Any) -> str:
        if value is None:
            return ""
        text = str(value)
        return '"' + text.replace('"', '""') + '"' if any(ch in text for ch in ',"') else text

    for f, rows in enumerate(files):
        lines = [",".join(field(r[c]) for c in ["k", "seq", "op", "region", "v"]) for r in rows]
        write_lines(folder / f"f_{f}.csv", ["k,seq,op,region,v", *lines])


@pytest.fixture
def counted_direct(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths of the tables each batch wrote without MERGE, in order."""
    written: list[str] = []
    original = commit_module.write_direct

    def counting(spark: Any, table: lakemerge.TableConfig, *args: Any, **kwargs: Any) -> Any:
        written.append(table.path)
        return original(spark, table, *args, **kwargs)

    monkeypatch.setattr(commit_module, "write_direct", counting)
    yield written


@pytest.mark.parametrize(
    ("mode", "partitioned", "broadcast"),
    [
        ("copy_on_write", True, "batch"),
        ("copy_on_write", False, "keys"),
        ("copy_on_write", False, "nothing"),
        ("deletion_vectors", False, "batch"),
        ("deletion_vectors", True, "keys"),
    ],
    ids=["cow-partitioned", "cow-keyed", "cow-joined", "dv", "dv-partitioned-keyed"],
)
def test_batches_give_the_oracles_table_and_what_a_merge_gives(
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    counted_direct: list[str],
    mode: str,
    partitioned: bool,
    broadcast: str,
) -> None:
    """Batches small enough to broadcast (``batch``), too big for that but with keys few enough
    (``keys``: the stored rows reduced to the batch's keys, then joined by a shuffle; the rewrite
    looks its keys up in a broadcast), or with too many keys as well (``nothing``: the rewrite joins
    each stored row with its key's whole change by a shuffle); the bounds are lowered to 0."""
    if broadcast != "batch":
        monkeypatch.setattr(plan_module, "BROADCAST_ROWS", 0)
    if broadcast == "nothing":
        monkeypatch.setattr(plan_module, "key_broadcast_rows", lambda schema, key: 0)
    root = tmp_path / "a folder, named é"
    extra: dict[str, Any] = {"partition_by": ("region",)} if partitioned else {}
    direct, merged = config(root, "direct", mode, **extra), config(root, "merged", mode, **extra)
    oracle = Oracle(key=("k",), seq="seq", op="op")
    touching = 0  # the batches that update or delete stored rows: those written without MERGE
    for n, files in enumerate(random_batches(7 if partitioned else 3, 4)):
        folder = root / f"batch_{n}"
        land(folder, files)
        counts = oracle.apply(files)
        touching += counts.updated + counts.deleted > 0
        expected = sorted(({c: r.get(c) for c in COLUMNS} for r in oracle.rows()), key=lambda r: r["k"])
        result = lakemerge.apply_table(direct, inputs=[str(folder)], spark=spark)
        spark.conf.set(direct_table.ENABLED_CONF, "false")
        try:
            reference = lakemerge.apply_table(merged, inputs=[str(folder)], spark=spark)
        finally:
            spark.conf.unset(direct_table.ENABLED_CONF)
        assert result.metrics == reference.metrics, f"batch {n}"
        assert (result.metrics.updated, result.metrics.deleted, result.metrics.inserted) == (
            counts.updated,
            counts.deleted,
            counts.inserted,
        )
        assert rows_of(direct.path) == expected == rows_of(merged.path), f"batch {n}"
    assert counted_direct.count(direct.path) == touching >= 2 and merged.path not in counted_direct
    [last] = lakemerge.history(direct.path, limit=1, spark=spark)
    assert last.operation == "MERGE" and last.batch_id is not None
    shown = last.operation_metrics
    assert int(shown["numTargetRowsUpdated"]) == last.metrics["updated"]
    assert int(shown["numTargetRowsDeleted"]) == last.metrics["deleted"]
    assert int(shown["numTargetFilesAdded"]) >= 1


def test_batches_it_does_not_serve_run_the_merge(spark: Any, tmp_path: Path, counted_direct: list[str]) -> None:
    """A batch bringing a new column, a partial update, a table with a change data feed: each
    needs what only the MERGE writes, and gets it."""
    first = [[{"k": k, "seq": 1, "op": "U", "region": "east", "v": f"a{k}"} for k in range(6)]]
    drifting = config(tmp_path, "drift", "copy_on_write")
    land(tmp_path / "b0", first)
    lakemerge.apply_table(drifting, inputs=[str(tmp_path / "b0")], spark=spark)
    write_lines(tmp_path / "b1" / "f.csv", ["k,seq,op,region,v,extra", "1,2,U,west,b1,new"])
    wider = drifting.model_copy(
        update={"feed": drifting.feed.model_copy(update={"schema_ddl": None, "types": {"k": "int", "seq": "bigint"}})}
    )
    lakemerge.apply_table(wider, inputs=[str(tmp_path / "b1")], spark=spark)
    assert {r["k"]: r.get("extra") for r in query_rows(drifting.path, table_columns(drifting.path))}[1] == "new"

    feeding = config(tmp_path, "cdf", "copy_on_write")
    lakemerge.apply_table(feeding, inputs=[str(tmp_path / "b0")], spark=spark)
    spark.sql(f"ALTER TABLE delta.`{feeding.path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    land(tmp_path / "b2", [[{"k": 2, "seq": 2, "op": "U", "region": "west", "v": "b2"}]])
    lakemerge.apply_table(feeding, inputs=[str(tmp_path / "b2")], spark=spark)
    changes = (
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 2).load(feeding.path)
    )
    assert sorted(r["_change_type"] for r in changes.collect()) == ["update_postimage", "update_preimage"]
    assert counted_direct == []


def test_a_batch_lacking_a_column_keeps_its_stored_values(
    spark: Any, tmp_path: Path, counted_direct: list[str]
) -> None:
    """A copy-on-write batch without one of the table's columns updates the others and keeps the
    stored values of that one, as a MERGE setting the batch's columns does: its rewrite joins each
    stored row with its key's change (whose keys could be broadcast: not enough here)."""
    table = config(tmp_path, "t", "copy_on_write")
    land(tmp_path / "b0", [[{"k": k, "seq": 1, "op": "U", "region": f"r{k}", "v": f"a{k}"} for k in range(5)]])
    lakemerge.apply_table(table, inputs=[str(tmp_path / "b0")], spark=spark)
    narrow = table.model_copy(
        update={"feed": table.feed.model_copy(update={"schema_ddl": "k INT, seq BIGINT, op STRING, v STRING"})}
    )
    write_lines(tmp_path / "b1" / "f.csv", ["k,seq,op,v", "1,2,U,b1", "3,2,D,", "7,2,U,b7", "2,0,U,late"])
    result = lakemerge.apply_table(narrow, inputs=[str(tmp_path / "b1")], spark=spark)
    assert (result.metrics.updated, result.metrics.deleted, result.metrics.inserted) == (1, 1, 1)
    assert counted_direct == [table.path]
    assert {r["k"]: (r["region"], r["v"]) for r in rows_of(table.path)} == {
        0: ("r0", "a0"),
        1: ("r1", "b1"),
        2: ("r2", "a2"),
        4: ("r4", "a4"),
        7: (None, "b7"),
    }


def before_commit(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> list[int]:
    """Run ``action`` once, just before the first commit without MERGE; the attempts counted."""
    original = direct_table.Direct.commit
    calls: list[int] = []

    def commit(self: direct_table.Direct, **kwargs: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            action()
        return original(self, **kwargs)

    monkeypatch.setattr(direct_table.Direct, "commit", commit)
    return calls


@pytest.mark.parametrize(("mode", "concurrent"), [("copy_on_write", "optimize"), ("deletion_vectors", "append")])
def test_a_commit_of_the_tables_data_since_the_snapshot_fails_the_commit_which_plans_again(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, concurrent: str
) -> None:
    """Between the batch's classification and its commit, another writer compacts the files the
    batch rewrites (or appends a row of a key the batch updates): Delta refuses the commit, the
    batch plans again from the new snapshot and commits once, with the other writer's work kept."""
    from delta.tables import DeltaTable

    table = config(tmp_path, "t", mode)
    first = [[{"k": k, "seq": 1, "op": "U", "region": "east", "v": f"a{k}"} for k in range(4)]]
    land(tmp_path / "b0", first)
    lakemerge.apply_table(table, inputs=[str(tmp_path / "b0")], spark=spark)
    lakemerge.apply_table(table, inputs=[str(tmp_path / "b0")], spark=spark)  # (nothing: applied)
    land(tmp_path / "b1", [[{"k": 4, "seq": 1, "op": "U", "region": "east", "v": "a4"}]])
    lakemerge.apply_table(table, inputs=[str(tmp_path / "b1")], spark=spark)  # a second data file

    def other_writer() -> None:
        if concurrent == "optimize":
            DeltaTable.forPath(spark, table.path).optimize().executeCompaction()
        else:
            row = spark.createDataFrame([(9, 1, "west", "other")], "k INT, seq BIGINT, region STRING, v STRING")
            row.write.format("delta").mode("append").save(table.path)

    attempts = before_commit(monkeypatch, other_writer)
    land(
        tmp_path / "b2",
        [
            [
                {"k": 1, "seq": 2, "op": "U", "region": "east", "v": "b1"},
                {"k": 4, "seq": 2, "op": "D", "region": None, "v": None},
            ]
        ],
    )
    result = lakemerge.apply_table(table, inputs=[str(tmp_path / "b2")], spark=spark)
    assert len(attempts) == 2 and (result.metrics.updated, result.metrics.deleted) == (1, 1)
    expected = {0: "a0", 1: "b1", 2: "a2", 3: "a3"} | ({9: "other"} if concurrent == "append" else {})
    assert {r["k"]: r["v"] for r in rows_of(table.path)} == expected


def test_a_write_that_finds_other_stored_rows_than_counted_commits_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = config(tmp_path, "t", "copy_on_write")
    land(tmp_path / "b0", [[{"k": k, "seq": 1, "op": "U", "region": "east", "v": f"a{k}"} for k in range(4)]])
    lakemerge.apply_table(table, inputs=[str(tmp_path / "b0")], spark=spark)
    land(tmp_path / "b1", [[{"k": 4, "seq": 1, "op": "U", "region": "east", "v": "a4"}]])
    lakemerge.apply_table(table, inputs=[str(tmp_path / "b1")], spark=spark)
    version = table_version(table.path)
    original = commit_module._direct

    def forgetting(spark: Any, plan: Any) -> Any:  # one of the files the batch's stored rows are in, left out
        known = original(spark, plan)
        assert known is not None and len(known.touched) == 2
        return type(known)(known.snapshot, known.touched[1:], known.inserted, known.updated, known.deleted)

    monkeypatch.setattr(commit_module, "_direct", forgetting)
    land(
        tmp_path / "b2",
        [
            [
                {"k": 0, "seq": 2, "op": "U", "region": "east", "v": "b0"},
                {"k": 4, "seq": 2, "op": "U", "region": "east", "v": "b4"},
            ]
        ],
    )
    with pytest.raises(AccountingError, match=r"the write found .* where the batch counted"):
        lakemerge.apply_table(table, inputs=[str(tmp_path / "b2")], spark=spark)
    assert table_version(table.path) == version
    monkeypatch.undo()
    result = lakemerge.apply_table(table, inputs=[str(tmp_path / "b2")], spark=spark)
    assert result.metrics.updated == 2
    assert {r["k"]: r["v"] for r in rows_of(table.path)} == {0: "b0", 1: "a1", 2: "a2", 3: "a3", 4: "b4"}


def actions_of(seq: Any) -> list[dict[str, Any]]:
    """Delta actions (a Scala sequence) as JSON, their statistics parsed and their times left out."""
    found = []
    each = seq.iterator()
    while each.hasNext():
        [(kind, fields)] = json.loads(str(each.next().json())).items()
        fields.pop("deletionTimestamp", None)
        if fields.get("stats"):
            fields["stats"] = json.loads(fields["stats"])
        found.append({"kind": kind, **fields})
    return sorted(found, key=lambda a: (a["kind"], a["path"]))


def test_deletion_vectors_are_committed_as_delta_commits_them(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted_direct: list[str]
) -> None:
    """The files a deletion-vector batch marks, built from the statistics the version's checksum
    lists, are the actions Delta's own helper builds by joining them with the log's file state:
    a first vector for a file, a file's vector replaced by a larger one, a file whose rows all go
    (removed), each file's bounds marked wide and its counts kept."""
    opened: list[direct_table.Direct] = []
    compared: list[dict[str, int]] = []
    original_open, original_marked = direct_table.open_on, direct_table._marked

    def opening(*args: Any, **kwargs: Any) -> Any:
        opened.append(original_open(*args, **kwargs))
        return opened[-1]

    def marking(session: Any, files: Any) -> Any:
        ours = original_marked(session, files)
        assert ours is not None, "a file's statistics were not widened in place"
        jvm = session.sparkContext._jvm
        txn = opened[-1].txn
        prefix = jvm.org.apache.spark.sql.delta.stats.StatsCollectionUtils.getDataSkippingStringPrefixLength(
            session._jsparkSession, txn.metadata()
        )
        helper = jvm.org.apache.spark.sql.delta.commands.DMLWithDeletionVectorsHelper
        deltas = helper.processUnmodifiedData(session._jsparkSession, files, txn.snapshot(), prefix)
        assert actions_of(ours[0]) == actions_of(deltas._1())
        figures = deltas._2().iterator()
        while figures.hasNext():
            entry = figures.next()
            assert ours[1][str(entry._1())] == int(entry._2()), str(entry._1())
        compared.append(ours[1])
        return ours

    monkeypatch.setattr(direct_table, "open_on", opening)
    monkeypatch.setattr(direct_table, "_marked", marking)
    table = config(tmp_path, "t", "deletion_vectors")
    row = lambda k, seq, op="U": {"k": k, "seq": seq, "op": op, "region": "east", "v": f"v{k}.{seq}"}  # noqa: E731
    batches = [
        [[row(k, 1) for k in range(6)]],
        [[row(k, 1) for k in range(6, 9)]],
        [[row(1, 2), row(2, 2, "D")]],  # the first file's first vector
        [[row(3, 3), *[row(k, 3, "D") for k in range(6, 9)], row(1, 3)]],  # grown; the second and third go
    ]
    oracle = Oracle(key=("k",), seq="seq", op="op")
    for n, files in enumerate(batches):
        land(tmp_path / f"b{n}", files)
        oracle.apply(files)
        lakemerge.apply_table(table, inputs=[str(tmp_path / f"b{n}")], spark=spark)
    assert counted_direct == [table.path, table.path]
    assert rows_of(table.path) == sorted(({c: r.get(c) for c in COLUMNS} for r in oracle.rows()), key=lambda r: r["k"])
    made = {name: sum(f[name] for f in compared) for name in compared[0]}
    assert made["numDeletionVectorsAdded"] >= 1 and made["numDeletionVectorsUpdated"] >= 1
    assert made["numRemovedFiles"] >= 2 and made["numModifiedRows"] == 7


@pytest.mark.parametrize(
    ("stats", "deleted", "in_place"),
    [
        (None, 0, False),
        ('{"minValues": {"k": 1}}', 0, False),
        ('{"numRecords": 10, "nullCount": {"v": 10}, "tightBounds": true}', 0, True),
        ('{"numRecords": 10, "nullCount": {"v": 8}}', 2, True),
        ('{"numRecords": 10, "nullCount": {"v": 8}, "tightBounds": false}', 2, True),
        ('{"numRecords": 10, "nullCount": {"v": 3, "s": {"x": 0}}, "tightBounds": true}', 2, True),
        ('{"numRecords": 10, "nullCount": {"v": 3, "s": {"x": 8}}, "tightBounds": true}', 2, False),
    ],
)
def test_statistics_widen_in_place_unless_a_null_count_must_change(
    stats: str | None, deleted: int, in_place: bool
) -> None:
    """Without a record count, or where a column is all null under tight bounds while a vector
    already hides rows (Delta then stores the physical count), Delta's own helper is used."""
    assert direct_table.widened_in_place(stats, deleted) is in_place


def test_more_files_than_the_bound_are_marked_by_deltas_own_helper(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted_direct: list[str]
) -> None:
    """Beyond :data:`MARKED_FILES` touched files (lowered to 0 here), Delta's own helper builds the
    actions from the log's file state: the same table."""
    built: list[object] = []
    original = direct_table._marked

    def marking(session: Any, files: Any) -> Any:
        built.append(original(session, files))
        return built[-1]

    monkeypatch.setattr(direct_table, "MARKED_FILES", 0)
    monkeypatch.setattr(direct_table, "_marked", marking)
    table = config(tmp_path, "t", "deletion_vectors")
    oracle = Oracle(key=("k",), seq="seq", op="op")
    for n, files in enumerate(random_batches(5, 3)):
        land(tmp_path / f"b{n}", files)
        oracle.apply(files)
        lakemerge.apply_table(table, inputs=[str(tmp_path / f"b{n}")], spark=spark)
    assert built and all(b is None for b in built) and counted_direct
    assert rows_of(table.path) == sorted(({c: r.get(c) for c in COLUMNS} for r in oracle.rows()), key=lambda r: r["k"])


def test_a_small_deletion_vector_batch_writes_its_new_rows_to_one_file(spark: Any, tmp_path: Path) -> None:
    """Its updates' new rows and its inserts go to one file, whose rows later batches then mark
    in one vector, not one file per task of the batch."""
    table = config(tmp_path, "t", "deletion_vectors")
    land(tmp_path / "b0", [[{"k": k, "seq": 1, "op": "U", "region": "east", "v": f"a{k}"} for k in range(40)]])
    lakemerge.apply_table(table, inputs=[str(tmp_path / "b0")], spark=spark)
    changes = [{"k": k, "seq": 2, "op": "U", "region": "west", "v": f"b{k}"} for k in range(0, 80, 2)]
    land(tmp_path / "b1", [changes[:20], changes[20:]])
    result = lakemerge.apply_table(table, inputs=[str(tmp_path / "b1")], spark=spark)
    assert (result.metrics.updated, result.metrics.inserted, result.files_added) == (20, 20, 1)


@pytest.mark.parametrize("failing", ["new rows", "rewrite"])
def test_a_big_batch_whose_new_rows_or_rewrite_fail_commits_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted_direct: list[str], failing: str
) -> None:
    """A batch too big to broadcast writes its new rows in a job of their own, in the tail of the
    touched files' rewrite: a new row breaking the table's CHECK constraint fails the one, a touched
    file gone from the storage the other. The batch fails with that error, commits nothing, and
    applies once the cause is gone (the row fixed)."""
    monkeypatch.setattr(plan_module, "BROADCAST_ROWS", 0)
    tails: list[int] = []
    in_tail = direct_table.in_tail
    monkeypatch.setattr(direct_table, "in_tail", lambda *a: (tails.append(1), in_tail(*a))[1])
    table = config(tmp_path, "t", "copy_on_write")
    land(tmp_path / "b0", [[{"k": k, "seq": 1, "op": "U", "region": "east", "v": f"a{k}"} for k in range(6)]])
    lakemerge.apply_table(table, inputs=[str(tmp_path / "b0")], spark=spark)
    spark.sql(f"ALTER TABLE delta.`{table.path}` ADD CONSTRAINT v_known CHECK (v IS NULL OR v <> 'bad')")
    version, before = table_version(table.path), rows_of(table.path)

    def changes(value: str) -> list[list[dict[str, Any]]]:
        return [
            [
                {"k": 1, "seq": 2, "op": "U", "region": "east", "v": "b1"},
                {"k": 2, "seq": 2, "op": "D", "region": None, "v": None},
                {"k": 9, "seq": 2, "op": "U", "region": "west", "v": value},
            ]
        ]

    if failing == "rewrite":
        original = commit_module._direct

        def losing(spark: Any, plan: Any) -> Any:  # the touched file deleted after the batch found it
            known = original(spark, plan)
            Path(known.touched[0].removeprefix("file:")).unlink()
            return known

        monkeypatch.setattr(commit_module, "_direct", losing)
        land(tmp_path / "b1", changes("n9"))
        with pytest.raises(Exception, match=r"(?i)file.*(not exist|not found)"):
            lakemerge.apply_table(table, inputs=[str(tmp_path / "b1")], spark=spark)
        assert table_version(table.path) == version and tails == [1]
        return
    land(tmp_path / "b1", changes("bad"))
    with pytest.raises(Exception, match="v_known"):
        lakemerge.apply_table(table, inputs=[str(tmp_path / "b1")], spark=spark)
    assert table_version(table.path) == version and rows_of(table.path) == before
    land(tmp_path / "b2", changes("n9"))
    result = lakemerge.apply_table(table, inputs=[str(tmp_path / "b2")], spark=spark)
    assert (result.metrics.updated, result.metrics.deleted, result.metrics.inserted) == (1, 1, 1)
    assert counted_direct == [table.path, table.path] and tails == [1, 1]
    expected = {0: "a0", 1: "b1", 3: "a3", 4: "a4", 5: "a5", 9: "n9"}
    assert {r["k"]: r["v"] for r in rows_of(table.path)} == expected
