"""The output layer shows names, paths, values and messages as written: text holding brackets,
backslashes, markup-like strings (``[bold]``, ``[/]``, ``[link=x]``) or emoji codes comes out of
every renderer, the error, note and warning lines and the progress display unchanged, as text and as
JSON; the few styles of the text output stay."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from collections.abc import Iterator
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from lakemerge.cli import output, render
from lakemerge.cli.progress import bars
from lakemerge.documents import (
    Batches,
    Compactions,
    GroupPoints,
    History,
    Quarantine,
    Registrations,
    SparkConf,
    Vacuums,
)
from lakemerge.results import (
    AppliedFile,
    BatchMetrics,
    BatchResult,
    ChangedRecord,
    CommitInfo,
    CompactionResult,
    DemoResult,
    GroupPoint,
    IgnoredEntry,
    QuarantinedRow,
    Registered,
    ReportResult,
    Result,
    RollbackResult,
    SkipResult,
    TableSummary,
    VacuumResult,
)

#: Text a markup reader would change: tags, a closing tag, a link, a TOML section, brackets in a file
#: and a column name, an escaped bracket, backslashes, an emoji code.
TRICKY = [
    "[bold]",
    "[/]",
    "[link=x]",
    "add a [tables.NAME] section",
    "orders[2].csv",
    "qty[kg]",
    "\\[bold]x\\",
    "[bold red]oops[/bold red]",
    "ends with a backslash\\",
    ":cat: [i]",
    "[",
    "]",
    "\\",
]
PRINTABLE = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=30)
WIDE = 100_000


class Marks:
    """Values holding ``s``, each told apart by a number around it, and what the text output must
    show of each (``shown``) and the JSON document must carry (``given``)."""

    def __init__(self, s: str) -> None:
        self.s = s
        self.shown: list[str] = []
        self.given: list[str] = []

    def text(self) -> str:
        value = f"«{len(self.shown)}»{self.s}«{len(self.shown)}»"
        self.shown.append(value)
        self.given.append(value)
        return value

    def name(self) -> str:
        """A file's path, of which the output shows the name (the part after the last ``/``)."""
        value = f"«{len(self.shown)}»{self.s.replace('/', '')}«{len(self.shown)}»"
        self.shown.append(value)
        self.given.append(f"landing/{value}")
        return f"landing/{value}"


def batch(m: Marks, **changes: Any) -> BatchResult:
    fields: dict[str, Any] = {
        "table": m.text(),
        "path": "lake/t",
        "batch_id": "b1",
        "version": 3,
        "created": False,
        "files": (AppliedFile("landing/a.csv", 10, 1),),
        "skipped_files": (),
        "metrics": BatchMetrics(rows_read=2, inserted=2),
        "seconds": 1.5,
    }
    fields.update(changes)
    return BatchResult(**fields)


def commits(m: Marks) -> tuple[CommitInfo, ...]:
    return (
        CommitInfo(
            version=2,
            timestamp="2024-05-01T10:00:00",
            operation="WRITE",
            batch_id="b2",
            files=(AppliedFile(m.name(), 10, 1),),
            skip_reason=m.text(),
            skipped_by=m.text(),
        ),
        CommitInfo(
            version=1,
            timestamp="2024-05-01T09:00:00",
            operation=m.text(),
            batch_id="b1",
            metrics={"rows_read": 2, "inserted": 2},
            source=m.text(),
            source_batch=7,
        ),
    )


def every_result(m: Marks) -> list[Result]:
    """One result of each kind the text output renders (a batch in each of its forms), with ``m``'s
    values in every field the text shows."""
    column, key = m.text(), m.text()
    return [
        batch(m, path=m.text(), ignored_entries=(IgnoredEntry(m.text(), m.text()),)),
        batch(m, dry_run=True, version=None, files_touched=2, partitions_touched=1),
        batch(m, version=None, skipped_files=("landing/b.csv",), ignored_entries=(IgnoredEntry(m.text(), "hidden"),)),
        batch(m, version=None, applied_before=True, source=m.text(), source_batch=4),
        Batches(()),
        History(table="lake/t", commits=commits(m)),
        TableSummary(
            path=m.text(),
            version=1,
            schema=((column, m.text()), ("id", "int")),
            partition_by=(m.text(),),
            rows=1,
            files=1,
            bytes=100,
            sample=({column: m.text(), "id": 1},),
            log_rows=3,
        ),
        Quarantine(table="lake/t", quarantine="lake/t__quarantine", rows=()),
        Quarantine(
            table="lake/t",
            quarantine="lake/t__quarantine",
            rows=(QuarantinedRow("b1", "t", m.name(), 2, m.text(), m.text()),),
        ),
        RollbackResult(path=m.text(), from_version=3, to_version=1, version=4, reapply=True, pending_again=("a",)),
        SkipResult(
            table=m.text(), path="lake/t", version=2, files=(AppliedFile(m.name(), 1, 1),), reason=m.text(), by=m.text()
        ),
        GroupPoints({m.text(): GroupPoint(group="g", point=1, versions={m.text(): 2}, recorded_at=0), m.text(): None}),
        Vacuums(
            (
                VacuumResult(
                    table=m.text(), path="lake/t", files_deleted=1, tombstones_removed=2, tombstones_kept=0, seconds=0.5
                ),
            )
        ),
        Registrations(()),
        Registrations((Registered(table=m.text(), name=m.text(), location=m.text(), created=True, views=(m.text(),)),)),
        Compactions((CompactionResult(table=m.text(), path="lake/t", log_rows_folded=4, tombstones_moved=1),)),
        ReportResult(path="lake/t", out=m.text(), commits=2, batches=1, bytes_written=100),
        DemoResult(
            workdir=m.text(),
            table_path=m.text(),
            batches=(batch(m, created=True), batch(m)),
            changes=(
                ChangedRecord(None, {"product_id": m.text(), m.text(): m.text()}),
                ChangedRecord({"product_id": m.text()}, None),
                ChangedRecord({"product_id": key, column: m.text()}, {"product_id": key, column: m.text()}),
            ),
            history=commits(m),
        ),
    ]


