"""Apply one batch of change files to one table: the spine every operation goes through.

Plan it (:mod:`lakemerge.batch.plan`), then commit it (:mod:`lakemerge.batch.commit`) or report what it would
do (a dry run), planning again from scratch when a concurrent writer took its batch number.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from lakemerge.batch.commit import Superseded, commit_batch
from lakemerge.batch.frames import FrameBatch
from lakemerge.batch.plan import plan_batch
from lakemerge.batch.preview import preview
from lakemerge.batch.select import NothingPending
from lakemerge.config.table import TableConfig
from lakemerge.errors import ConflictError, TableError, first_line
from lakemerge.operations import compact as compaction
from lakemerge.results import BatchMetrics, BatchResult
from lakemerge.spark import localfs, tuning
from lakemerge.spark.errors import translate
from lakemerge.spark.scoped import scoped_conf
from lakemerge.table import transaction

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def apply_table(
    table: TableConfig,
    *,
    spark: SparkSession,
    inputs: Sequence[str] | None = None,
    frame: FrameBatch | None = None,
    dry_run: bool = False,
) -> BatchResult:
    """Apply the next batch of ``table``'s feed (or of ``inputs``, or the records of ``frame``) in
    one commit.

    The batch is every pending file, in file order, up to the table's batch limits. A commit that
    loses a race to a concurrent writer is planned again from scratch (the files it had may now be
    applied), with exponential backoff, up to ``table.commit_attempts`` times.

    Args:
        table: the table and its feed.
        spark: the session to work in.
        inputs: files or directories to read instead of ``table.feed.location``.
        frame: change records given as a DataFrame, applied instead of any file (once per source and
            batch id: :mod:`lakemerge.batch.frames`).
        dry_run: plan the batch and report what it would do, committing nothing.

    Returns:
        The batch's result; ``version`` is ``None`` when no file was pending (or in a dry run).

    Raises:
        InputError: a path is missing or a record is bad (nothing is committed).
        SchemaError: the feed's columns cannot be written to the table (nothing is committed).
        ConflictError: concurrent writers won every attempt.
    """
    started = time.monotonic()
    given = _Given(inputs, frame, dry_run, started)
    if dry_run:
        return _apply(table, spark=spark, given=given)
    with localfs.writing(spark, localfs.tables_of(table)):
        return _apply(table, spark=spark, given=given)


@dataclass(frozen=True)
class _Given:
    """What a caller asked of one batch: other inputs than the feeds' files, or records given as a
    DataFrame; a dry run; when the call started."""

    inputs: Sequence[str] | None
    frame: FrameBatch | None
    dry_run: bool
    started: float


def _apply(table: TableConfig, *, spark: SparkSession, given: _Given) -> BatchResult:
    dry_run = given.dry_run
    for attempt in range(1, table.commit_attempts + 1):
        try:
            own = tuning.session_settings(spark)
            with scoped_conf(spark, tuning.batch_settings(spark)):
                result = _attempt(table, spark=spark, given=given, own=own)
        except Exception as exc:
            conflict = exc if isinstance(exc, Superseded) else translate(exc, reading=False)
            if not isinstance(conflict, (Superseded, ConflictError)):
                raise
            if attempt == table.commit_attempts:
                raise ConflictError(
                    f"{table.path}: gave up after {attempt} attempts: concurrent writers kept changing the table "
                    f"({conflict or 'batch number taken'}); nothing of this batch was committed"
                ) from None
            time.sleep(min(30.0, 0.2 * 2**attempt) * (0.5 + random.random()))
            continue
        if table.catalog_name and not dry_run and (result.version is not None or result.skipped_files):
            _register(spark, table, result)
        return result
    raise AssertionError("unreachable")


def _register(spark: SparkSession, table: TableConfig, result: BatchResult) -> None:
    """Register the table by name after its commit. The batch stands whatever happens here: a
    failure says so, and ``lakemerge register`` (or the next batch) registers it again."""
    from lakemerge.errors import LakemergeError
    from lakemerge.operations import catalog

    try:
        catalog.register(spark, table)
    except Exception as exc:
        done = f"version {result.version} committed" if result.version is not None else "nothing to apply"
        reason = exc.message if isinstance(exc, LakemergeError) else first_line(exc)
        raise TableError(
            f"{table.path}: {done}, but registering it in the catalog as {table.catalog_name} failed: {reason}; "
            "fix the catalog, then run `lakemerge register`"
        ) from exc


def _attempt(table: TableConfig, *, spark: SparkSession, given: _Given, own: dict[str, str | None]) -> BatchResult:
    # A log batch counts its changes in the job that appends them (one job fewer), unless it is a
    # dry run, which counts them without appending, or a DataFrame's, which is cached as it is read
    # (the caller's DataFrame may not give the same rows twice).
    dry_run = given.dry_run
    counted = dry_run or given.frame is not None or not (table.log_mode and transaction.supported(spark))
    plan = plan_batch(table, spark=spark, inputs=given.inputs, frame=given.frame, own_settings=own, counted=counted)
    if isinstance(plan, NothingPending):
        return _nothing(table, plan, given)
    try:
        result = preview(plan, spark=spark) if dry_run else commit_batch(plan, spark=spark)
    finally:
        plan.release()
    if not dry_run and compaction.compaction_due(spark, table, batch=plan.txn_version):
        with scoped_conf(spark, plan.own_settings):
            result = replace(result, compaction=compaction.compact(table, spark=spark))
    return result


def _nothing(table: TableConfig, nothing: NothingPending, given: _Given) -> BatchResult:
    """The result of a batch with nothing to apply (or a DataFrame batch applied before)."""
    return BatchResult(
        table=table.name,
        path=table.path,
        batch_id=uuid.uuid4().hex,
        version=None,
        created=False,
        files=(),
        skipped_files=nothing.skipped,
        metrics=BatchMetrics(),
        seconds=round(time.monotonic() - given.started, 3),
        source=given.frame.source if given.frame is not None else None,
        source_batch=given.frame.batch_id if given.frame is not None else None,
        applied_before=nothing.applied_before,
    )
