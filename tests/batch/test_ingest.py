"""Ingestion: batches with limits, the run loop, archiving, dry runs, races between writers, rollback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import lakemerge
from lakemerge.batch.commit import Superseded, commit_batch
from lakemerge.batch.plan import plan_batch
from lakemerge.batch.run import run_tables
from lakemerge.batch.select import NothingPending
from lakemerge.cli.app import app
from tests.helpers import read_table, table_version, write_lines

HEADER = "id,part,seq,op,v"
SCHEMA = "id INT, part STRING, seq BIGINT, op STRING, v STRING"
runner = CliRunner()


def cfg(tmp_path: Path, **table: object) -> lakemerge.TableConfig:
    feed = {
        "location": (str(tmp_path / "landing"),),
        "format": "csv",
        "header": True,
        "schema": SCHEMA,
        "op_column": "op",
    }
    feed.update(table.pop("feed", {}))  # type: ignore[call-overload]
    return lakemerge.TableConfig(
        name="t",
        path=str(tmp_path / "table"),
        key=("id",),
        sequence=("seq",),
        feed=lakemerge.FeedConfig(**feed),
        **table,
    )  # type: ignore[arg-type]


def drop(tmp_path: Path, name: str, rows: list[str]) -> Path:
    return write_lines(tmp_path / "landing" / name, [HEADER, *rows])


def values(t: lakemerge.TableConfig) -> dict[object, object]:
    return {r["id"]: r["v"] for r in read_table(t.path, ["id", "v"])}


def test_run_applies_pending_files_in_order_within_batch_limits(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, max_files_per_batch=2)
    drop(tmp_path, "f1.csv", ["1,p,1,I,a"])
    drop(tmp_path, "f2.csv", ["1,p,1,U,b"])  # equal sequence: the later file wins, in a later batch too
    drop(tmp_path, "f3.csv", ["2,p,1,I,c"])
    results = run_tables([t], spark=spark)
    assert [r.version for r in results] == [0, 1]
    assert [[Path(f.path).name for f in r.files] for r in results] == [["f1.csv", "f2.csv"], ["f3.csv"]]
    assert values(t) == {1: "b", 2: "c"}
    assert run_tables([t], spark=spark) == []


def test_byte_limit_still_takes_one_file(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, max_bytes_per_batch=1)
    drop(tmp_path, "f1.csv", ["1,p,1,I,a"])
    drop(tmp_path, "f2.csv", ["2,p,1,I,b"])
    assert len(run_tables([t], spark=spark)) == 2


def test_archive_after_commit_and_after_a_crash_in_between(spark: object, tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    t = cfg(tmp_path, feed={"archive": str(archive)})
    drop(tmp_path, "f1.csv", ["1,p,1,I,a"])
    # A crash between commit and archive: the batch committed, its file is still in the landing zone.
    assert lakemerge.apply_table(t, spark=spark).version == 0
    drop(tmp_path, "f2.csv", ["2,p,1,I,b"])
    results = run_tables([t], spark=spark)
    assert [r.version for r in results] == [1]  # f1 is recognised as applied, never applied twice
    assert sorted(p.name for p in archive.iterdir()) == ["f1.csv", "f2.csv"]
    assert list((tmp_path / "landing").iterdir()) == []
    # A recurring name with new content is new when the feed archives.
    drop(tmp_path, "f1.csv", ["1,p,2,U,a2"])
    assert [r.version for r in run_tables([t], spark=spark)] == [2]
    assert sorted(p.name for p in archive.iterdir()) == ["f1.csv", "f1.csv.1", "f2.csv"]
    assert values(t) == {1: "a2", 2: "b"}


def test_dry_run_reports_what_the_real_run_then_does(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, partition_by=("part",))
    drop(tmp_path, "f0.csv", [f"{i},p{i % 4},1,I,v{i}" for i in range(40)])
    run_tables([t], spark=spark)
    spark.sql(f"OPTIMIZE delta.`{t.path}`").collect()  # type: ignore[attr-defined]
    drop(
        tmp_path,
        "f1.csv",
        ["1,p1,2,U,x", "2,p3,2,U,moved", "5,p1,0,U,late", "6,p2,2,D,", "99,p9,1,I,new", "98,p0,1,D,", "1,p1,3,U,y"],
    )
    version = table_version(t.path)
    planned = lakemerge.apply_table(t, spark=spark, dry_run=True)
    assert planned.dry_run and planned.version is None
    assert table_version(t.path) == version  # the table and the ingest record are untouched
    real = lakemerge.apply_table(t, spark=spark)
    assert real.version == version + 1
    assert planned.metrics == real.metrics
    assert (real.metrics.updated, real.metrics.deleted, real.metrics.inserted, real.metrics.late) == (2, 1, 1, 1)
    assert planned.files_touched == real.files_removed == 2  # stored p1 and p2, one file each
    assert planned.partitions_touched == 4  # p1, p2 and p3 (old and new of the move), and the new p9


def test_a_writer_that_loses_the_race_commits_nothing(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path)
    drop(tmp_path, "f1.csv", ["1,p,1,I,a"])
    lakemerge.apply_table(t, spark=spark)
    drop(tmp_path, "f2.csv", ["1,p,2,U,b", "2,p,1,I,c"])
    first = plan_batch(t, spark=spark)
    second = plan_batch(t, spark=spark)  # a concurrent writer planned the same batch
    assert not isinstance(first, NothingPending)
    assert not isinstance(second, NothingPending)
    try:
        assert commit_batch(first, spark=spark).version == 1
        with pytest.raises(Superseded):
            commit_batch(second, spark=spark)
    finally:
        first.release()
        second.release()
    assert table_version(t.path) == 1
    history = lakemerge.history(t.path, spark=spark)
    assert sum(1 for c in history for f in c.files if f.path.endswith("f2.csv")) == 1
    # Planned again, the loser finds nothing pending.
    assert lakemerge.apply_table(t, spark=spark).version is None


def test_the_ledger_reads_only_the_commits_made_since_its_last_walk(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch walks the table's history for its ledger; in one process the walk is kept and the
    next batch reads only the newer commits, so a batch's cost does not grow with the table's age.
    The kept walk equals a walk from the start; a table recreated at the path is walked again."""
    import shutil

    from lakemerge.table import ledger

    t = cfg(tmp_path)
    first = None
    for n in range(1, 4):
        drop(tmp_path, f"f{n}.csv", [f"{n},p,{n},U,v{n}"])
        result = run_tables([t], spark=spark)[0]
        first = first or result
    spark.sql(f"ALTER TABLE delta.`{t.path}` SET TBLPROPERTIES ('someone.else' = 'x')")  # not a batch
    asked: list[int | None] = []
    walk = ledger.history_rows

    def history_rows(spark: object, path: str, limit: int | None = None) -> list[object]:
        if path == t.path:
            asked.append(limit)
        return walk(spark, path, limit)  # type: ignore[arg-type]

    monkeypatch.setattr(ledger, "history_rows", history_rows)
    read: list[tuple[int, int]] = []
    commits = ledger.commit_rows

    def commit_rows(spark: object, path: str, first: int, last: int) -> list[dict[str, object]] | None:
        if path == t.path:
            read.append((first, last))
        return commits(spark, path, first, last)  # type: ignore[arg-type]

    monkeypatch.setattr(ledger, "commit_rows", commit_rows)
    drop(tmp_path, "f4.csv", ["4,p,4,U,v4"])
    assert [r.version for r in run_tables([t], spark=spark)] == [4]
    # The walk kept from the last run (which looked for more files after f3's commit) ends at
    # version 2: only the ALTER is new. Its commit file is read, then the batch's own (to find its
    # version), then the batch's own again by the next walk (the run looks for more pending files).
    assert read == [(3, 3), (4, 4), (4, 4)] and asked == [], "one commit file per read, Delta's history never"
    assert commits(spark, t.path, 0, 4) == [  # type: ignore[arg-type]
        {
            k: (dict(r[k] or {}) if k == "operationMetrics" else r[k])
            for k in ("version", "userMetadata", "operationMetrics")
        }
        for r in reversed(walk(spark, t.path))  # type: ignore[arg-type]
    ], "the commit files say what Delta's history says"
    assert commits(spark, t.path, 4, 5) is None, "a version not yet committed: read the history instead"

    # Without the commit files (a log Delta keeps elsewhere), the history is read: the new commits
    # and a few spare rows, then the newest few for the batch's own commit.
    monkeypatch.setattr(ledger, "commit_rows", lambda *args: None)
    spark.sql(f"ALTER TABLE delta.`{t.path}` SET TBLPROPERTIES ('someone.else' = 'y')")
    drop(tmp_path, "f4b.csv", ["4,p,5,U,v4b"])
    assert [r.version for r in run_tables([t], spark=spark)] == [6]
    assert asked == [1 + ledger._HISTORY_SLACK, ledger._FIND_FIRST, 1 + ledger._HISTORY_SLACK]
    monkeypatch.setattr(ledger, "commit_rows", commits)
    assert first is not None
    found = ledger.find_commit(spark, t.path, first.batch_id)
    assert found is not None and found[0] == 0, "an older commit is found further back"
    assert ledger.find_commit(spark, t.path, "no-such-batch") is None
    kept = ledger.ledger(spark, t.path)
    monkeypatch.setattr(ledger, "_WALKS", {})
    assert ledger.ledger(spark, t.path) == kept, "the kept walk is the walk from the start"
    assert sorted(Path(p).name for p in kept.files) == ["f1.csv", "f2.csv", "f3.csv", "f4.csv", "f4b.csv"]
    assert kept.last_batch == 5 and len(kept.batch_ids) == 5

    shutil.rmtree(t.path)  # another table at the same path: nothing is applied to it yet
    asked.clear()
    assert [r.version for r in run_tables([t], spark=spark)] == [0]
    assert values(t) == {1: "v1", 2: "v2", 3: "v3", 4: "v4b"}
    assert None in asked, "the new table (another Delta table id) is walked from its start"
    drop(tmp_path, "f5.csv", ["5,p,5,U,v5"])
    assert [r.version for r in run_tables([t], spark=spark)] == [1]


