"""The Python API: every operation of lakemerge as a function, for orchestrators (Airflow, Dagster,
...) and for the command line, which is a thin layer over it.

Every function takes keyword arguments after the first, starts (or reuses) a SparkSession when
none is given, and returns typed results (:mod:`lakemerge.results`). A relative table path is
taken from this process's directory (also when Spark runs on a Spark Connect server).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lakemerge import documents as documents
from lakemerge.config import PipelineConfig, TableConfig
from lakemerge.config.base import absolute
from lakemerge.config.pipeline_file import load_pipeline as load_pipeline
from lakemerge.config.properties_file import load_properties as load_properties
from lakemerge.config.records import RecordsConfig
from lakemerge.errors import ConfigError
from lakemerge.results import (
    BatchResult,
    ChangedRecord,
    CommitInfo,
    CompactionResult,
    DemoResult,
    GroupPoint,
    QuarantinedRow,
    Registered,
    ReportResult,
    RollbackResult,
    SkipResult,
    TableSummary,
    VacuumResult,
)
from lakemerge.sessions import remote_of as remote_of
from lakemerge.sessions import single_driver_tables as single_driver_tables
from lakemerge.sessions import spark_conf as spark_conf
from lakemerge.sessions import spark_session as spark_session
from lakemerge.sessions import storage_paths as storage_paths
from lakemerge.sessions import stream_settings as stream_settings
from lakemerge.sessions import with_session as _session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakemerge.batch.transactions import Transaction
    from lakemerge.spark.backend import Stage

Pipeline = PipelineConfig | str | os.PathLike[str]


def apply(
    pipeline: Pipeline,
    *,
    tables: Sequence[str] | None = None,
    dry_run: bool = False,
    spark: SparkSession | None = None,
    on_result: Callable[[BatchResult], None] | None = None,
) -> list[BatchResult]:
    """Apply the next batch of each table of a pipeline (or of ``tables``), one commit per table,
    in the pipeline's order. With ``dry_run``, plan and report only. ``on_result`` is called with
    each table's result as soon as it is known.

    Raises:
        LakemergeError: (a subclass) at the first table that fails; earlier tables stay committed.
    """
    from lakemerge.batch.attempts import apply_table as apply_one

    config = _pipeline(pipeline)
    session = _session(spark, config.spark, storage_paths(config))
    results = []
    for table in config.tables_named(tables):
        results.append(apply_one(table, spark=session, dry_run=dry_run))
        if on_result is not None:
            on_result(results[-1])
    return results


def apply_table(
    table: TableConfig, *, inputs: Sequence[str] | None = None, dry_run: bool = False, spark: SparkSession | None = None
) -> BatchResult:
    """Apply the next batch of one table's feed (or of ``inputs``) in one commit (or plan it only)."""
    from lakemerge.batch.attempts import apply_table as apply_one

    paths = [table.path, *(inputs or [where for feed in table.feeds for where in feed.location])]
    return apply_one(table, spark=_session(spark, paths=paths), inputs=inputs, dry_run=dry_run)


