"""The README's and the tutorial's examples work: their files and commands, run in order in a
fresh folder, print what the page shows, their Python runs, and every command explains itself
(the how-to guides run in tests/cli/test_howto.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakemerge.cli.app import app
from tests.cli.walkthrough import walk

ROOT = Path(__file__).resolve().parents[2]
#: Pages whose examples run in order, as a reader follows them.
WALKTHROUGHS = ["README.md", "docs/tutorial.md"]


@pytest.mark.parametrize("page", WALKTHROUGHS)
def test_the_walkthrough_runs_as_shown(
    page: str, spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    wrong = walk(page, (ROOT / page).read_text(), tmp_path)
    assert wrong == [], "\n".join(wrong)


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
