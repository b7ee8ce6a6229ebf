"""``lakemerge vacuum``: Delta's VACUUM of files no version needs any more, and tombstone garbage
collection (docs/history.md), for one table.

Delta's own safety applies: a retention shorter than ``delta.deletedFileRetentionDuration`` (7 days
by default) is refused, since readers of older versions, and writers in flight, may still need the
files.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from lakemerge.config.table import TableConfig
from lakemerge.errors import ConfigError
from lakemerge.operations.inspect import require_table
from lakemerge.results import VacuumResult
from lakemerge.spark import localfs
from lakemerge.spark.backends import backend
from lakemerge.spark.scoped import scoped_conf
from lakemerge.table import ledger, store, tombstones

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def vacuum(
    spark: SparkSession, table: TableConfig, *, retain_hours: float | None = None, now_ms: int | None = None
) -> VacuumResult:
    """Collect the table's tombstone garbage, then VACUUM the table and its tombstone table.

    Args:
        retain_hours: keep files that versions younger than this need (default: the table's
            ``delta.deletedFileRetentionDuration``).
        now_ms: the time against which tombstone retention is measured (default: now).

    Raises:
        TableError: no Delta table at the table's path.
        ConfigError: the retention is shorter than Delta's safety allows.
    """
    started = time.monotonic()
    with localfs.writing(spark, localfs.tables_of(table)):
        log_path = table.log_table if table.log_mode else None
        if log_path is None or not store.table_exists(spark, log_path):
            require_table(spark, table.path)
        _, history = ledger.state(spark, table.path, log_path=log_path)
        collected = tombstones.Collected(removed=0, kept=0)
        if table.tombstones:
            collected = tombstones.collect_garbage(
                spark,
                table,
                history.batch_ids,
                txn_version=ledger.last_batch(spark, table.path, log_path=log_path),
                now_ms=now_ms,
            )
        deleted = _vacuum_files(spark, table.path, retain_hours) if store.table_exists(spark, table.path) else 0
        if tombstones.exists(spark, table):
            deleted += _vacuum_files(spark, table.tombstone_table, retain_hours, side=True)
        if store.table_exists(spark, table.log_table):
            deleted += _vacuum_files(spark, table.log_table, retain_hours, side=True)
    return VacuumResult(
        table=table.name,
        path=table.path,
        files_deleted=deleted,
        tombstones_removed=collected.removed,
        tombstones_kept=collected.kept,
        seconds=round(time.monotonic() - started, 3),
    )


@contextlib.contextmanager
def _listing_parallelism(spark: SparkSession) -> Iterator[None]:
    """Size VACUUM's file listing to the cluster's cores while it runs.

    Delta lists a table's directories in a Spark job as wide as
    ``spark.sql.sources.parallelPartitionDiscovery.parallelism`` (10000 by default): ten thousand
    tasks for a table of a few directories cost about 25 s in local mode, against 1 s when the job
    has one task per core. A setting the user made explicitly is left alone."""
    key = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
    explicit = spark.conf.get(key, None)
    if explicit is not None:
        yield
        return
    with scoped_conf(spark, {key: str(backend(spark).parallelism())}):
        yield


def _vacuum_files(spark: SparkSession, path: str, retain_hours: float | None, *, side: bool = False) -> int:
    """VACUUM ``path``; the number of files it deleted (counted by a dry run first: file names
    only, never table data). A ``side`` table (tombstones, change log) whose own retention is longer
    than ``retain_hours`` keeps its own: the retention asked for is the table's, whose properties the
    user sets, and lakemerge made the side table with Delta's default."""
    retain = f" RETAIN {retain_hours} HOURS" if retain_hours is not None else ""
    try:
        with _listing_parallelism(spark):
            count = spark.sql(f"VACUUM {store.sql_path(path)}{retain} DRY RUN").count()
            if count:
                spark.sql(f"VACUUM {store.sql_path(path)}{retain}").collect()
    except Exception as exc:
        text = str(exc)
        if "retentionDurationCheck" in text or ("retention" in text.lower() and "safety" in text.lower()):
            if side and retain_hours is not None:
                return _vacuum_files(spark, path, None)
            raise ConfigError(
                f"{path}: a retention of {retain_hours} hours is shorter than the table's "
                "delta.deletedFileRetentionDuration; readers of older versions could lose their files. "
                "Use a longer --retain-hours (Delta's default is 168)"
            ) from None
        raise
    return int(count)
