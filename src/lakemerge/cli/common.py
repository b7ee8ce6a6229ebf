"""What every command shares: its options (``--json``, ``-v``, ``--master``), and how a failure
becomes one line (or, with ``--json``, a document) and the error's exit code.

Exit codes: 0 success; 1 internal error; 2 configuration or usage error; 3 input error (bad or
missing change files, incompatible schema); 4 gave up on a concurrent writer's conflict;
130 interrupted.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from lakemerge.cli import output
from lakemerge.errors import LakemergeError, first_line

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout instead of text.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Show Spark's log and full tracebacks.")]
MasterOpt = Annotated[
    str | None, typer.Option("--master", help="Spark master URL (default: the pipeline's, else local[*]).")
]
RemoteOpt = Annotated[
    str | None,
    typer.Option(
        "--remote",
        help="A Spark Connect server to work through, sc://host:port (default: the settings' remote, "
        "else $SPARK_REMOTE).",
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Plan the batch and show what it would do; commit nothing.")]
TablesOpt = Annotated[list[str] | None, typer.Option("--table", "-t", help="Table(s) to work on (default: all).")]

F = TypeVar("F", bound=Callable[..., Any])


#: The exit code of a command whose reader closed its output (``lakemerge history | head``), as a
#: shell reports a program ended by SIGPIPE.
_BROKEN_PIPE = 141


def _reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has gone (a broken pipe from Spark's own
    sockets is a failure like any other). If so, later writes go nowhere: Python would otherwise
    report the pipe once more as it exits."""
    import select

    try:
        descriptor = sys.stdout.fileno()
        watch = select.poll()
        watch.register(descriptor, select.POLLOUT)
        gone = any(events & select.POLLERR for _, events in watch.poll(0))
    except (OSError, ValueError, AttributeError):
        return False
    if gone:
        os.dup2(os.open(os.devnull, os.O_WRONLY), descriptor)
    return gone


def handled(func: F) -> F:
    """Run a command; turn its failure into one line on stderr (and, with ``--json``, an error
    document on stdout) and the error's exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        verbose = bool(kwargs.get("verbose"))
        shown = output.pick(bool(kwargs.get("json_out")))
        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except LakemergeError as exc:
            if verbose:
                traceback.print_exc()
            shown.error(type(exc).__name__, str(exc), exc.exit_code, committed=exc.committed)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            shown.error("Interrupted", "nothing was committed by the batch in progress", 130)
            raise typer.Exit(130) from None
        except BrokenPipeError as exc:
            if _reader_gone():
                raise typer.Exit(_BROKEN_PIPE) from None
            _internal(exc, shown, verbose=verbose)
        except Exception as exc:
            _internal(exc, shown, verbose=verbose)

    return wrapper  # type: ignore[return-value]


def _internal(exc: BaseException, shown: Any, *, verbose: bool) -> NoReturn:
    """A failure lakemerge did not expect: one line asking for a report (the traceback with -v)."""
    if verbose:
        traceback.print_exc()
    message = f"{first_line(exc)} (a bug in lakemerge: run with -v for the traceback, and report it)"
    shown.error("InternalError", message, 1)
    raise typer.Exit(1) from None
