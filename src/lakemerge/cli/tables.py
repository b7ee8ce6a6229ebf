"""Commands on whole tables: ``history``, ``show``, ``report``, ``quarantine``, ``rollback``,
``vacuum``, ``compact``, ``register`` and ``conf`` (the Spark settings of a pipeline)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lakemerge import api
from lakemerge.api import documents
from lakemerge.cli import output
from lakemerge.cli.common import JsonOpt, MasterOpt, RemoteOpt, TablesOpt, VerboseOpt, handled
from lakemerge.errors import ConfigError

TablePath = Annotated[str, typer.Argument(help="The Delta table's path.")]
PipelineArg = Annotated[Path, typer.Argument(help="The pipeline file.")]


@handled
def history(
    table: TablePath,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="Show only the newest N commits.")] = None,
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Show a table's commits with each batch's metrics and applied files."""
    spark = api.spark_session(paths=[table], master=master, remote=remote, verbose=verbose)
    commits = api.history(table, limit=limit, spark=spark)
    output.pick(json_out).result(documents.History(table=table, commits=tuple(commits)))


@handled
def show(
    table: TablePath,
    sample: Annotated[int, typer.Option("--sample", help="How many rows to show.")] = 10,
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Show a table's schema, row count, files and a sample of rows."""
    spark = api.spark_session(paths=[table], master=master, remote=remote, verbose=verbose)
    output.pick(json_out).result(api.show(table, sample=sample, spark=spark))


@handled
def report(
    table: TablePath,
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")] = Path("report.html"),
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Write a self-contained HTML page of the table's batch history, with plots."""
    spark = api.spark_session(paths=[table], master=master, remote=remote, verbose=verbose)
    output.pick(json_out).result(api.report(table, out, spark=spark))


@handled
def quarantine(
    target: Annotated[str, typer.Argument(help="PIPELINE.toml with --table NAME, or the table's path.")],
    table: Annotated[str | None, typer.Option("--table", "-t", help="With a pipeline: the table.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most N rows.")] = 100,
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """List a table's quarantined bad records: reason, file, row and the raw record."""
    if table is not None:
        config = api.load_pipeline(target)
        chosen = config.table(table)
        spark = api.spark_session(
            config.spark, paths=api.storage_paths(config), master=master, remote=remote, verbose=verbose
        )
        rows = api.quarantine(chosen, limit=limit, spark=spark)
        path, where = chosen.path, chosen.quarantine
    else:
        spark = api.spark_session(
            paths=[target, api.quarantine_of(target)], master=master, remote=remote, verbose=verbose
        )
        rows = api.quarantine(target, limit=limit, spark=spark)
        path, where = target, api.quarantine_of(target)
    output.pick(json_out).result(documents.Quarantine(table=path, quarantine=where, rows=tuple(rows)))


@handled
def rollback(
    table: TablePath,
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
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Restore a table to an earlier version (one Delta RESTORE commit)."""
    if reapply is None:
        raise ConfigError(
            "choose what happens to the files applied after that version: "
            "--reapply-files (pending again) or --keep-files-applied"
        )
    spark = api.spark_session(paths=[table], master=master, remote=remote, verbose=verbose)
    result = api.rollback(table, to_version=to_version, to_timestamp=to_timestamp, reapply=reapply, spark=spark)
    output.pick(json_out).result(result)


@handled
def vacuum(
    pipeline: PipelineArg,
    table: TablesOpt = None,
    retain_hours: Annotated[
        float | None,
        typer.Option("--retain-hours", help="Keep files needed by versions younger than this (default: Delta's, 168)."),
    ] = None,
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Drop expired and orphaned tombstones, then delete the files no recent version needs (Delta VACUUM)."""
    config = api.load_pipeline(pipeline)
    spark = api.spark_session(
        config.spark, paths=api.storage_paths(config), master=master, remote=remote, verbose=verbose
    )
    results = [api.vacuum(t, retain_hours=retain_hours, spark=spark) for t in config.tables_named(table)]
    output.pick(json_out).result(documents.Vacuums(tuple(results)))


@handled
def compact(
    pipeline: PipelineArg,
    table: TablesOpt = None,
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Fold log tables' change logs into the tables, bin-pack and cluster by key, purge deletion vectors."""
    config = api.load_pipeline(pipeline)
    spark = api.spark_session(
        config.spark, paths=api.storage_paths(config), master=master, remote=remote, verbose=verbose
    )
    output.pick(json_out).result(documents.Compactions(tuple(api.compact(config, tables=table, spark=spark))))


@handled
def register(
    pipeline: PipelineArg,
    table: TablesOpt = None,
    master: MasterOpt = None,
    remote: RemoteOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Register the pipeline's tables, and their views, by name in the Spark catalog (Hive metastore)."""
    config = api.load_pipeline(pipeline)
    spark = api.spark_session(
        config.spark, paths=api.storage_paths(config), master=master, remote=remote, verbose=verbose
    )
    output.pick(json_out).result(documents.Registrations(tuple(api.register(config, tables=table, spark=spark))))


@handled
def conf(
    pipeline: PipelineArg,
    defaults: Annotated[
        bool, typer.Option("--defaults", help="Print spark-defaults.conf lines instead of spark-submit options.")
    ] = False,
    spark_version: Annotated[
        str | None,
        typer.Option(
            "--spark-version", help="The cluster's Spark release, e.g. 4.1.1 (default: the installed PySpark's)."
        ),
    ] = None,
    master: MasterOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Print the Spark settings lakemerge starts with, for spark-submit or spark-defaults.conf on a cluster.

    Starts no Spark session (``-v`` changes nothing here).
    """
    result = api.spark_conf(pipeline, master=master, spark_version=spark_version)
    if defaults and not json_out:
        output.spark_defaults(result)
    else:
        output.pick(json_out).result(result)