@pytest.mark.parametrize("reapply", [True, False])
def test_rollback_with_an_explicit_choice_about_files(spark: object, tmp_path: Path, reapply: bool) -> None:
    t = cfg(tmp_path)
    drop(tmp_path, "f1.csv", ["1,p,1,I,a"])
    run_tables([t], spark=spark)
    drop(tmp_path, "f2.csv", ["1,p,2,U,b", "2,p,1,I,c"])
    run_tables([t], spark=spark)
    flag = "--reapply-files" if reapply else "--keep-files-applied"
    result = runner.invoke(app, ["rollback", t.path, "--to-version", "0", flag, "--json"])
    assert result.exit_code == 0, result.output
    done = json.loads(result.output)
    assert (done["from_version"], done["to_version"], done["version"]) == (1, 0, 2)
    assert values(t) == {1: "a"}
    again = run_tables([t], spark=spark)
    if reapply:
        assert done["pending_again"][0].endswith("f2.csv")
        assert [r.version for r in again] == [3] and values(t) == {1: "b", 2: "c"}
    else:
        assert done["pending_again"] == [] and again == [] and values(t) == {1: "a"}


def test_rollback_errors(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path)
    drop(tmp_path, "f1.csv", ["1,p,1,I,a"])
    run_tables([t], spark=spark)
    result = runner.invoke(app, ["rollback", t.path, "--to-version", "0"])
    assert result.exit_code == 2 and "--reapply-files" in result.output
    result = runner.invoke(app, ["rollback", t.path, "--to-version", "7", "--keep-files-applied"])
    assert result.exit_code == 2 and "not in the history" in result.output
    result = runner.invoke(app, ["rollback", t.path, "--to-timestamp", "2001-01-01T00:00:00", "--keep-files-applied"])
    assert result.exit_code == 2 and "no version" in result.output