def consoles() -> tuple[io.StringIO, io.StringIO, output.Output]:
    out, err = io.StringIO(), io.StringIO()
    return out, err, output.Output(output.console(file=out, width=WIDE), output.console(file=err, width=WIDE))


def show_everything(m: Marks) -> str:
    """What the text output prints of every result, and of an error, a note and a warning."""
    out, err, shown = consoles()
    for result in every_result(m):
        if isinstance(result, BatchResult):
            shown.item(result)
        else:
            shown.result(result)
    shown.note(m.text())
    shown.warn(m.text())
    shown.error("ConfigError", m.text(), 2)
    shown.error("InternalError", m.text(), 1)
    return out.getvalue() + err.getvalue()


def strings_in(document: Any) -> Iterator[str]:
    """Every string of a decoded JSON document, keys too."""
    if isinstance(document, str):
        yield document
    elif isinstance(document, dict):
        for key, value in document.items():
            yield key
            yield from strings_in(value)
    elif isinstance(document, list):
        for item in document:
            yield from strings_in(item)


def test_every_renderer_is_driven() -> None:
    rendered = {type(r) for r in every_result(Marks("x"))} | {SparkConf}
    assert rendered == set(render.RENDERERS)


@settings(max_examples=60, deadline=None)
@given(PRINTABLE)
@example("[bold]x[/]")
@example("[link=x]y\\")
@example("add a [tables.NAME] section")
def test_text_output_shows_every_value_as_written(s: str) -> None:
    m = Marks(s)
    text = show_everything(m)
    assert [value for value in m.shown if value not in text] == []


def test_text_output_shows_markup_like_values_as_written() -> None:
    for s in TRICKY:
        m = Marks(s)
        text = show_everything(m)
        assert [value for value in m.shown if value not in text] == [], s


@settings(max_examples=30, deadline=None)
@given(PRINTABLE)
@example("[bold]x[/]\\")
def test_json_output_carries_every_value_unchanged(s: str) -> None:
    m = Marks(s)
    found: set[str] = set()
    for result in every_result(m):
        out, _, _ = consoles()
        output.JsonOutput(output.console(file=out)).result(result)
        found |= set(strings_in(json.loads(out.getvalue())))
    assert [value for value in m.given if value not in found] == []


def test_a_json_error_carries_its_message_unchanged_on_stdout_and_stderr() -> None:
    for s in TRICKY:
        out, err = io.StringIO(), io.StringIO()
        shown = output.JsonOutput(output.console(file=out, width=WIDE), output.console(file=err, width=WIDE))
        shown.error("ConfigError", s, 2)
        assert json.loads(out.getvalue()) == {"error": {"kind": "ConfigError", "message": s, "exit_code": 2}}
        assert err.getvalue() == f"error: {s}\n"


@settings(max_examples=40, deadline=None)
@given(PRINTABLE, PRINTABLE)
@example("local[2]", "[bold]x[/] \\")
def test_spark_settings_are_printed_for_a_shell_and_as_conf_lines(master: str, value: str) -> None:
    result = SparkConf(master=master, conf={"spark.app.name": value})
    out, _, shown = consoles()
    shown.result(result)
    assert [shlex.split(line) for line in out.getvalue().splitlines()] == [
        ["--master", master],
        ["--conf", f"spark.app.name={value}"],
    ]
    lines = io.StringIO()
    with contextlib.redirect_stdout(lines):
        output.spark_defaults(result)
    assert lines.getvalue() == f"spark.master {master}\nspark.app.name {value}\n"


@settings(max_examples=40, deadline=None)
@given(PRINTABLE)
@example("stage 3: save at [bold]x[/]\\")
def test_progress_shows_descriptions_as_written(s: str) -> None:
    file = io.StringIO()
    console = output.console(file=file, width=WIDE)
    progress = bars(console)
    progress.add_task(s, total=4)
    progress.add_task(f"applying {s}", total=None)
    console.print(progress.get_renderable())
    assert s in file.getvalue() and f"applying {s}" in file.getvalue()


def test_a_batch_of_records_names_its_source_and_a_batch_of_files_its_files() -> None:
    out = output.console(file=io.StringIO(), width=200, record=True)
    shown = output.Output(out, out)
    shown.item(batch(Marks("t"), files=(), source="stream:[b]orders", source_batch=7))
    shown.item(batch(Marks("u")))
    lines = out.export_text().splitlines()
    assert lines[0].endswith(": committed version 3 at lake/t from batch 7 of stream:[b]orders in 1.5 s"), lines
    assert [x for x in lines if "from 1 file(s) in 1.5 s" in x], lines


def test_the_text_output_keeps_its_styles() -> None:
    """The table name is bold and ``error:`` bold red, while the markup-like text beside them is
    shown as written, unstyled."""
    out = output.console(file=io.StringIO(), width=200, record=True)
    err = output.console(file=io.StringIO(), width=200, record=True)
    shown = output.Output(out, err)
    shown.item(batch(Marks("[red]t")))
    shown.error("ConfigError", "add a [tables.NAME] section", 2)
    assert "\x1b[1m«0»[red]t«0»\x1b[0m: committed version 3" in out.export_text(styles=True)
    assert err.export_text(styles=True) == "\x1b[1;31merror:\x1b[0m add a [tables.NAME] section\n"