def apply_changes(
    table: TableConfig,
    changes: DataFrame,
    *,
    source: str,
    batch_id: int,
    records: RecordsConfig | None = None,
    dry_run: bool = False,
    spark: SparkSession | None = None,
) -> BatchResult:
    """Apply a DataFrame of change records to ``table`` as one batch, in one commit, with every rule
    a batch of files gets (docs/semantics.md): op codes, ordering, collapse, late records,
    tombstones, partial updates, truncates, SCD2, schema drift, the quarantine, the row accounting.

    ``source`` names who sends the batches (a job, a stream) and ``batch_id`` numbers them: the
    commit records both, and a batch whose id is not above the last one the table committed from
    that source commits nothing and says so (``version`` ``None``, ``applied_before``, zero
    metrics): a rerun of a batch that committed is applied exactly once.

    The records are read by ``records`` (default: the table's ``records`` section, else its first
    feed's rules): ``rows`` (the DataFrame's columns are the records'), ``json`` or ``debezium``
    (a string column ``value``, as Kafka's source gives). Without a sequence column, the batch's
    own order decides between changes of one key (a Kafka partition's offsets, else the
    DataFrame's order), and later batches are newer.

    Raises:
        ConfigError: an empty source, a negative batch id, or rules that do not fit the records.
        InputError: bad records over the table's quarantine threshold (each named by its place:
            topic, partition and offset, or the DataFrame's partition and row).
    """
    from lakemerge.batch.attempts import apply_table as apply_one
    from lakemerge.batch.frames import FrameBatch

    if not isinstance(source, str) or not source.strip() or source == "lakemerge" or source.startswith("lakemerge."):
        raise ConfigError(f"source must name who sends the batches (not empty, not 'lakemerge...'): {source!r}")
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise ConfigError(f"batch_id must be a number of 0 or more, increasing from batch to batch: {batch_id!r}")
    frame = FrameBatch(changes, source, batch_id, records or table.frame_rules)
    return apply_one(table, spark=spark or changes.sparkSession, frame=frame, dry_run=dry_run)


@contextlib.contextmanager
def transaction(
    pipeline: Pipeline, group: str, *, id: int | None = None, spark: SparkSession | None = None
) -> Iterator[Transaction]:
    """A transaction over the tables of ``group`` (lakemerge.batch.transactions): stage each
    table's change records with ``tx.apply(table, changes)``; leaving the block commits every table,
    then the group's point, so that readers of the point see all of the transaction or none of it.
    An exception inside the block aborts (nothing is applied). ``id`` numbers the group's
    transactions (default: one more than the last recorded): running the same id again completes a
    transaction that stopped while it committed, and commits nothing when it was complete.

    ``tx.result`` holds the :class:`~lakemerge.results.TransactionResult` once the block is left.
    """
    from lakemerge.batch.transactions import Transaction, next_id

    config = _pipeline(pipeline)
    session = _session(spark, config.spark, storage_paths(config))
    chosen = next_id(config, group, spark=session) if id is None else id
    if isinstance(chosen, bool) or not isinstance(chosen, int) or chosen < 1:
        raise ConfigError(f"a transaction's id is a number of 1 or more: {chosen!r}")
    tx = Transaction(config, group, chosen, session)
    yield tx
    tx.result = tx.commit()


def run(
    pipeline: Pipeline,
    *,
    tables: Sequence[str] | None = None,
    max_batches: int | None = None,
    watch: bool = False,
    interval: float = 60.0,
    stop: threading.Event | None = None,
    on_result: Callable[[BatchResult], None] | None = None,
    spark: SparkSession | None = None,
) -> list[BatchResult]:
    """Apply every pending batch of each table until none is left (with ``watch``, keep polling
    every ``interval`` seconds until ``stop`` is set); the committed batches' results, each also
    given to ``on_result`` as it commits. Groups of tables are applied group run by group run."""
    from lakemerge.batch.run import run_pipeline

    config = _pipeline(pipeline)
    return run_pipeline(
        config,
        spark=_session(spark, config.spark, storage_paths(config)),
        tables=[t.name for t in config.tables_named(tables)],
        watch=watch,
        interval=interval,
        max_batches=max_batches,
        stop=stop,
        on_result=on_result,
    )


def stream(
    pipeline: Pipeline,
    *,
    tables: Sequence[str] | None = None,
    available_now: bool = False,
    stop: threading.Event | None = None,
    on_result: Callable[[BatchResult], None] | None = None,
    spark: SparkSession | None = None,
) -> list[BatchResult]:
    """Run the streams of the pipeline's tables and sources (or of ``tables``, which may name
    sources): a query per table with a ``stream`` section, each micro-batch one batch of the table,
    and per source, each micro-batch a transaction over its tables (lakemerge.streams.queries).
    Runs until every stream stops (trigger ``available_now``, or ``available_now`` here: everything
    available, then stop) or ``stop`` is set (the micro-batch in progress commits first). The
    batches committed, each also given to ``on_result`` as it commits.

    Raises:
        ConfigError: no chosen table has a stream.
        LakemergeError: a micro-batch failed; every stream stops, nothing of that micro-batch is
            committed, and a restart applies it again.
    """
    from lakemerge.streams.queries import run_streams

    config = _pipeline(pipeline)
    session = _session(spark, stream_settings(config), storage_paths(config))
    return run_streams(
        config, spark=session, tables=tables, available_now=available_now, stop=stop, on_result=on_result
    )


