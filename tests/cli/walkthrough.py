"""A page of the manual read as a walkthrough, and run as a reader follows it.

A page's code blocks, in order, are its steps: a block with a title (```` ```toml title="pipeline.toml" ````)
is a file the reader writes, relative to the folder they work in; a ``console`` block holds
``$ lakemerge ...`` commands, each followed by what it prints; a ``python`` block is a program the
reader runs in that folder, and an untitled ``text`` block right after it is what it prints. Each
Python block runs on its own (a reader may run any of them alone), so each must be whole.
"""

from __future__ import annotations

import contextlib
import getpass
import io
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer.main
from typer.testing import CliRunner

from lakemerge.cli.app import app

#: Where the pages say the reader works.
HOME = "/home/me/tutorial"
#: Who the pages say the reader is.
USER = "me"
_BLOCK = re.compile(r'^```(?P<lang>\w*)(?: title="(?P<title>[^"]+)")?\n(?P<body>.*?)^```', flags=re.S | re.M)
#: What changes from run to run: seconds, commit times, file sizes.
_VARYING = [
    (re.compile(r"in \d+(?:\.\d+)? s\b"), "in N s"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d │ ([A-Z]{3,})"), r"TIME │ \1"),
    (re.compile(r"\d+ bytes"), "N bytes"),
]
#: Where a command line ends in a shell's line: a redirection, a pipe, a command substitution's end.
_SHELL_END = re.compile(r"\s+(?:>>?|2>|\||&&|;)|\)")


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page: its language, its title (a file's path) and its text."""

    lang: str
    title: str | None
    body: str
    start: int
    end: int


def blocks(page: str) -> list[Block]:
    """The page's fenced code blocks, in order."""
    return [Block(b["lang"], b["title"], b["body"], b.start(), b.end()) for b in _BLOCK.finditer(page)]


@dataclass(frozen=True)
class Step:
    """A file the page has the reader write, or a command or a Python program they run and what it
    prints (a command shown without output, or a Python block without a ``text`` block after it,
    prints nothing)."""

    file: str | None
    text: str
    command: list[str] | None = None
    python: str | None = None


def steps(page: str) -> list[Step]:
    """The files, ``$ lakemerge ...`` commands and Python programs of a page, in order."""
    found: list[Step] = []
    shown = blocks(page)
    for i, block in enumerate(shown):
        if block.title:
            found.append(Step(file=block.title, text=block.body))
        elif block.lang == "console":
            for chunk in re.split(r"^\$ ", block.body, flags=re.M)[1:]:
                line, _, printed = chunk.partition("\n")
                found.append(Step(file=None, text=printed, command=shlex.split(line)))
        elif block.lang == "python":
            after = shown[i + 1] if i + 1 < len(shown) else None
            output = after is not None and after.lang == "text" and not after.title
            printed = after.body if output and after and not page[block.end : after.start].strip() else ""
            found.append(Step(file=None, text=printed, python=block.body))
    return found


def normal(text: str, home: Path) -> list[str]:
    """The lines of ``text``, sorted (a table's sample rows come in no set order), what varies
    between runs masked."""
    text = re.sub(rf"\bby {re.escape(getpass.getuser())}\b", f"by {USER}", text.replace(str(home), HOME))
    for pattern, mask in _VARYING:
        text = pattern.sub(mask, text)
    return sorted(line.rstrip() for line in text.strip("\n").splitlines())


def walk(name: str, page: str, folder: Path, *, replace: Mapping[str, str] | None = None) -> list[str]:
    """Follow the page in ``folder`` (the current directory): write its files, run its commands
    and Python programs in order; what printed otherwise than the page shows, or failed (an empty
    list when everything ran as shown). ``replace`` changes what the page says (a broker's address)
    into what this machine has, and back in what is printed."""
    replace = dict(replace or {})

    def here(text: str) -> str:
        for said, real in replace.items():
            text = text.replace(said, real)
        return text

    def said(text: str) -> str:
        for page_text, real in replace.items():
            text = text.replace(real, page_text)
        return text

    walked = steps(page)
    assert any(s.command or s.python for s in walked) and any(s.file for s in walked), f"{name}: no files or runs"
    wrong: list[str] = []
    for number, step in enumerate(walked, 1):
        if step.file is not None:
            target = folder / step.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(here(step.text))
            continue
        if step.python is not None:
            printed, failed, what = _python(here(step.python), f"{name}, Python block of step {number}")
        else:
            assert step.command and step.command[0] == "lakemerge", step.command
            result = CliRunner().invoke(app, [here(w) for w in step.command[1:]], env={"COLUMNS": "200"})
            printed, failed = result.output, result.exit_code != 0
            what = f"$ {shlex.join(step.command)}  (exit {result.exit_code})"
        got, shown = normal(said(printed), folder), normal(step.text, folder)
        expected_failure = any(line.startswith("error:") for line in shown)
        if failed != expected_failure or got != shown:
            wrong += [what, *got]
    return wrong


def _python(source: str, where: str) -> tuple[str, bool, str]:
    """Run a Python program as ``python`` would, in this process: what it printed, whether it
    raised, and how to name it."""
    out = io.StringIO()
    namespace: dict[str, Any] = {"__name__": "__main__"}
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(source, where, "exec"), namespace)
    except Exception as exc:
        return f"{out.getvalue()}{type(exc).__name__}: {exc}", True, where
    return out.getvalue(), False, where


def command_lines(page: str) -> list[list[str]]:
    """The ``lakemerge ...`` command lines that the page's blocks other than console blocks hold
    (shell lines, a crontab, a scheduler's command), each cut where the shell's syntax takes over."""
    found = []
    for block in blocks(page):
        if block.lang in ("console", "toml", "python") or block.title:
            continue
        for line in block.body.replace("\\\n", " ").splitlines():
            line = re.sub(r"(?:^|\s)#.*", "", line)  # (a comment)
            for start in re.finditer(r"(?:^|(?<=[\s(]))lakemerge (?=[a-z])", line):
                rest = line[start.start() :]
                cut = _SHELL_END.search(rest)
                found.append(shlex.split(rest[: cut.start()] if cut else rest))
    return found


def parse_error(words: list[str]) -> str | None:
    """Why the command line interface would refuse ``words`` (``lakemerge`` and its arguments)
    before running anything: an unknown command or option, a missing argument; ``None`` if it
    takes them."""
    group: Any = typer.main.get_command(app)
    name, *args = words[1:]
    if name not in group.commands:
        return f"no command {name!r}"
    try:
        group.commands[name].make_context(name, list(args))
    except typer.TyperException as exc:  # (a usage error: an option, an argument)
        return f"{type(exc).__name__}: {exc}"
    return None
