"""``lakemerge``: apply change files to Delta tables from the command line.

Each command parses its arguments, calls :mod:`lakemerge.api` and renders the result
(:mod:`lakemerge.cli.output`); exit codes are in :mod:`lakemerge.cli.common`.
"""

from __future__ import annotations

import sys
import warnings
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from lakemerge.cli import batches, tables


def _flags_untyped(params: list[Any]) -> list[Any]:
    """A flag takes no value: its help line shows no type (Typer would print ``<bool>``). The
    parameters are Click's, which recent Typer releases carry inside Typer itself."""
    for param in params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
    return params


class _Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_untyped(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_untyped(super().get_params(ctx))


app = typer.Typer(
    cls=_Group,
    name="lakemerge",
    help="Apply batches of change records (inserts, updates, deletes) to Delta Lake tables, "
    "one atomic commit per batch.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for command in (
    batches.apply,
    batches.run,
    batches.stream,
    batches.snapshot,
    batches.skip,
    tables.rollback,
    tables.vacuum,
    tables.register,
    tables.conf,
    tables.compact,
    tables.quarantine,
    tables.report,
    tables.history,
    tables.show,
    batches.demo,
):
    app.command(cls=_Command)(command)


def _version(shown: bool) -> None:
    if shown:
        from importlib import metadata

        print(f"lakemerge {metadata.version('lakemerge')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print lakemerge's version and exit.")
    ] = False,
) -> None:
    """Apply batches of change records (inserts, updates, deletes) to Delta Lake tables, one atomic
    commit per batch."""


def main() -> None:
    """Entry point of the ``lakemerge`` script."""
    # PySpark warns on import when pandas is newer than it was tested with; lakemerge's commands
    # never hand pandas a frame, and a Python warning is not for the terminal of a user.
    warnings.filterwarnings("ignore", message=r"PySpark does not yet fully support pandas", category=FutureWarning)
    try:
        app()
    except SystemExit as exc:
        sys.exit(exc.code)


if __name__ == "__main__":
    main()
