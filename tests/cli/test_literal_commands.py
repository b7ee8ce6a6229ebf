"""Commands show text holding brackets, backslashes and markup-like strings as written, end to end:
an error naming a TOML section, a table path, a column ``qty[kg]``, values and a quarantined record
holding ``[bold]``, ``[/]``, ``[link=x]`` and a trailing backslash, an operator's reason for a skip;
as text and with ``--json``. The help shows the brackets of its texts too."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner, Result

from lakemerge.cli.app import app
from tests.helpers import write_lines

runner = CliRunner()
#: A terminal wide enough that no line of the output wraps.
WIDE = {"COLUMNS": "1000"}
REASON = "[bold]cut[/] short, see [link=x]ticket\\"
HEADER = "id,seq,op,qty[kg],note"


def invoke(*args: str) -> Result:
    return runner.invoke(app, list(args), env=WIDE)


def test_an_error_shows_the_section_it_asks_for(tmp_path: Path) -> None:
    """A pipeline without a table, in a directory and under a name holding brackets."""
    path = tmp_path / "[bold]conf" / "empty[2].toml"
    path.parent.mkdir()
    path.write_text('[spark]\nmaster = "local[1]"\n')
    text = invoke("apply", str(path))
    assert text.exit_code == 2, text.output
    lines = text.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}, key 'tables': "), text.stderr
    assert lines[0].endswith("the pipeline defines no table: add a [tables.NAME] or a [sources.NAME] section"), lines[0]
    as_json = invoke("apply", str(path), "--json")
    assert as_json.exit_code == 2
    assert json.loads(as_json.stdout)["error"]["message"] == lines[0].removeprefix("error: ")
    assert as_json.stderr == text.stderr


def test_conf_prints_settings_holding_brackets_as_written(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[spark]\nmaster = "local[2]"\nconf = { "spark.app.name" = "[bold]lake[/] \\\\" }\n'
        '[tables.t]\npath = "lake/t"\nkey = "id"\nsequence = "seq"\n'
        '[tables.t.feed]\nlocation = "landing"\nheader = true\ntypes = { id = "int", seq = "bigint" }\n'
    )
    name = "[bold]lake[/] \\"
    submit = invoke("conf", str(path))
    assert submit.exit_code == 0, submit.output
    options = [shlex.split(line) for line in submit.stdout.splitlines()]
    assert ["--master", "local[2]"] in options and ["--conf", f"spark.app.name={name}"] in options
    defaults = invoke("conf", str(path), "--defaults")
    assert {"spark.master local[2]", f"spark.app.name {name}"} <= set(defaults.stdout.splitlines())
    document = json.loads(invoke("conf", str(path), "--json").stdout)
    assert (document["master"], document["conf"]["spark.app.name"]) == ("local[2]", name)


def test_a_usage_mistake_shows_what_was_typed() -> None:
    typed = invoke("[bold]histroy[/]")
    assert typed.exit_code == 2
    assert "No such command '[bold]histroy[/]'" in typed.stderr


BRACKETED = re.compile(r"\[[^\[\]\n]*\]")


def missing_from_help(cli: typer.Typer) -> list[str]:
    """The bracketed parts of the help texts of ``cli`` (its own, its commands' and their
    parameters') that its ``--help`` pages do not show (``\\[`` in a text shows as ``[``)."""
    group = typer.main.get_command(cli)
    pages: list[tuple[list[str], Any]] = [([], group)]
    pages += [([name], command) for name, command in group.commands.items()]  # type: ignore[attr-defined]
    missing = []
    for words, command in pages:
        page = runner.invoke(cli, [*words, "--help"], env=WIDE)
        assert page.exit_code == 0, page.output
        texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
        for text in texts:
            missing += [
                f"{words}: {part}" for part in BRACKETED.findall(text.replace("\\[", "[")) if part not in page.stdout
            ]
    return missing


def test_the_help_shows_the_brackets_of_its_texts() -> None:
    assert missing_from_help(app) == []


def test_the_help_check_finds_a_section_name_read_as_markup() -> None:
    """The help reads its texts as markup: a section name is written ``\\[spark]``, which the
    check above accepts, and a bare ``[spark]`` is lost, which it finds."""
    probe = typer.Typer(rich_markup_mode=app.rich_markup_mode)

    @probe.command()
    def bare(master: Annotated[str, typer.Option(help="Overrides the [spark] section's master.")] = "") -> None:
        """Runs."""

    @probe.command()
    def escaped(master: Annotated[str, typer.Option(help="Overrides the \\[spark] section's master.")] = "") -> None:
        """Runs."""

    assert missing_from_help(probe) == ["['bare']: [spark]"]


@dataclass(frozen=True)
class Lake:
    root: Path
    pipeline: Path
    table: str
    applied: Result
    skipped: Result


@pytest.fixture(scope="module")
def lake(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    """Table ``t`` at ``lake/t[bold]`` after one batch (values holding markup, a column ``qty[kg]``,
    a bad record, a hidden entry ``_[bold]h.csv`` not read) and a file recorded as skipped with
    :data:`REASON`; table ``u`` has a bad value and no room for it."""
    root = tmp_path_factory.mktemp("brackets")
    write_lines(
        root / "landing" / "orders_2.csv",
        [HEADER, "1,1,I,5,[bold]x[/]", "2,1,I,6,[link=x]y\\", "[i],1,I,7,bad [red]row"],
    )
    write_lines(root / "landing" / "_[bold]h.csv", [HEADER])
    write_lines(root / "landing_u" / "a.csv", [HEADER, "[i],1,U,1,x"])
    pipeline = root / "p.toml"
    feed = 'header = true\ntypes = { id = "int", seq = "bigint" }\nop_column = "op"\n'
    pipeline.write_text(
        '[tables.t]\npath = "lake/t[bold]"\nkey = "id"\nsequence = "seq"\nmax_bad_rows = 5\n'
        f'[tables.t.feed]\nlocation = "landing"\n{feed}'
        '[tables.u]\npath = "lake/u"\nkey = "id"\nsequence = "seq"\n'
        f'[tables.u.feed]\nlocation = "landing_u"\n{feed}'
    )
    applied = invoke("apply", str(pipeline), "-t", "t")
    poison = write_lines(root / "landing" / "f2.csv", [HEADER, "1,2,U,1,never"])
    skipped = invoke("skip", str(pipeline), str(poison), "-t", "t", "--reason", REASON)
    yield Lake(root, pipeline, str(root / "lake" / "t[bold]"), applied, skipped)


def test_a_batch_shows_its_table_path_and_the_entry_it_did_not_read(lake: Lake) -> None:
    assert lake.applied.exit_code == 0, lake.applied.output
    text = lake.applied.stdout
    assert f"t: created version 0 at {lake.table} from 1 file(s)" in text, text
    assert f"{lake.root / 'landing' / '_[bold]h.csv'}: hidden" in text, text


def test_a_skip_shows_the_operators_reason(lake: Lake) -> None:
    assert lake.skipped.exit_code == 0, lake.skipped.output
    assert f"({REASON}): f2.csv" in lake.skipped.stdout, lake.skipped.stdout


def test_history_shows_the_reason_of_a_skip(lake: Lake) -> None:
    text = invoke("history", lake.table)
    assert text.exit_code == 0, text.output
    skips = [line for line in text.stdout.splitlines() if line.startswith("version 1: f2.csv skipped by ")]
    assert len(skips) == 1 and skips[0].endswith(f": {REASON}"), text.stdout
    document = json.loads(invoke("history", lake.table, "--json").stdout)
    assert [c["skip_reason"] for c in document["commits"]] == [REASON, None]
    assert document["table"] == lake.table


def test_show_shows_column_names_and_values_as_written(lake: Lake) -> None:
    text = invoke("show", lake.table)
    assert text.exit_code == 0, text.output
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.stdout.splitlines() if "│" in line]
    assert ["qty[kg]", "string"] in rows
    assert ["1", "1", "5", "[bold]x[/]"] in rows and ["2", "1", "6", "[link=x]y\\"] in rows
    assert text.stdout.startswith(f"{lake.table} version 1: 2 rows")
    header = [line for line in text.stdout.splitlines() if "┃" in line][-1]
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == ["id", "seq", "qty[kg]", "note"]
    document = json.loads(invoke("show", lake.table, "--json").stdout)
    assert ["qty[kg]", "string"] in document["schema"]
    assert sorted(r["note"] for r in document["sample"]) == ["[bold]x[/]", "[link=x]y\\"]


def test_quarantine_shows_the_bad_record_and_its_reason(lake: Lake) -> None:
    text = invoke("quarantine", lake.table)
    assert text.exit_code == 0, text.output
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.stdout.splitlines() if "│" in line]
    assert rows == [["orders_2.csv", "4", "cannot convert column 'id' value '[i]' to int", "[i],1,I,7,bad [red]row"]]
    document = json.loads(invoke("quarantine", lake.table, "--json").stdout)
    assert [(r["reason"], r["record"]) for r in document["rows"]] == [(rows[0][2], rows[0][3])]


def test_an_error_shows_the_bad_value_it_names(lake: Lake) -> None:
    failed = invoke("apply", str(lake.pipeline), "-t", "u")
    assert failed.exit_code == 3, failed.output
    lines = failed.stderr.splitlines()
    assert len(lines) == 1 and "a.csv, row 2" in lines[0], failed.stderr
    assert "cannot convert column 'id' value '[i]' to int" in lines[0], lines[0]
