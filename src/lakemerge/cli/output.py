"""How the command line shows results: text for people (Rich), or one JSON document for machines.

A command picks its :class:`Output` once (:func:`pick`, from ``--json``) and hands it every result:
:meth:`Output.item` as each batch commits, :meth:`Output.result` once at the end, and
:meth:`Output.error` when the command fails. The text of a result is :mod:`lakemerge.cli.render`'s;
its JSON document is its :meth:`~lakemerge.results.Result.to_dict`.

Names, paths, values and messages are shown as written: the consoles (:func:`console`) read no
markup, so a ``[tables.NAME]`` in a message or a column ``qty[kg]`` is never taken for a style.
The few styles the text output has (a bold table name, a red ``error:``) come from
:class:`~rich.text.Text` parts (:func:`lakemerge.cli.render.line`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import IO, Any

from rich.console import Console

from lakemerge.api import documents
from lakemerge.cli import render
from lakemerge.results import BatchResult, Result


def console(
    *, stderr: bool = False, file: IO[str] | None = None, width: int | None = None, record: bool = False
) -> Console:
    """A console that prints text as it is: no markup (``[bold]``), emoji codes (``:cat:``) or
    highlighting is read in what it prints. On stdout (stderr with ``stderr``), or ``file``;
    ``width``: the terminal's unless given; ``record``: keeps what it printed (for
    :meth:`~rich.console.Console.export_text`)."""
    return Console(stderr=stderr, file=file, width=width, record=record, markup=False, emoji=False, highlight=False)


class Output:
    """Where a command's results go (the base: text), on the consoles ``out`` (results) and ``err``
    (errors, warnings and progress); by default :func:`console`'s on stdout and stderr."""

    json = False

    def __init__(self, out: Console | None = None, err: Console | None = None) -> None:
        self.out = out or console()
        self.err = err or console(stderr=True)

    def item(self, result: BatchResult) -> None:
        """A batch as it commits: shown at once."""
        render.render(self.out, result)

    def result(self, result: Result) -> None:
        """The command's result."""
        render.render(self.out, result)

    def note(self, text: str) -> None:
        """A line for people only (what is happening, a hint)."""
        self.out.print(text)

    def warn(self, text: str) -> None:
        """A line on stderr, shown with ``--json`` too (e.g. that a signal was received)."""
        self.err.print(text, soft_wrap=True)

    def error(self, kind: str, message: str, exit_code: int, *, committed: Sequence[object] = ()) -> None:
        """The command failed (``kind``: the error's class name, ``InternalError`` for a bug,
        ``Interrupted``): one line on stderr. ``committed``: the batches it committed before it
        failed (shown as they committed)."""
        label = {"InternalError": "internal error", "Interrupted": "interrupted"}.get(kind, "error")
        self.err.print(render.line((f"{label}:", "bold red"), " ", message), soft_wrap=True)


class JsonOutput(Output):
    """One JSON document on stdout and nothing else; an error is a document too (and a line on stderr)."""

    json = True

    def item(self, result: BatchResult) -> None:
        return None

    def result(self, result: Result) -> None:
        emit_json(result.to_dict(), self.out.file)

    def note(self, text: str) -> None:
        return None

    def error(self, kind: str, message: str, exit_code: int, *, committed: Sequence[object] = ()) -> None:
        super().error(kind, message, exit_code)
        document: dict[str, Any] = {"error": {"kind": kind, "message": message, "exit_code": exit_code}}
        if committed:
            document["batches"] = [r.to_dict() for r in committed if isinstance(r, Result)]
        emit_json(document, self.out.file)


def pick(json_out: bool) -> Output:
    """The output a command writes to: JSON with ``--json``, else text."""
    return JsonOutput() if json_out else Output()


def emit_json(document: Any, file: IO[str] | None = None) -> None:
    """Print one JSON document on stdout (or ``file``), nothing else."""
    print(json.dumps(document, indent=2, default=str), file=file)


def spark_defaults(result: documents.SparkConf) -> None:
    """``spark-defaults.conf`` lines (``conf --defaults``)."""
    print(f"spark.master {result.master}")
    for key, value in result.conf.items():
        print(f"{key} {value}")