def skip(
    pipeline: Pipeline, *, table: str, files: Sequence[str], reason: str, spark: SparkSession | None = None
) -> SkipResult:
    """Record ``files`` of the pipeline's ``table`` as skipped by an operator, for ``reason``: they are
    never applied, and the ledger (``history``, the report) says so. For a file no batch can apply,
    which would otherwise stop every later batch of the table."""
    from lakemerge.batch.skip import skip_files

    config = _pipeline(pipeline)
    chosen = config.table(table)
    return skip_files(_session(spark, config.spark, storage_paths(config)), chosen, files, reason=reason)


def snapshot(pipeline: Pipeline, group: str, *, spark: SparkSession | None = None) -> GroupPoint | None:
    """The group's consistent point ``{table: version}`` (``None`` before its first complete run)."""
    from lakemerge.batch.groups import snapshot as group_snapshot

    config = _pipeline(pipeline)
    return group_snapshot(config, group, spark=_session(spark, config.spark, storage_paths(config)))


def snapshots(
    pipeline: Pipeline, *, groups: Sequence[str] | None = None, spark: SparkSession | None = None
) -> dict[str, GroupPoint | None]:
    """The consistent point of each group and source of the pipeline (or of ``groups``).

    Raises:
        ConfigError: the pipeline defines no group nor source.
    """
    config = _pipeline(pipeline)
    names = list(groups or [*config.groups, *config.sources])
    if not names:
        raise ConfigError("the pipeline defines no group ([groups.NAME] with tables and state)", source=config.source)
    session = _session(spark, config.spark, storage_paths(config))
    return {name: snapshot(config, name, spark=session) for name in names}


def rollback(
    path: str,
    *,
    to_version: int | None = None,
    to_timestamp: str | None = None,
    reapply: bool,
    spark: SparkSession | None = None,
) -> RollbackResult:
    """Restore the table to an earlier version; ``reapply`` makes the undone batches' files pending again."""
    from lakemerge.operations.rollback import rollback as rollback_table

    session = _session(spark, paths=[absolute(path)])
    return rollback_table(session, absolute(path), to_version=to_version, to_timestamp=to_timestamp, reapply=reapply)


def register(
    pipeline: Pipeline, *, tables: Sequence[str] | None = None, spark: SparkSession | None = None
) -> list[Registered]:
    """Register the pipeline's existing tables (or ``tables``) and their views in the Spark catalog,
    under each table's ``catalog_name`` (default ``<database>.<name>``). Batches register their
    table themselves when it has a ``catalog_name``; this is for tables made before, or a new
    metastore."""
    from lakemerge.operations.catalog import register_tables

    config = _pipeline(pipeline)
    named = [
        t if t.catalog_name else t.model_copy(update={"catalog_name": f"{config.spark.database}.{t.name}"})
        for t in config.tables_named(tables)
    ]
    return register_tables(_session(spark, config.spark, storage_paths(config)), named)


def history(path: str, *, limit: int | None = None, spark: SparkSession | None = None) -> list[CommitInfo]:
    """The table's commits, newest first, with each batch's metrics and applied files."""
    from lakemerge.operations import inspect

    return inspect.history(_session(spark, paths=[absolute(path)]), absolute(path), limit=limit)


def show(path: str, *, sample: int = 10, spark: SparkSession | None = None) -> TableSummary:
    """The table's schema, row and file counts, size and a few rows."""
    from lakemerge.operations import inspect

    return inspect.show(_session(spark, paths=[absolute(path)]), absolute(path), sample=sample)