def test_cli_run_and_dry_run(spark: object, tmp_path: Path) -> None:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        '[tables.t]\npath = "table"\nkey = "id"\nsequence = "seq"\nmax_files_per_batch = 1\n'
        f'[tables.t.feed]\nlocation = "landing"\nformat = "csv"\nheader = true\nschema = "{SCHEMA}"\n'
        'op_column = "op"\n'
    )
    drop(tmp_path, "a.csv", ["1,p,1,I,a"])
    drop(tmp_path, "b.csv", ["2,p,1,I,b"])
    result = runner.invoke(app, ["run", str(pipeline), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    planned = json.loads(result.output)["batches"]
    assert len(planned) == 1 and planned[0]["dry_run"] and planned[0]["metrics"]["inserted"] == 1
    assert not (tmp_path / "table").exists()
    result = runner.invoke(app, ["run", str(pipeline), "--json"])
    assert result.exit_code == 0, result.output
    assert [b["version"] for b in json.loads(result.output)["batches"]] == [0, 1]
    result = runner.invoke(app, ["run", str(pipeline)])
    assert result.exit_code == 0 and "nothing to apply" in result.output


def test_accounting_mismatch_aborts_before_commit(spark: object, tmp_path: Path) -> None:
    import dataclasses

    t = cfg(tmp_path)
    drop(tmp_path, "f1.csv", ["1,p,1,I,a", "1,p,2,U,b"])
    plan = plan_batch(t, spark=spark)
    assert not isinstance(plan, NothingPending)
    try:
        assert plan.metrics.rows_read == 2 and plan.metrics.superseded == 1
        wrong = dataclasses.replace(plan, metrics=dataclasses.replace(plan.metrics, superseded=0))
        with pytest.raises(lakemerge.AccountingError, match="do not add up"):
            commit_batch(wrong, spark=spark)
    finally:
        plan.release()
    assert not Path(t.path).exists()


def test_negative_counts_are_an_accounting_error_even_when_the_sums_agree() -> None:
    from lakemerge.batch.counts import check_accounting

    balanced = lakemerge.BatchMetrics(rows_read=1, changes=2, inserted=2, superseded=-1)
    with pytest.raises(lakemerge.AccountingError, match="negative batch counts \\(superseded\\)"):
        check_accounting(balanced)
    check_accounting(lakemerge.BatchMetrics(rows_read=2, changes=1, inserted=1, superseded=1))


def test_gives_up_after_the_configured_attempts(spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = cfg(tmp_path, commit_attempts=2)
    drop(tmp_path, "f1.csv", ["1,p,1,I,a"])
    calls = []

    def always_loses(plan: object, *, spark: object) -> None:
        calls.append(plan)
        raise Superseded()

    monkeypatch.setattr(lakemerge.batch.attempts, "commit_batch", always_loses)
    monkeypatch.setattr(lakemerge.batch.attempts.time, "sleep", lambda seconds: None)
    with pytest.raises(lakemerge.ConflictError, match="gave up after 2 attempts") as info:
        lakemerge.apply_table(t, spark=spark)
    assert info.value.exit_code == 4 and len(calls) == 2
    assert not Path(t.path).exists()


def test_unreadable_landing_zone(spark: object, tmp_path: Path) -> None:
    t = cfg(tmp_path, feed={"location": ("nosuchfs://bucket/landing",)})
    with pytest.raises(lakemerge.InputError, match="cannot list input path") as info:
        lakemerge.apply_table(t, spark=spark)
    assert "nosuchfs://bucket/landing" in str(info.value) and "\n" not in str(info.value)


def test_file_names_with_spaces_keep_their_order_and_are_archived(spark: object, tmp_path: Path) -> None:
    """Spark spells such files percent-encoded in ``_metadata.file_path``; the file order (which
    breaks ties of equal sequences) and archiving must still know each row's file. The location is
    given as ``file:///`` while Hadoop lists ``file:/``."""
    archive = tmp_path / "done"
    t = cfg(tmp_path, feed={"location": (f"file://{tmp_path / 'landing'}",), "archive": str(archive)})
    drop(tmp_path, "a 1%.csv", ["2,p,1,I,x", "1,p,1,I,first"])
    drop(tmp_path, "b 2.csv", ["1,p,1,U,second"])  # equal sequence: the later file wins, whatever the row
    [result] = run_tables([t], spark=spark)
    assert result.metrics.superseded == 1
    assert values(t) == {1: "second", 2: "x"}
    assert sorted(p.name for p in archive.iterdir()) == ["a 1%.csv", "b 2.csv"]
    bad = cfg(tmp_path / "bad")
    drop(tmp_path / "bad", "c 3.csv", ["1,p,1,I,ok", "2,p,not-a-number,I,bad"])
    with pytest.raises(lakemerge.InputError, match=r"c 3\.csv.*row 3|row 3.*c 3\.csv"):
        run_tables([bad], spark=spark)


def test_a_writer_whose_batch_a_concurrent_writer_took_carries_on(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Overlapping schedulers are normal: the writer that lost its batch number plans again and
    applies what is still pending; with one attempt allowed, it still never gives up."""
    import lakemerge.batch.attempts as attempts

    t = cfg(tmp_path, max_files_per_batch=1, commit_attempts=1)
    for i in range(1, 4):
        drop(tmp_path, f"f{i}.csv", [f"{i},p,{i},I,v{i}", f"9,p,{i},U,from-f{i}"])
    real = attempts.commit_batch
    raced: list[object] = []

    def racing(plan: object, *, spark: object) -> object:
        if not raced:  # another writer commits the same batch number first
            raced.append("racing")
            raced[0] = lakemerge.apply_table(t, spark=spark)
        return real(plan, spark=spark)  # type: ignore[arg-type]

    monkeypatch.setattr(attempts, "commit_batch", racing)
    mine = run_tables([t], spark=spark)
    [theirs] = raced
    assert theirs.version == 0  # type: ignore[attr-defined]
    assert [r.version for r in mine] == [1, 2]
    applied = [f.path for c in lakemerge.history(t.path, spark=spark) for f in c.files]
    assert sorted(Path(p).name for p in applied) == ["f1.csv", "f2.csv", "f3.csv"]
    assert values(t) == {1: "v1", 2: "v2", 3: "v3", 9: "from-f3"}


def test_giving_up_says_why_and_json_reports_what_was_committed(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lakemerge.batch.attempts as attempts
    from lakemerge.errors import ConflictError

    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        '[tables.t]\npath = "table"\nkey = "id"\nsequence = "seq"\nmax_files_per_batch = 1\ncommit_attempts = 2\n'
        f'[tables.t.feed]\nlocation = "landing"\nformat = "csv"\nheader = true\nschema = "{SCHEMA}"\n'
        'op_column = "op"\n'
    )
    drop(tmp_path, "f1.csv", ["1,p,1,I,a"])
    drop(tmp_path, "f2.csv", ["2,p,1,I,b"])
    real = attempts.commit_batch

    def conflicting(plan: object, *, spark: object) -> object:
        if plan.txn_version == 1:  # type: ignore[attr-defined]
            return real(plan, spark=spark)  # type: ignore[arg-type]
        raise ConflictError("a concurrent writer committed to the table first (Delta's ConcurrentAppendException)")

    monkeypatch.setattr(attempts, "commit_batch", conflicting)
    monkeypatch.setattr(attempts.time, "sleep", lambda seconds: None)
    result = runner.invoke(app, ["run", str(pipeline), "--json"])
    assert result.exit_code == 4
    document = json.loads(result.stdout)
    message = document["error"]["message"]
    assert "gave up after 2 attempts" in message and "ConcurrentAppendException" in message
    assert "()" not in message and "streaming" not in message
    assert [b["version"] for b in document["batches"]] == [0]
    assert [Path(f["path"]).name for f in document["batches"][0]["files"]] == ["f1.csv"]
