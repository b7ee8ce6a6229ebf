"""The README's and the manual's examples work: their pipeline files validate and run, their files
and commands, run in order in a fresh folder, print what the page shows, their Python runs, and
every command explains itself."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakemerge.cli.app import app
from tests.helpers import read_table

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
#: Pages whose examples run in order, as a reader follows them.
WALKTHROUGHS = ["README.md", "docs/tutorial.md"]
#: Where the pages say the reader works.
HOME = "/home/me/tutorial"
_BLOCK = re.compile(r'^```(?P<lang>\w*)(?: title="(?P<title>[^"]+)")?\n(?P<body>.*?)^```', flags=re.S | re.M)
#: What changes from run to run: seconds, commit times, file sizes.
_VARYING = [
    (re.compile(r"in \d+(?:\.\d+)? s\b"), "in N s"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d │ (WRITE|MERGE|SET)"), r"TIME │ \1"),
    (re.compile(r"\d+ bytes"), "N bytes"),
]


@dataclass(frozen=True)
class Step:
    """A file the page has the reader write, or a command and what it prints."""

    file: str | None
    text: str
    command: list[str] | None = None


def steps(page: str) -> list[Step]:
    """The files (code blocks with a title) and ``$ lakemerge ...`` commands (console blocks) of a
    page, in order; a console block's lines after a command are its output."""
    found: list[Step] = []
    for block in _BLOCK.finditer(page):
        if block["title"]:
            found.append(Step(file=block["title"], text=block["body"]))
        elif block["lang"] == "console":
            for chunk in re.split(r"^\$ ", block["body"], flags=re.M)[1:]:
                line, _, shown = chunk.partition("\n")
                found.append(Step(file=None, text=shown, command=shlex.split(line)))
    return found


def _normal(text: str, home: Path) -> list[str]:
    """The lines of ``text``, sorted (a table's sample rows come in no set order), what varies
    between runs masked."""
    text = text.replace(str(home), HOME)
    for pattern, mask in _VARYING:
        text = pattern.sub(mask, text)
    return sorted(line.rstrip() for line in text.strip("\n").splitlines())


@pytest.mark.parametrize("page", WALKTHROUGHS)
def test_the_walkthrough_runs_as_shown(
    page: str, spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walk = steps((ROOT / page).read_text())
    assert any(s.command for s in walk) and any(s.file for s in walk), f"{page} shows no files or commands"
    monkeypatch.chdir(tmp_path)
    wrong: list[str] = []
    for step in walk:
        if step.file is not None:
            target = tmp_path / step.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.text)
            continue
        assert step.command and step.command[0] == "lakemerge", step.command
        result = CliRunner().invoke(app, step.command[1:], env={"COLUMNS": "200"})
        printed = _normal(result.output, tmp_path)
        shown = _normal(step.text, tmp_path)
        failed = any(line.startswith("error:") for line in shown)
        if (result.exit_code != 0) != failed or (shown != [""] and printed != shown):
            wrong += [f"$ {shlex.join(step.command)}  (exit {result.exit_code})", *printed]
    assert wrong == [], "\n".join(wrong)


def test_the_readme_python_runs(spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's Python snippet applies its DataFrame as one batch of the walkthrough's table."""
    found = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert found, "no python block in the README"
    monkeypatch.chdir(tmp_path)
    for step in steps(README):
        if step.file is not None:
            (tmp_path / step.file).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / step.file).write_text(step.text)
    exec(compile(found[0], "README.md", "exec"), {})
    assert read_table(tmp_path / "lake" / "customers", ["id", "name", "city"]) == [
        {"id": 3, "name": "Linus", "city": "Helsinki"}
    ]
    exec(compile(found[0], "README.md", "exec"), {})  # the same source and batch id: applied once
    assert len(read_table(tmp_path / "lake" / "customers")) == 1


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
