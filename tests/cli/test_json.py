"""Every command prints, with ``--json``, exactly its result type's document, and accepts ``--json``,
``-v`` and ``--master``; a failure with ``--json`` is an error document too."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from lakemerge import documents as docs
from lakemerge import results
from lakemerge.cli.app import app
from tests.helpers import write_lines

runner = CliRunner()
SCHEMA = "id INT, seq BIGINT, op STRING, v STRING"


def conforms(value: Any, kind: Any, where: str = "$") -> list[str]:
    """Where ``value`` (decoded JSON) differs from the shape of the type ``kind``."""
    origin = typing.get_origin(kind)
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        hints = typing.get_type_hints(kind)
        problems = [f"{where}: keys {sorted(value)} != {sorted(hints)}"] if set(value) != set(hints) else []
        for name, hint in hints.items():
            if name in value:
                problems += conforms(value[name], hint, f"{where}.{name}")
        return problems
    if origin in (types.UnionType, typing.Union):
        options = [conforms(value, option, where) for option in typing.get_args(kind)]
        return [] if any(not found for found in options) else min(options, key=len)
    if kind is type(None):
        return [] if value is None else [f"{where}: not null"]
    if origin is tuple or origin is list:
        args = [a for a in typing.get_args(kind) if a is not Ellipsis]
        if not isinstance(value, list):
            return [f"{where}: not an array"]
        return [p for i, item in enumerate(value) for p in conforms(item, args[0], f"{where}[{i}]")] if args else []
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        _, inner = typing.get_args(kind)
        return [p for key, item in value.items() for p in conforms(item, inner, f"{where}.{key}")]
    expected = {str: str, int: int, float: (int, float), bool: bool}.get(kind)
    if expected is not None and not isinstance(value, expected):
        return [f"{where}: {value!r} is not {kind.__name__}"]
    return []


@pytest.fixture()
def pipeline(tmp_path: Path) -> Path:
    write_lines(tmp_path / "landing" / "f1.csv", ["id,seq,op,v", "1,1,I,a", "2,1,I,b", "x,1,I,bad"])
    path = tmp_path / "p.toml"
    path.write_text(
        '[tables.json_t]\npath = "lake/t"\nkey = "id"\nsequence = "seq"\nmax_bad_rows = 5\n'
        f'[tables.json_t.feed]\nlocation = "landing"\nheader = true\nschema = "{SCHEMA}"\nop_column = "op"\n'
        '[tables.json_u]\npath = "lake/u"\nkey = "id"\nsequence = "seq"\n'
        f'[tables.json_u.feed]\nlocation = "landing_u"\nheader = true\nschema = "{SCHEMA}"\nop_column = "op"\n'
        '[tables.json_u.stream]\nsource = "files"\ncheckpoint = "checkpoints/u"\n'
        '[groups.g]\ntables = ["json_u"]\nstate = "lake/_groups/g"\n'
    )
    write_lines(tmp_path / "landing_u" / "u1.csv", ["id,seq,op,v", "1,1,I,a"])
    return path


def invoke(*args: str) -> Any:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_command_prints_its_result_types_document(spark: object, tmp_path: Path, pipeline: Path) -> None:
    table = str(tmp_path / "lake" / "t")
    documents: dict[str, tuple[Any, Any]] = {
        "apply": (invoke("apply", str(pipeline), "-t", "json_t"), docs.Batches),
    }
    write_lines(tmp_path / "landing" / "f2.csv", ["id,seq,op,v", "1,2,U,a2"])
    documents["run"] = (invoke("run", str(pipeline)), docs.Batches)
    documents["snapshot"] = (invoke("snapshot", str(pipeline)), docs.GroupPoints)
    write_lines(tmp_path / "landing_u" / "u2.csv", ["id,seq,op,v", "2,1,I,b"])
    documents["stream"] = (invoke("stream", str(pipeline), "-t", "json_u"), docs.Batches)
    poison = write_lines(tmp_path / "landing" / "f3.csv", ["id,seq,op,v", "1,3,U,never"])
    skip = ("skip", str(pipeline), str(poison), "-t", "json_t", "--reason", "cut short")
    documents["skip"] = (invoke(*skip), results.SkipResult)
    documents["history"] = (invoke("history", table), docs.History)
    documents["show"] = (invoke("show", table), results.TableSummary)
    documents["quarantine"] = (invoke("quarantine", table), docs.Quarantine)
    documents["report"] = (invoke("report", table, "--out", str(tmp_path / "r.html")), results.ReportResult)
    try:
        documents["register"] = (invoke("register", str(pipeline)), docs.Registrations)
    finally:
        for name in ("json_t", "json_u"):
            spark.sql(f"DROP TABLE IF EXISTS default.{name}")  # type: ignore[attr-defined]
    documents["compact"] = (invoke("compact", str(pipeline), "-t", "json_t"), docs.Compactions)
    documents["conf"] = (invoke("conf", str(pipeline)), docs.SparkConf)
    documents["rollback"] = (
        invoke("rollback", table, "--to-version", "0", "--keep-files-applied"),
        results.RollbackResult,
    )
    documents["vacuum"] = (invoke("vacuum", str(pipeline), "-t", "json_t"), docs.Vacuums)
    documents["demo"] = (invoke("demo", "--dir", str(tmp_path / "demo")), results.DemoResult)
    commands = {c.name for c in typer.main.get_command(app).commands.values()}  # type: ignore[attr-defined]
    assert set(documents) == commands, "every command's document is checked"
    problems = {name: conforms(doc, kind) for name, (doc, kind) in documents.items()}
    assert {name: found for name, found in problems.items() if found} == {}
    assert documents["apply"][0]["batches"][0]["metrics"]["rows_bad"] == 1
    assert len(documents["quarantine"][0]["rows"]) == 1
    assert documents["snapshot"][0]["groups"]["g"]["versions"] == {"json_u": 0}
    assert [len(b["files"]) for b in documents["stream"][0]["batches"]] == [1], "u1.csv was applied by run"
    assert [b["table"] for b in documents["run"][0]["batches"]] == ["json_u", "json_t"]
    skipped = [c for c in documents["history"][0]["commits"] if c["skip_reason"]]
    assert [(c["skip_reason"], [Path(f["path"]).name for f in c["files"]]) for c in skipped] == [
        ("cut short", ["f3.csv"])
    ]


def test_every_command_accepts_json_verbose_and_master() -> None:
    group = typer.main.get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        options = {opt for param in command.params for opt in param.opts}
        assert {"--json", "-v", "--verbose", "--master"} <= options, name


def test_a_failure_with_json_prints_an_error_document(tmp_path: Path) -> None:
    result = runner.invoke(app, ["history", str(tmp_path / "nothing"), "--json"])
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert result.stderr.startswith("error: ")
    assert document == {"error": {"kind": "TableError", "message": document["error"]["message"], "exit_code": 2}}
    assert "no Delta table" in document["error"]["message"]
