"""Every input or configuration mistake a new user makes gets one line naming what is at fault,
the documented exit code (2 configuration, 3 input), and never an internal error; unusual input
that is not a mistake works."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakemerge.cli.app import app
from tests.helpers import read_table, write_lines

runner = CliRunner()
HEADER = "id,seq,op,brand"


def pipeline(
    root: Path, table: str = "", feed: str = "", schema: str | None = "id INT, seq BIGINT, op STRING, brand STRING"
) -> Path:
    declared = f'schema = "{schema}"\n' if schema else 'types = { id = "int", seq = "bigint" }\n'
    path = root / "p.toml"
    path.write_text(
        f'[tables.t]\npath = "table"\nkey = "id"\nsequence = "seq"\n{table}\n'
        f'[tables.t.feed]\nlocation = "landing"\nformat = "csv"\nheader = true\n{declared}op_column = "op"\n{feed}\n'
    )
    return path


def latin1(root: Path) -> Path:
    (root / "landing").mkdir(parents=True)
    (root / "landing" / "a.csv").write_bytes(f"{HEADER}\n1,1,U,caf\xe9\n".encode("latin-1"))
    return pipeline(root)


def poison_header(root: Path) -> Path:
    write_lines(root / "landing" / "a.csv", ["id,seq,op,id", "1,1,U,x"])
    return pipeline(root, schema=None)


def unknown_track_column(root: Path) -> Path:
    write_lines(root / "landing" / "a.csv", [HEADER, "1,1,U,x"])
    return pipeline(root, table='history = "scd2"\ntrack_columns = ["town"]')


def unknown_track_column_without_schema(root: Path) -> Path:
    write_lines(root / "landing" / "a.csv", [HEADER, "1,1,U,x"])
    return pipeline(root, table='history = "scd2"\ntrack_columns = ["town"]', schema=None)


def unknown_dropped_column(root: Path) -> Path:
    write_lines(root / "landing" / "a.csv", [HEADER, "1,1,U,x"])
    return pipeline(root, feed='drop_columns = ["zip"]', schema=None)


def bad_schema_type(root: Path) -> Path:
    write_lines(root / "landing" / "a.csv", [HEADER, "1,1,U,x"])
    return pipeline(root, schema="id INT, seq BIGINT, op STRING, brand STRNG")


def bad_value(root: Path) -> Path:
    write_lines(root / "landing" / "a.csv", [HEADER, "x,1,U,x"])
    return pipeline(root)


MISTAKES: list[tuple[Callable[[Path], Path], int, list[str]]] = [
    (latin1, 3, ["a.csv, row 2", "invalid UTF-8: byte E9"]),
    (poison_header, 3, ["a.csv", "duplicate column names", "lakemerge skip"]),
    (unknown_track_column, 2, ["tables.t.track_columns", "'town'"]),
    (unknown_track_column_without_schema, 2, ["tables.t.track_columns", "'town'"]),
    (unknown_dropped_column, 2, ["tables.t.feed.drop_columns", "'zip'"]),
    (bad_schema_type, 2, ["not a valid Spark DDL schema", "STRNG"]),
    (bad_value, 3, ["a.csv, row 2", "cannot convert column 'id' value 'x' to int", "lakemerge skip"]),
]


@pytest.mark.parametrize(("make", "code", "words"), MISTAKES, ids=[m[0].__name__ for m in MISTAKES])
def test_a_mistake_is_one_line_with_its_exit_code(
    spark: object, tmp_path: Path, make: Callable[[Path], Path], code: int, words: list[str]
) -> None:
    path = make(tmp_path)
    result = runner.invoke(app, ["run", str(path)])
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert all(word in lines[0] for word in words), lines[0]
    assert "internal error" not in result.output
    assert not (tmp_path / "table").exists() or not read_table(tmp_path / "table")


def test_unusual_input_that_is_no_mistake_works(spark: object, tmp_path: Path) -> None:
    write_lines(tmp_path / "landing" / "a.csv", ['id,seq,op,"first name","x; DROP TABLE t",`q`', "1,1,U,ann,y,z"])
    write_lines(tmp_path / "landing" / "b:c.csv", ['id,seq,op,"first name","x; DROP TABLE t",`q`', "2,1,U,bob,y,z"])
    write_lines(tmp_path / "landing" / "_hidden.csv", ["id,seq,op", "3,1,U"])
    os.symlink(tmp_path / "gone.csv", tmp_path / "landing" / "dangling.csv")
    path = pipeline(tmp_path, schema=None)
    # A name holding ':' is a valid file name that Hadoop's local filesystem cannot read by it: the
    # file stops the table's batches, naming it, until it is renamed or recorded as skipped.
    stopped = runner.invoke(app, ["run", str(path)])
    assert stopped.exit_code == 3, stopped.output
    assert "b:c.csv" in stopped.output and "lakemerge skip" in stopped.output and "renamed" in stopped.output
    assert not (tmp_path / "table").exists()
    (tmp_path / "landing" / "b:c.csv").rename(tmp_path / "landing" / "b_c.csv")
    result = runner.invoke(app, ["run", str(path)])
    assert result.exit_code == 0, result.output
    assert "2 entries of the landing zone not read" in result.output
    assert read_table(tmp_path / "table", ["id", "first name", "x; DROP TABLE t", "`q`"]) == [
        {"id": 1, "first name": "ann", "x; DROP TABLE t": "y", "`q`": "z"},
        {"id": 2, "first name": "bob", "x; DROP TABLE t": "y", "`q`": "z"},
    ]
    table = str(tmp_path / "table")
    for command in (["history", table], ["show", table], ["report", table, "--out", str(tmp_path / "r.html")]):
        shown = runner.invoke(app, command)
        assert shown.exit_code == 0, shown.output


def test_every_command_turns_its_failures_into_exit_codes() -> None:
    """A command without the handler would end in a traceback and exit code 1 on a user's mistake."""
    for command in app.registered_commands:
        assert command.callback is not None and hasattr(command.callback, "__wrapped__"), command.callback