def changed_records(
    path: str, version: int, *, key: Sequence[str], limit: int = 20, spark: SparkSession | None = None
) -> list[ChangedRecord]:
    """The rows that ``version`` changed, before and after, ordered by key."""
    from lakemerge.operations import inspect

    return inspect.changed_records(
        _session(spark, paths=[absolute(path)]), absolute(path), version, key=key, limit=limit
    )


def quarantine(
    table: TableConfig | str, *, limit: int | None = 100, spark: SparkSession | None = None
) -> list[QuarantinedRow]:
    """The table's quarantined bad records (of committed batches), newest batch first. ``table``: the
    table's configuration, or its path (its quarantine then at ``PATH__quarantine``)."""
    from lakemerge.table.quarantine import list_quarantine

    path, where = (
        (table.path, table.quarantine)
        if isinstance(table, TableConfig)
        else (absolute(table), quarantine_of(absolute(table)))
    )
    return list_quarantine(_session(spark, paths=[path, where]), table_path=path, quarantine_path=where, limit=limit)


def quarantine_of(path: str) -> str:
    """Where the quarantine of the table at ``path`` is kept unless its configuration says otherwise."""
    return f"{path.rstrip('/')}__quarantine"


def vacuum(
    table: TableConfig,
    *,
    retain_hours: float | None = None,
    now_ms: int | None = None,
    spark: SparkSession | None = None,
) -> VacuumResult:
    """Drop expired and orphaned tombstones, then VACUUM the table's unneeded files (Delta's
    retention safety applies). ``now_ms`` moves the clock tombstone retention is measured against."""
    from lakemerge.operations.vacuum import vacuum as vacuum_table

    return vacuum_table(_session(spark, paths=[table.path]), table, retain_hours=retain_hours, now_ms=now_ms)


def compact(
    pipeline: Pipeline, *, tables: Sequence[str] | None = None, spark: SparkSession | None = None
) -> list[CompactionResult]:
    """Compact the pipeline's tables (or the named ones): fold ``log`` tables' change logs,
    bin-pack and cluster by key, purge deletion vectors (docs/modes.md)."""
    from lakemerge.operations.compact import compact as compact_table

    config = _pipeline(pipeline)
    session = _session(spark, config.spark, storage_paths(config))
    return [compact_table(t, spark=session) for t in config.tables_named(tables)]


def report(path: str, out: str | os.PathLike[str], *, spark: SparkSession | None = None) -> ReportResult:
    """Write a self-contained HTML page of the table's batch history, with plots, to ``out``."""
    from lakemerge.operations.report import write_report

    return write_report(_session(spark, paths=[absolute(path)]), absolute(path), str(out))


def demo(workdir: str | os.PathLike[str], *, spark: SparkSession | None = None) -> DemoResult:
    """Lay out chombo's product example in ``workdir`` and apply it: master data, then a file of
    inserts and updates and a file of deletes."""
    from lakemerge.demo import run_demo

    return run_demo(Path(workdir), spark=_session(spark))


def spark_stages(spark: SparkSession) -> list[Stage] | None:
    """The session's active Spark stages now, for a progress display; ``None`` where the session
    reports them only as they change (:func:`on_spark_progress`)."""
    from lakemerge.spark.backends import backend

    return backend(spark).stages()


def on_spark_progress(spark: SparkSession, report: Callable[[list[Stage]], None]) -> Callable[[], None] | None:
    """Call ``report`` with the session's active stages as the session reports them; the function
    that stops it, or ``None`` for a session whose stages are polled (:func:`spark_stages`)."""
    from lakemerge.spark.backends import backend

    return backend(spark).on_progress(report)


def read_current(spark: SparkSession, table: TableConfig) -> DataFrame:
    """The table's current rows as a DataFrame: for SCD2 tables the rows with ``__current``, without
    the history columns; for ``log`` tables the merged view over table and change log; for other
    tables the table itself."""
    from lakemerge.operations import inspect

    return inspect.read_current(spark, table)


def _pipeline(pipeline: Pipeline) -> PipelineConfig:
    return pipeline if isinstance(pipeline, PipelineConfig) else load_pipeline(pipeline)
