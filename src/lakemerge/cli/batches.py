"""Commands that apply batches: ``apply``, ``run``, ``snapshot`` (a group's point) and ``demo``."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from lakemerge import api
from lakemerge.api import documents
from lakemerge.cli import output
from lakemerge.cli.common import DryRunOpt, JsonOpt, MasterOpt, QuietOpt, RemoteOpt, TablesOpt, VerboseOpt, handled
from lakemerge.cli.progress import spark_progress
from lakemerge.errors import ConfigError


@handled
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
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Apply every change file not applied yet: one batch and one Delta commit per table.

    \b
    lakemerge apply pipeline.toml [--table products]
    lakemerge apply --properties mutator.properties --table lake/products landing/products/
    """
    shown = output.pick(json_out)
    inputs = list(targets or [])
    if properties is not None:
        if not table or len(table) != 1:
            raise ConfigError("with --properties, give the Delta table's directory once with --table DIR")
        if not inputs:
            raise ConfigError("with --properties, give the change files or directories to apply")
        config = api.load_properties(
            properties,
            table_path=table[0],
            inputs=inputs,
            name=name,
            columns=[c.strip() for c in columns.split(",")] if columns else (),
            types=_parse_types(types or []),
        )
        spark = api.spark_session(paths=[table[0], *inputs], master=master, remote=remote, verbose=verbose)
        with spark_progress(spark, shown.err, enabled=not (quiet or json_out), label=f"applying {name}"):
            results = [api.apply_table(config, spark=spark, dry_run=dry_run)]
        shown.item(results[0])
    else:
        if len(inputs) != 1:
            raise ConfigError("give exactly one pipeline file (or use --properties for a chombo file)")
        pipeline = api.load_pipeline(inputs[0])
        spark = api.spark_session(
            pipeline.spark, paths=api.storage_paths(pipeline), master=master, remote=remote, verbose=verbose
        )
        with spark_progress(spark, shown.err, enabled=not (quiet or json_out), label="applying"):
            results = api.apply(pipeline, tables=table, dry_run=dry_run, spark=spark, on_result=shown.item)
    shown.result(documents.Batches(tuple(results)))


def _parse_types(items: list[str]) -> dict[str, str]:
    parsed = {}
    for item in items:
        column, sep, type_name = item.partition("=")
        if not sep or not column.strip() or not type_name.strip():
            raise ConfigError(f"--type expects COLUMN=TYPE, got {item!r}")
        parsed[column.strip()] = type_name.strip()
    return parsed


@handled
def run(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file.")],
    table: TablesOpt = None,
    watch: Annotated[bool, typer.Option("--watch", help="Keep polling the landing zones for new files.")] = False,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between polls with --watch.")] = 60.0,
    max_batches: Annotated[int | None, typer.Option("--max-batches", help="Stop after N committed batches.")] = None,
    dry_run: DryRunOpt = False,
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Apply every pending batch of every table until none is left (or keep watching).

    SIGINT or SIGTERM lets the batch in progress commit, then exits 0; a second one abandons it
    (nothing of it is committed).
    """
    shown = output.pick(json_out)
    config = api.load_pipeline(pipeline)
    spark = api.spark_session(
        config.spark, paths=api.storage_paths(config), master=master, remote=remote, verbose=verbose
    )
    single = api.single_driver_tables(config, spark)
    if single:
        shown.note(
            f"note: {', '.join(single)}: Delta's default S3 log store is safe for one driver writing a table only; "
            'for writers in several drivers set [spark] s3_commits = "conditional"'
        )
    if dry_run:
        results = api.apply(config, tables=table, dry_run=True, spark=spark, on_result=shown.item)
    else:
        stop = _stop_on_signals(shown)
        with spark_progress(spark, shown.err, enabled=not (quiet or json_out), label="running"):
            results = api.run(
                config,
                tables=table,
                watch=watch,
                interval=interval,
                max_batches=max_batches,
                stop=stop,
                on_result=shown.item,
                spark=spark,
            )
    shown.result(documents.Batches(tuple(results)))


def _stop_on_signals(shown: output.Output) -> threading.Event:
    """An Event set by the first SIGINT/SIGTERM; the second one interrupts at once."""
    stop = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        shown.warn("stopping after the batch in progress (signal again to abandon it)")

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return stop


@handled
def stream(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file.")],
    table: TablesOpt = None,
    available_now: Annotated[
        bool, typer.Option("--available-now", help="Apply everything available, then stop (for schedulers).")
    ] = False,
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run the tables' change streams (Kafka, or the landing zones as streams of files) and the
    sources' (a whole database's Debezium topics): each micro-batch one batch, or for a source one
    transaction over its tables, exactly once across restarts.

    SIGINT or SIGTERM lets the micro-batch in progress commit, then stops every stream and exits 0.
    """
    shown = output.pick(json_out)
    config = api.load_pipeline(pipeline)
    spark = api.spark_session(
        api.stream_settings(config), paths=api.storage_paths(config), master=master, remote=remote, verbose=verbose
    )
    stop = _stop_on_signals(shown)
    with spark_progress(spark, shown.err, enabled=not (quiet or json_out), label="streaming"):
        results = api.stream(
            config, tables=table, available_now=available_now, stop=stop, on_result=shown.item, spark=spark
        )
    shown.result(documents.Batches(tuple(results)))


@handled
def skip(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file.")],
    files: Annotated[list[str], typer.Argument(help="The change files to skip.", show_default=False)],
    table: Annotated[str, typer.Option("--table", "-t", help="The table whose feed holds the files.")],
    reason: Annotated[str, typer.Option("--reason", help="Why: kept in the ledger, shown by history and report.")],
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Record change files as skipped by an operator: never applied, and the ledger says why.

    \b
    lakemerge skip pipeline.toml --table products landing/products/broken.csv --reason "export cut short"
    """
    config = api.load_pipeline(pipeline)
    spark = api.spark_session(
        config.spark, paths=api.storage_paths(config), master=master, remote=remote, verbose=verbose
    )
    output.pick(json_out).result(api.skip(config, table=table, files=files, reason=reason, spark=spark))


@handled
def snapshot(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file.")],
    group: Annotated[list[str] | None, typer.Option("--group", "-g", help="Group(s) to show (default: all).")] = None,
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Show each group's consistent point: the version of every table of its last complete run."""
    config = api.load_pipeline(pipeline)
    spark = api.spark_session(
        config.spark, paths=api.storage_paths(config), master=master, remote=remote, verbose=verbose
    )
    output.pick(json_out).result(documents.GroupPoints(api.snapshots(config, groups=group, spark=spark)))


@handled
def demo(
    directory: Annotated[Path, typer.Option("--dir", help="Working directory for the demo's files and table.")] = Path(
        "lakemerge-demo"
    ),
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Apply chombo's product example: master data, then inserts and updates, and a delete file."""
    shown = output.pick(json_out)
    url = api.remote_of(remote=remote)
    if url is None:
        shown.note("Starting Spark (the first start downloads Delta's jars) ...")
    else:
        shown.note(f"Working on the Spark Connect server at {url} ...")
    spark = api.spark_session(master=master, remote=remote, verbose=verbose)
    with spark_progress(spark, shown.err, enabled=not (quiet or json_out), label="applying the demo's batches"):
        result = api.demo(directory, spark=spark)
    shown.result(result)
