"""``lakemerge``: apply change files to Delta tables from the command line.

Exit codes: 0 success; 1 internal error; 2 configuration or usage error; 3 input error (bad or
missing change files, incompatible schema); 4 gave up on a concurrent writer's conflict;
130 interrupted.
"""

from __future__ import annotations

import functools
import shlex
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from lakemerge.cli import output
from lakemerge.cli.progress import spark_progress
from lakemerge.errors import ConfigError, LakemergeError

app = typer.Typer(
    name="lakemerge",
    help="Apply batches of change records (inserts, updates, deletes) to Delta Lake tables, "
    "one atomic commit per batch.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout instead of text.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Show Spark's log and full tracebacks.")]
MasterOpt = Annotated[
    str | None, typer.Option("--master", help="Spark master URL (default: the pipeline's, else local[*]).")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Plan the batch and show what it would do; commit nothing.")]
F = TypeVar("F", bound=Callable[..., Any])


def _handled(func: F) -> F:
    """Turn known errors into one line on stderr and the error's exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        verbose = bool(kwargs.get("verbose"))
        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except LakemergeError as exc:
            if verbose:
                traceback.print_exc()
            output.err.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            output.err.print("interrupted; nothing was committed by the batch in progress")
            raise typer.Exit(130) from None
        except Exception as exc:
            if verbose:
                traceback.print_exc()
            from lakemerge.spark.errors import first_line

            output.err.print(
                f"[bold red]internal error:[/] {first_line(exc)} (a bug in lakemerge: run with -v for the traceback, "
                "and report it)",
                soft_wrap=True,
            )
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def _spark(master: str | None, verbose: bool, settings: Any = None) -> Any:
    from lakemerge.config.models import SparkSettings
    from lakemerge.spark import get_spark

    settings = settings or SparkSettings()
    if master:
        settings = settings.model_copy(update={"master": master})
    return get_spark(settings, verbose=verbose)


def _tables(pipeline: Path, names: list[str] | None, master: str | None, verbose: bool) -> tuple[Any, list[Any], Any]:
    """The pipeline file's config, its tables called ``names`` (all when none) and the Spark
    session its settings start."""
    from lakemerge.config.pipeline_file import load_pipeline

    config = load_pipeline(pipeline)
    chosen = [config.table(n) for n in names] if names else list(config.tables.values())
    return config, chosen, _spark(master, verbose, config.spark)


@app.command()
@_handled
def apply(
    targets: Annotated[
        list[str] | None,
        typer.Argument(
            help="PIPELINE.toml; or, with --properties, the change files or directories to apply.", show_default=False
        ),
    ] = None,
    table: Annotated[
        list[str] | None,
        typer.Option(
            "--table",
            "-t",
            help="With a pipeline: the table(s) to apply (default: all). With --properties: the Delta table's "
            "directory.",
        ),
    ] = None,
    properties: Annotated[
        Path | None,
        typer.Option(
            "--properties", "-p", help="A chombo RecordSetBulkMutator .properties file (headerless delimited text)."
        ),
    ] = None,
    columns: Annotated[
        str | None,
        typer.Option(
            "--columns", help="With --properties: comma list naming the fields by ordinal (default c0, c1, ...)."
        ),
    ] = None,
    types: Annotated[
        list[str] | None,
        typer.Option(
            "--type", help="With --properties: COLUMN=TYPE casts a field (repeatable), e.g. --type price=int."
        ),
    ] = None,
    name: Annotated[str, typer.Option("--name", help="With --properties: the table's name in results.")] = "table",
    dry_run: DryRunOpt = False,
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Apply every change file not applied yet: one batch and one Delta commit per table.

    \b
    lakemerge apply pipeline.toml [--table products]
    lakemerge apply --properties mutator.properties --table lake/products landing/products/
    """
    from lakemerge.batch import apply_table
    from lakemerge.config.pipeline_file import load_pipeline
    from lakemerge.config.properties_file import load_properties

    inputs = list(targets or [])
    if properties is not None:
        if not table or len(table) != 1:
            raise ConfigError("with --properties, give the Delta table's directory once with --table DIR")
        if not inputs:
            raise ConfigError("with --properties, give the change files or directories to apply")
        config = load_properties(
            properties,
            table_path=table[0],
            inputs=inputs,
            name=name,
            columns=[c.strip() for c in columns.split(",")] if columns else (),
            types=_parse_types(types or []),
        )
        spark = _spark(master, verbose)
        with spark_progress(spark, enabled=not (quiet or json_out), label=f"applying {name}"):
            results = [apply_table(config, spark=spark, dry_run=dry_run)]
    else:
        if len(inputs) != 1:
            raise ConfigError("give exactly one pipeline file (or use --properties for a chombo file)")
        pipeline = load_pipeline(inputs[0])
        chosen = [pipeline.table(n) for n in table] if table else list(pipeline.tables.values())
        spark = _spark(master, verbose, pipeline.spark)
        results = []
        for one in chosen:
            with spark_progress(spark, enabled=not (quiet or json_out), label=f"applying {one.name}"):
                results.append(apply_table(one, spark=spark, dry_run=dry_run))
            if not json_out:
                output.batch_results(results[-1:])
    if json_out:
        output.emit_json({"batches": [r.to_dict() for r in results]})
    elif properties is not None:
        output.batch_results(results)


def _parse_types(items: list[str]) -> dict[str, str]:
    parsed = {}
    for item in items:
        column, sep, type_name = item.partition("=")
        if not sep or not column.strip() or not type_name.strip():
            raise ConfigError(f"--type expects COLUMN=TYPE, got {item!r}")
        parsed[column.strip()] = type_name.strip()
    return parsed


@app.command()
@_handled
def run(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file.")],
    table: Annotated[list[str] | None, typer.Option("--table", "-t", help="Table(s) to serve (default: all).")] = None,
    watch: Annotated[bool, typer.Option("--watch", help="Keep polling the landing zones for new files.")] = False,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between polls with --watch.")] = 60.0,
    max_batches: Annotated[int | None, typer.Option("--max-batches", help="Stop after N committed batches.")] = None,
    dry_run: DryRunOpt = False,
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Apply every pending batch of every table until none is left (or keep watching).

    SIGINT or SIGTERM lets the batch in progress commit, then exits 0; a second one abandons it
    (nothing of it is committed).
    """
    from lakemerge.batch import apply_table
    from lakemerge.run import run_pipeline

    config, chosen, spark = _tables(pipeline, table, master, verbose)
    if dry_run:
        results = [apply_table(one, spark=spark, dry_run=True) for one in chosen]
    else:
        stop = _stop_on_signals()
        report = None if json_out else (lambda result: output.batch_results([result]))
        with spark_progress(spark, enabled=not (quiet or json_out), label="running"):
            results = run_pipeline(
                config,
                spark=spark,
                tables=[t.name for t in chosen],
                watch=watch,
                interval=interval,
                max_batches=max_batches,
                stop=stop,
                on_result=report,
            )
    if json_out:
        output.emit_json({"batches": [r.to_dict() for r in results]})
    elif dry_run:
        output.batch_results(results)
    elif not results:
        output.out.print("nothing to apply")


def _stop_on_signals() -> Any:
    """An Event set by the first SIGINT/SIGTERM; the second one interrupts at once."""
    import signal
    import threading

    stop = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        output.err.print("stopping after the batch in progress (signal again to abandon it)")

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return stop


@app.command()
@_handled
def rollback(
    table: Annotated[str, typer.Argument(help="The Delta table's path.")],
    to_version: Annotated[int | None, typer.Option("--to-version", help="The version to restore.")] = None,
    to_timestamp: Annotated[
        str | None,
        typer.Option(
            "--to-timestamp", help="Restore the last version committed at or before this ISO-8601 time (UTC)."
        ),
    ] = None,
    reapply: Annotated[
        bool | None,
        typer.Option(
            "--reapply-files/--keep-files-applied",
            help="Required choice: make the undone batches' files pending again, or keep them consumed.",
            show_default=False,
        ),
    ] = None,
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Restore a table to an earlier version (one Delta RESTORE commit)."""
    from lakemerge.table.rollback import rollback as do_rollback

    if reapply is None:
        raise ConfigError(
            "choose what happens to the files applied after that version: "
            "--reapply-files (pending again) or --keep-files-applied"
        )
    result = do_rollback(
        _spark(master, verbose), table, to_version=to_version, to_timestamp=to_timestamp, reapply=reapply
    )
    if json_out:
        output.emit_json(result.to_dict())
        return
    output.out.print(
        f"{table}: restored to version {result.to_version} (was {result.from_version}) in commit {result.version}"
    )
    if result.reapply:
        output.out.print(f"{len(result.pending_again)} file(s) are pending again")
    else:
        output.out.print("files applied by the undone versions stay applied")


@app.command()
@_handled
def snapshot(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file.")],
    group: Annotated[list[str] | None, typer.Option("--group", "-g", help="Group(s) to show (default: all).")] = None,
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Show each group's consistent point: the version of every table of its last complete run."""
    from lakemerge.config.pipeline_file import load_pipeline
    from lakemerge.groups import snapshot as group_snapshot

    config = load_pipeline(pipeline)
    names = group or list(config.groups)
    if not names:
        raise ConfigError("the pipeline defines no group ([groups.NAME] with tables and state)", source=str(pipeline))
    spark = _spark(master, verbose, config.spark)
    points = {name: group_snapshot(config, name, spark=spark) for name in names}
    if json_out:
        output.emit_json({name: p.to_dict() if p else None for name, p in points.items()})
        return
    for name, point in points.items():
        if point is None:
            output.out.print(f"[bold]{name}[/]: no complete group run yet")
        else:
            versions = ", ".join(f"{t} @ {v}" for t, v in point.versions.items())
            output.out.print(f"[bold]{name}[/] point {point.point}: {versions}")


@app.command()
@_handled
def vacuum(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file.")],
    table: Annotated[list[str] | None, typer.Option("--table", "-t", help="Table(s) to vacuum (default: all).")] = None,
    retain_hours: Annotated[
        float | None,
        typer.Option("--retain-hours", help="Keep files needed by versions younger than this (default: Delta's, 168)."),
    ] = None,
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Drop expired and orphaned tombstones, then delete the files no recent version needs (Delta VACUUM)."""
    from lakemerge.table.vacuum import vacuum as vacuum_table

    _config, chosen, spark = _tables(pipeline, table, master, verbose)
    results = [vacuum_table(spark, one, retain_hours=retain_hours) for one in chosen]
    if json_out:
        output.emit_json({"tables": [r.to_dict() for r in results]})
        return
    for r in results:
        output.out.print(
            f"[bold]{r.table}[/]: {r.files_deleted} files deleted, {r.tombstones_removed} tombstones removed, "
            f"{r.tombstones_kept} kept ({r.seconds:.1f} s)"
        )


@app.command()
@_handled
def register(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file.")],
    table: Annotated[
        list[str] | None, typer.Option("--table", "-t", help="Table(s) to register (default: all that exist).")
    ] = None,
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Register the pipeline's tables, and their views, by name in the Spark catalog (Hive metastore)."""
    from lakemerge.api import register as register_pipeline
    from lakemerge.config.pipeline_file import load_pipeline

    config = load_pipeline(pipeline)
    spark = _spark(master, verbose, config.spark)
    done = register_pipeline(config, tables=table, spark=spark)
    if json_out:
        output.emit_json({"tables": [asdict(r) for r in done]})
        return
    if not done:
        output.out.print("no table exists yet: nothing registered (apply a batch first)")
    for r in done:
        views = f" (views: {', '.join(r.views)})" if r.views else ""
        state = "registered" if r.created else "already registered"
        output.out.print(f"[bold]{r.table}[/]: {state} as {r.name} → {r.location}{views}")


@app.command()
@_handled
def conf(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file.")],
    defaults: Annotated[
        bool, typer.Option("--defaults", help="Print spark-defaults.conf lines instead of spark-submit options.")
    ] = False,
) -> None:
    """Print the Spark settings lakemerge starts with, for spark-submit or spark-defaults.conf on a cluster."""
    from lakemerge.config.pipeline_file import load_pipeline
    from lakemerge.spark.session import session_conf

    config = load_pipeline(pipeline)
    settings = session_conf(config.spark)
    if defaults:
        print(f"spark.master {config.spark.master}")
        for key, value in settings.items():
            print(f"{key} {value}")
        return
    print(f"--master {shlex.quote(config.spark.master)}")
    for key, value in settings.items():
        print(f"--conf {shlex.quote(f'{key}={value}')}")


@app.command()
@_handled
def compact(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file.")],
    table: Annotated[list[str] | None, typer.Option("--table", "-t", help="Tables to compact (default: all).")] = None,
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Fold log tables' change logs into the tables, bin-pack and cluster by key, purge deletion vectors."""
    from lakemerge.table.maintenance import compact as compact_table

    _config, chosen, spark = _tables(pipeline, table, master, verbose)
    results = [compact_table(one, spark=spark) for one in chosen]
    if json_out:
        output.emit_json({"tables": [r.to_dict() for r in results]})
        return
    for r in results:
        folded = f"{r.log_batches_folded} log batches ({r.log_rows_folded} rows) folded, " if r.log_rows_folded else ""
        if r.tombstones_moved:
            folded += f"{r.tombstones_moved} tombstones moved out of the log, "
        output.out.print(
            f"[bold]{r.table}[/]: {folded}{r.files_removed} files rewritten into {r.files_added}"
            f"{', deletion vectors purged' if r.deletion_vectors_purged else ''} ({r.seconds:.1f} s)"
        )


@app.command()
@_handled
def quarantine(
    target: Annotated[str, typer.Argument(help="PIPELINE.toml with --table NAME, or the table's path.")],
    table: Annotated[str | None, typer.Option("--table", "-t", help="With a pipeline: the table.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most N rows.")] = 100,
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """List a table's quarantined bad records: reason, file, row and the raw record."""
    from lakemerge.table.quarantine import list_quarantine

    settings = None
    if table is not None:
        from lakemerge.config.pipeline_file import load_pipeline

        config = load_pipeline(target)
        chosen = config.table(table)
        settings, table_path, where = config.spark, chosen.path, chosen.quarantine
    else:
        table_path, where = target, f"{target.rstrip('/')}__quarantine"
    rows = list_quarantine(_spark(master, verbose, settings), table_path=table_path, quarantine_path=where, limit=limit)
    if json_out:
        output.emit_json({"table": table_path, "quarantine": where, "rows": [r.to_dict() for r in rows]})
    else:
        output.quarantined(rows)


@app.command()
@_handled
def report(
    table: Annotated[str, typer.Argument(help="The Delta table's path.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")] = Path("report.html"),
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Write a self-contained HTML page of the table's batch history, with plots."""
    from lakemerge.table.report import write_report

    result = write_report(_spark(master, verbose), table, str(out))
    if json_out:
        output.emit_json(result.to_dict())
    else:
        output.out.print(f"wrote {result.out}: {result.batches} batch(es) in {result.commits} commit(s)")


@app.command()
@_handled
def history(
    table: Annotated[str, typer.Argument(help="The Delta table's path.")],
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="Show only the newest N commits.")] = None,
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Show a table's commits with each batch's metrics and applied files."""
    from lakemerge.table import inspect

    commits = inspect.history(_spark(master, verbose), table, limit=limit)
    if json_out:
        output.emit_json({"table": table, "commits": [c.to_dict() for c in commits]})
    else:
        output.history(commits)


@app.command()
@_handled
def show(
    table: Annotated[str, typer.Argument(help="The Delta table's path.")],
    sample: Annotated[int, typer.Option("--sample", help="How many rows to show.")] = 10,
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Show a table's schema, row count, files and a sample of rows."""
    from lakemerge.table import inspect

    summary = inspect.show(_spark(master, verbose), table, sample=sample)
    if json_out:
        output.emit_json(summary.to_dict())
    else:
        output.summary(summary)


@app.command()
@_handled
def demo(
    directory: Annotated[Path, typer.Option("--dir", help="Working directory for the demo's files and table.")] = Path(
        "lakemerge-demo"
    ),
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Apply the seed's product example (master data, then inserts/updates and a delete file)."""
    from lakemerge.demo import run_demo

    if not json_out:
        output.out.print("Starting Spark (the first start downloads Delta's jars) ...")
    spark = _spark(master, verbose)
    with spark_progress(spark, enabled=not (quiet or json_out), label="applying the demo's batches"):
        result = run_demo(directory, spark=spark)
    if json_out:
        output.emit_json(
            {
                "workdir": result.workdir,
                "table_path": result.table_path,
                "batches": [b.to_dict() for b in result.batches],
                "changes": [{"before": b, "after": a} for b, a in result.changes],
                "history": [c.to_dict() for c in result.history],
            }
        )
        return
    output.out.print(f"Demo files in {result.workdir}; table at {result.table_path}\n")
    output.out.print("[bold]Batch 1[/]: the master data creates the table")
    output.batch_results(result.batches[:1])
    output.out.print("\n[bold]Batch 2[/]: an incremental file (inserts, updates, one late update) and a delete file")
    output.batch_results(result.batches[1:])
    output.changes(result.changes, ("product_id",))
    output.history(result.history)
    output.out.print(f"\nTry: lakemerge show {result.table_path}")


def main() -> None:
    """Entry point of the ``lakemerge`` script."""
    try:
        app()
    except SystemExit as exc:
        sys.exit(exc.code)


if __name__ == "__main__":
    main()
