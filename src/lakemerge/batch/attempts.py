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
from lakemerge.results import BatchMetrics, BatchResult, IgnoredEntry
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

    The batch is every pending file, in file order, up to the table's batch limits. A batch whose
    number a concurrent writer committed first is planned again from scratch (its files may now be
    applied, and then nothing is left to do): overlapping writers are normal. Only attempts lost
    while no writer committed a batch count, with exponential backoff, up to
    ``table.commit_attempts`` in a row (docs/semantics.md §8).

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
        ConflictError: ``commit_attempts`` attempts in a row lost while no writer committed a batch.
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
    lost = 0  # attempts lost in a row while no writer committed a batch
    reasons: list[str] = []
    while True:
        planned: list[int] = []
        try:
            own = tuning.session_settings(spark)
            settings = tuning.batch_settings(spark)
            if given.frame is not None:
                settings.update(tuning.frame_settings(spark))
            with scoped_conf(spark, settings):
                result = _attempt(table, spark=spark, given=given, own=own, planned=planned)
        except Exception as exc:
            conflict = exc if isinstance(exc, Superseded) else translate(exc, reading=False)
            if not isinstance(conflict, (Superseded, ConflictError)):
                raise
            if planned and _committed_since(spark, table, planned[0]):
                # Another writer committed the batch number this one planned: its files may now be
                # applied. Overlapping writers are normal: plan again, from scratch.
                lost = 0
                time.sleep(0.05 * random.random())
                continue
            lost += 1
            reasons.append(_reason(conflict))
            if lost >= table.commit_attempts:
                raise ConflictError(
                    f"{table.path}: gave up after {lost} attempts in a row, each lost to a concurrent commit that "
                    f"was not a batch (compaction, OPTIMIZE, VACUUM or a schema change, say; last: {reasons[-1]}), "
                    "while no writer committed a batch; nothing of this batch was committed: run again once the "
                    "other operation is done"
                ) from None
            time.sleep(min(30.0, 0.2 * 2**lost) * (0.5 + random.random()))
            continue
        if table.catalog_name and not given.dry_run and (result.version is not None or result.skipped_files):
            _register(spark, table, result)
        return result


def _committed_since(spark: SparkSession, table: TableConfig, number: int) -> bool:
    """Whether the table (or its change log) has a batch numbered ``number`` or later committed."""
    from lakemerge.table import ledger

    log_path = table.log_table if table.log_mode else None
    return ledger.last_batch(spark, table.path, log_path=log_path) >= number


def _reason(conflict: Exception) -> str:
    """What a lost attempt ran into, in a few words."""
    if isinstance(conflict, Superseded):
        return "the batch's commit was not found in the table's history after it was made"
    return str(conflict)


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


def _attempt(
    table: TableConfig, *, spark: SparkSession, given: _Given, own: dict[str, str | None], planned: list[int]
) -> BatchResult:
    """One attempt at the batch; the batch number it planned is appended to ``planned``."""
    # A log batch counts its changes in the job that appends them (one job fewer), unless it is a
    # dry run, which counts them without appending.
    dry_run = given.dry_run
    counted = dry_run or not (table.log_mode and transaction.supported(spark))
    plan = plan_batch(table, spark=spark, inputs=given.inputs, frame=given.frame, own_settings=own, counted=counted)
    if isinstance(plan, NothingPending):
        return _nothing(table, plan, given)
    planned.append(plan.txn_version)
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
        ignored_entries=tuple(IgnoredEntry(path, reason) for path, reason in nothing.ignored),
        metrics=BatchMetrics(),
        seconds=round(time.monotonic() - given.started, 3),
        source=given.frame.source if given.frame is not None else None,
        source_batch=given.frame.batch_id if given.frame is not None else None,
        applied_before=nothing.applied_before,
    )
