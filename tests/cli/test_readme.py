"""The README's examples work: its pipeline file validates and runs, its Python runs, its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import lakemerge
from lakemerge.cli.app import app
from tests.helpers import read_table, write_lines

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def block(language: str) -> str:
    found = re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)
    assert found, f"no {language} block in the README"
    return str(found[0])


def test_readme_pipeline_and_python_example(spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pipeline.toml").write_text(block("toml"))
    header = "product_id,category,brand,price,inventory,updated_at,op"
    write_lines(tmp_path / "landing" / "products" / "a.csv", [header, "P1,laptop,asus,502,54,10,I"])
    write_lines(tmp_path / "landing" / "extra" / "b.csv", [header, "P1,laptop,asus,489,50,11,U", "P2,tablet,x,1,1,5,I"])
    monkeypatch.chdir(tmp_path)
    exec(compile(block("python"), "README.md", "exec"), {})
    rows = read_table(tmp_path / "lake" / "products", ["product_id", "price", "updated_at"])
    assert rows == [
        {"product_id": "P1", "price": 489, "updated_at": 11},
        {"product_id": "P2", "price": 1, "updated_at": 5},
    ]
    assert lakemerge.load_pipeline(tmp_path / "pipeline.toml").table("products").partition_by == ("category",)


COMMANDS = [str(c.name or c.callback.__name__) for c in app.registered_commands if c.callback]


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)])
def test_every_command_explains_itself(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "Usage" in result.output
    if not command:
        assert all(name in result.output for name in COMMANDS)
    # A flag takes no value, so its line shows no type.
    for line in result.output.splitlines():
        if "--help" in line or "--version" in line or "--json" in line:
            assert "<" not in line, line
