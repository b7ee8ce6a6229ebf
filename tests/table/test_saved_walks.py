"""The ledger walk saved beside its table (lakemerge.table.saved_walks): a process's first walk
reads only the commits after it and gives the ledger a walk from the start gives; files applied by
commits that Delta's log cleanup removed stay applied; a saved walk that cannot be read, or that
belongs to another table once at the path, is passed over."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.batch.run import run_tables
from lakemerge.table import ledger, saved_walks
from tests.helpers import read_table, write_lines

HEADER = "id,seq,op,v"


def cfg(tmp_path: Path) -> lakemerge.TableConfig:
    feed = lakemerge.FeedConfig(
        location=(str(tmp_path / "landing"),), format="csv", header=True, op_column="op",
        types={"id": "int", "seq": "bigint"},
    )  # fmt: skip
    return lakemerge.TableConfig(
        name="t", path=str(tmp_path / "table"), key=("id",), sequence="seq", feed=feed, max_files_per_batch=1
    )


def land(tmp_path: Path, n: int) -> None:
    write_lines(tmp_path / "landing" / f"f{n}.csv", [HEADER, f"{n},{n},U,v{n}"])


def saved_files(t: lakemerge.TableConfig) -> list[str]:
    folder = Path(t.path) / saved_walks.FOLDER
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing kept from other tests, a walk saved every other commit."""
    monkeypatch.setattr(ledger, "_WALKS", {})
    monkeypatch.setattr(ledger, "_SAVED", {})
    monkeypatch.setattr(saved_walks, "EVERY", 2)


def _walk_from_the_start(spark: Any, path: str, monkeypatch: pytest.MonkeyPatch) -> ledger.Ledger:
    with monkeypatch.context() as patched:
        patched.setattr(ledger, "_WALKS", {})
        patched.setattr(ledger, "_SAVED", {"skip": ("", 0, 0.0)})
        patched.setattr(saved_walks, "load", lambda *args: None)
        patched.setattr(saved_walks, "save", lambda *args: True)
        return ledger.ledger(spark, path)


def test_a_first_walk_reads_only_the_commits_after_the_saved_walk(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = cfg(tmp_path)
    for n in range(1, 6):
        land(tmp_path, n)
    assert [r.version for r in run_tables([t], spark=spark)] == list(range(5))
    names = saved_files(t)
    assert len(names) == saved_walks.KEPT and all(n.endswith(".json.gz") for n in names), names
    newest = int(names[-1].split("-", 1)[0])
    assert 5 - 1 - newest < saved_walks.EVERY

    read: list[tuple[int, int]] = []
    original = ledger.commit_rows
    monkeypatch.setattr(ledger, "commit_rows", lambda s, p, a, b: (read.append((a, b)), original(s, p, a, b))[1])
    monkeypatch.setattr(ledger, "history_rows", lambda *args, **kw: pytest.fail("the history was walked"))
    monkeypatch.setattr(ledger, "_WALKS", {})  # (another process)
    found = ledger.ledger(spark, t.path)
    assert read in ([], [(newest + 1, 4)]), "only the commits after the saved walk"
    monkeypatch.undo()
    monkeypatch.setattr(saved_walks, "EVERY", 2)
    assert found == _walk_from_the_start(spark, t.path, monkeypatch)
    assert sorted(Path(p).name for p in found.files) == [f"f{n}.csv" for n in range(1, 6)]


def test_files_applied_by_commits_the_log_cleanup_removed_stay_applied(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No archive: f1 stays in the landing zone after its commit left the history."""
    t = cfg(tmp_path)
    land(tmp_path, 1)
    run_tables([t], spark=spark)
    spark.sql(
        f"ALTER TABLE delta.`{t.path}` SET TBLPROPERTIES "
        "('delta.checkpointInterval' = '2', 'delta.logRetentionDuration' = 'interval 7 days')"
    )
    log = Path(t.path) / "_delta_log"
    month_ago = time.time() - 40 * 86_400
    for n in range(2, 6):
        land(tmp_path, n)
        assert len(run_tables([t], spark=spark)) == 1
        for entry in log.iterdir():  # (every commit so far made long ago)
            os.utime(entry, (month_ago, month_ago))
    history = [int(r["version"]) for r in spark.sql(f"DESCRIBE HISTORY delta.`{t.path}`").collect()]
    assert min(history) > 0, f"the log cleanup removed no commit: {history}"
    assert Path(tmp_path / "landing" / "f1.csv").is_file()

    cleaned = _walk_from_the_start(spark, t.path, monkeypatch)
    assert not any(p.endswith("f1.csv") for p in cleaned.files), "the history alone forgot f1"
    monkeypatch.setattr(ledger, "_WALKS", {})  # (another process)
    assert any(p.endswith("f1.csv") for p in ledger.ledger(spark, t.path).files)
    spark.sql(f"UPDATE delta.`{t.path}` SET v = 'changed' WHERE id = 1")
    assert run_tables([t], spark=spark) == [], "f1 is not applied again"
    assert {r["id"]: r["v"] for r in read_table(t.path, ["id", "v"])}[1] == "changed"


def test_a_saved_walk_that_cannot_be_read_is_passed_over(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = cfg(tmp_path)
    for n in range(1, 4):
        land(tmp_path, n)
    run_tables([t], spark=spark)
    folder = Path(t.path) / saved_walks.FOLDER
    for name in saved_files(t):
        (folder / name).write_bytes((folder / name).read_bytes()[:20])  # (written in part)
    monkeypatch.setattr(ledger, "_WALKS", {})
    assert ledger.ledger(spark, t.path) == _walk_from_the_start(spark, t.path, monkeypatch)


def test_a_walk_saved_for_another_table_at_the_path_is_passed_over(spark: Any, tmp_path: Path) -> None:
    t = cfg(tmp_path)
    for n in range(1, 4):
        land(tmp_path, n)
    run_tables([t], spark=spark)
    before = saved_files(t)
    for entry in Path(t.path).iterdir():  # (the table deleted, its saved walks left behind)
        if entry.name != saved_walks.FOLDER:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    ledger._WALKS.clear()
    assert [r.version for r in run_tables([t], spark=spark)] == [0, 1, 2], "every file applied to the new table"
    after = saved_files(t)
    assert after and not set(before) & set(after), "the other table's walks are deleted"
