"""A file no batch can apply never blocks the files after it silently: the error names it and says
what to do, and ``lakemerge skip`` records it as skipped by an operator, visible in the history and
the report. Entries of a landing zone that are not read are counted and reported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import lakemerge
from lakemerge.batch.run import run_tables
from lakemerge.cli.app import app
from tests.helpers import read_log_view, read_table, write_lines

SCHEMA = "id INT, seq BIGINT, op STRING, v STRING"
runner = CliRunner()


def pipeline(tmp_path: Path, *, schema: bool = True, mode: str = "copy_on_write") -> Path:
    path = tmp_path / "p.toml"
    declared = f'schema = "{SCHEMA}"\n' if schema else 'types = { id = "int", seq = "bigint" }\n'
    path.write_text(
        f'[tables.t]\npath = "table"\nkey = "id"\nsequence = "seq"\nwrite_mode = "{mode}"\n'
        f'[tables.t.feed]\nlocation = "landing"\nformat = "csv"\nheader = true\n{declared}op_column = "op"\n'
    )
    return path


def land(tmp_path: Path, name: str, rows: list[str], header: str = "id,seq,op,v") -> Path:
    return write_lines(tmp_path / "landing" / name, [header, *rows])


def test_a_poison_file_is_named_with_what_to_do_then_skipped(spark: object, tmp_path: Path) -> None:
    path = pipeline(tmp_path, schema=False)
    land(tmp_path, "f1.csv", ["1,1,U,a"])
    table = lakemerge.load_pipeline(path).table("t")
    run_tables([table], spark=spark)
    poison = land(tmp_path, "f2.csv", ["2,1,U,b"], header="id,seq,op,ID")  # a header that cannot be used
    land(tmp_path, "f3.csv", ["3,1,U,c"])
    for _ in range(2):  # every run fails the same way, naming the file and what to do
        with pytest.raises(lakemerge.InputError) as info:
            run_tables([table], spark=spark)
        assert info.value.path is not None and info.value.path.endswith("f2.csv")
        assert "duplicate column names" in str(info.value) and "lakemerge skip" in str(info.value)

    result = runner.invoke(app, ["skip", str(path), "--table", "t", str(poison), "--reason", "export cut short"])
    assert result.exit_code == 0, result.output
    [done] = run_tables([table], spark=spark)
    assert [Path(f.path).name for f in done.files] == ["f3.csv"]
    assert read_table(table.path, ["id", "v"]) == [{"id": 1, "v": "a"}, {"id": 3, "v": "c"}]
    commits = lakemerge.history(table.path, spark=spark)
    [skip] = [c for c in commits if c.skip_reason]
    assert skip.skip_reason == "export cut short" and skip.skipped_by and skip.metrics["rows_read"] == 0
    assert [Path(f.path).name for f in skip.files] == ["f2.csv"]
    shown = runner.invoke(app, ["history", table.path])
    assert "SKIP" in shown.output and "skipped by" in shown.output and "export cut short" in shown.output
    report = lakemerge.report(table.path, tmp_path / "r.html", spark=spark)
    assert "export cut short" in Path(report.out).read_text()
    assert run_tables([table], spark=spark) == []  # never applied later

    again = runner.invoke(app, ["skip", str(path), "-t", "t", str(poison), "--reason", "twice"])
    assert again.exit_code == 3 and "already applied (or skipped)" in again.output
    elsewhere = write_lines(tmp_path / "other" / "x.csv", ["id"])
    wrong = runner.invoke(app, ["skip", str(path), "-t", "t", str(elsewhere), "--reason", "r"])
    assert wrong.exit_code == 2 and "not a file of the feeds of table 't'" in wrong.output
    no_reason = runner.invoke(app, ["skip", str(path), "-t", "t", str(poison), "--reason", " "])
    assert no_reason.exit_code == 2 and "reason" in no_reason.output


@pytest.mark.parametrize("mode", ["copy_on_write", "log"])
def test_a_first_file_that_is_poison_on_a_table_not_created_yet(spark: object, tmp_path: Path, mode: str) -> None:
    path = pipeline(tmp_path, mode=mode)
    poison = tmp_path / "landing" / "f1.csv.gz"
    poison.parent.mkdir(parents=True)
    poison.write_bytes(b"\x1f\x8b not gzip after all")  # a file no reader can read
    land(tmp_path, "f2.csv", ["2,1,U,b"])
    table = lakemerge.load_pipeline(path).table("t")
    with pytest.raises(lakemerge.InputError, match="lakemerge skip") as info:
        run_tables([table], spark=spark)
    assert str(info.value.path).endswith("f1.csv.gz")
    skipped = lakemerge.skip(path, table="t", files=[str(poison)], reason="wrong export", spark=spark)
    assert skipped.version == 0 and skipped.reason == "wrong export"
    [done] = run_tables([table], spark=spark)
    assert [Path(f.path).name for f in done.files] == ["f2.csv"]
    columns = ["id", "seq", "v"]
    rows = read_log_view(table.path, table.log_table, "id", columns) if mode == "log" else read_table(table.path)
    assert rows == [{"id": 2, "seq": 1, "v": "b"}]


def test_skip_without_a_table_or_declared_columns_says_what_to_do(spark: object, tmp_path: Path) -> None:
    path = pipeline(tmp_path, schema=False)
    poison = land(tmp_path, "f1.csv", ["1,1,U,a"])
    result = runner.invoke(app, ["skip", str(path), "-t", "t", str(poison), "--reason", "r"])
    assert result.exit_code == 2 and "declare no columns" in result.output
    assert not (tmp_path / "table").exists()


def test_hidden_and_unreadable_entries_are_counted_and_reported(spark: object, tmp_path: Path) -> None:
    path = pipeline(tmp_path)
    land(tmp_path, "f1.csv", ["1,1,U,a"])
    land(tmp_path, "_x.csv", ["2,1,U,b"])
    land(tmp_path, ".x.csv", ["3,1,U,c"])
    land(tmp_path, "_hidden/f9.csv", ["5,1,U,e"])
    os.symlink(tmp_path / "gone.csv", tmp_path / "landing" / "dangling.csv")
    result = runner.invoke(app, ["run", str(path)])
    assert result.exit_code == 0, result.output
    assert "4 entries of the landing zone not read" in result.output
    table = lakemerge.load_pipeline(path).table("t")
    nothing = lakemerge.apply_table(table, spark=spark)
    reasons = {Path(e.path).name: e.reason for e in nothing.ignored_entries}
    assert sorted(reasons) == [".x.csv", "_hidden", "_x.csv", "dangling.csv"], "a hidden folder once, as itself"
    assert reasons["_x.csv"].startswith("hidden") and reasons[".x.csv"].startswith("hidden")
    assert "dangling symbolic link" in reasons["dangling.csv"]
    assert read_table(table.path, ["id"]) == [{"id": 1}]


def test_a_file_named_with_a_colon_is_read_where_it_can_be_and_else_named_until_renamed_or_skipped(
    spark: object, tmp_path: Path
) -> None:
    """A ':' (valid in object keys, common in timestamps) is never a reason to pass a file over: in
    a folder's name Hadoop's local filesystem reads it; in a file's own name it cannot (it cannot
    name the file's checksum file), so every run fails naming the file and saying to rename it or
    skip it, and ``lakemerge skip`` takes it by that name."""
    path = pipeline(tmp_path)
    land(tmp_path, "2024-01-01T10:00:00/f1.csv", ["1,1,U,a"])
    table = lakemerge.load_pipeline(path).table("t")
    [done] = run_tables([table], spark=spark)
    assert [f.path for f in done.files] == [f"file:{tmp_path}/landing/2024-01-01T10:00:00/f1.csv"]
    poison = land(tmp_path, "2024-01-02T10:00:00.csv", ["2,1,U,b"])
    land(tmp_path, "z.csv", ["3,1,U,c"])
    for _ in range(2):
        result = runner.invoke(app, ["run", str(path)])
        assert result.exit_code == 3, result.output
        assert f"file:{poison}" in result.output and "renamed (its name holds ':'" in result.output
        assert "lakemerge skip" in result.output and "Traceback" not in result.output
    assert read_table(table.path, ["id"]) == [{"id": 1}]

    skipped = runner.invoke(app, ["skip", str(path), "-t", "t", str(poison), "--reason", "unreadable name"])
    assert skipped.exit_code == 0, skipped.output
    [done] = run_tables([table], spark=spark)
    assert [Path(f.path).name for f in done.files] == ["z.csv"]
    assert read_table(table.path, ["id"]) == [{"id": 1}, {"id": 3}]
    assert lakemerge.apply_table(table, spark=spark).ignored_entries == ()
