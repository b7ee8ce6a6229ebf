"""A landing zone read as a stream of files (``source = "files"``): each micro-batch's files are
applied as file batches, exactly once across restarts of the stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

import lakemerge
from lakemerge.cli.app import app
from tests.helpers import read_table, write_lines

HEADER = "id,seq,op,v"


def pipeline(root: Path, *, limit: int | None = None) -> Path:
    path = root / "p.toml"
    extra = f"max_files_per_batch = {limit}\n" if limit else ""
    path.write_text(
        f'[tables.t]\npath = "lake/t"\nkey = "id"\nsequence = "seq"\n{extra}'
        '[tables.t.feed]\nlocation = "landing"\nheader = true\nop_column = "op"\ntypes = { id = "int", seq = "int" }\n'
        '[tables.t.stream]\nsource = "files"\ncheckpoint = "checkpoints/t"\n'
    )
    return path


def test_files_arriving_between_runs_are_applied_once_each(spark: Any, tmp_path: Path) -> None:
    config = lakemerge.load_pipeline(pipeline(tmp_path, limit=1))
    write_lines(tmp_path / "landing" / "a.csv", [HEADER, "1,1,I,a", "2,1,I,b"])
    write_lines(tmp_path / "landing" / "b.csv", [HEADER, "1,2,U,a2"])
    first = lakemerge.stream(config, spark=spark)
    assert [len(r.files) for r in first] == [1, 1], "the table's batch limit holds within a micro-batch"
    assert read_table(tmp_path / "lake" / "t", ["id", "v"]) == [{"id": 1, "v": "a2"}, {"id": 2, "v": "b"}]
    assert lakemerge.stream(config, spark=spark) == [], "nothing new: the checkpoint knows what was read"
    write_lines(tmp_path / "landing" / "sub" / "c.csv", [HEADER, "2,2,D,"])
    later = lakemerge.stream(config, spark=spark)
    assert [Path(f.path).name for r in later for f in r.files] == ["c.csv"]
    assert read_table(tmp_path / "lake" / "t", ["id", "v"]) == [{"id": 1, "v": "a2"}]


def test_a_file_applied_by_a_run_meanwhile_is_not_applied_again(spark: Any, tmp_path: Path) -> None:
    path = pipeline(tmp_path)
    write_lines(tmp_path / "landing" / "a.csv", [HEADER, "1,1,I,a"])
    assert [r.version for r in lakemerge.run(path, spark=spark)] == [0]
    result = CliRunner().invoke(app, ["stream", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"batches": []}
    assert len(lakemerge.history(str(tmp_path / "lake" / "t"), spark=spark)) == 1


def test_files_named_with_glob_characters_are_applied_by_their_names(spark: Any, tmp_path: Path) -> None:
    """The source reports each file by its real name; each is then listed as itself alone, however
    its name or folder reads as a pattern (``o[2].csv`` would match ``o2.csv``, ``*`` every file)."""
    config = lakemerge.load_pipeline(pipeline(tmp_path))
    names = ["d[1] {x}/o[2].csv", "d[1] {x}/o2.csv", "d[1] {x}/o*.csv", "п?\\ #%20/a b.csv"]
    for n, name in enumerate(names):
        write_lines(tmp_path / "landing" / name, [HEADER, f"{n},1,I,{n}", f"9,1,U,{n}"])
    [result] = lakemerge.stream(config, spark=spark)
    expected = sorted(f"file:{tmp_path / 'landing' / name}" for name in names)
    assert [f.path for f in result.files] == expected
    assert result.metrics.rows_read == 2 * len(names), "each file read once"
    last = names.index(max(names))  # (the last in file order wins key 9)
    rows = [{"id": n, "v": str(n)} for n in range(len(names))] + [{"id": 9, "v": str(last)}]
    assert read_table(tmp_path / "lake" / "t", ["id", "v"]) == rows
    assert lakemerge.stream(config, spark=spark) == []
