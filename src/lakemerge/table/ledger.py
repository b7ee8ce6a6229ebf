"""Delta table I/O that a batch needs: existence, stored schema checks, and the commit record.

Each batch's commit carries, in Delta's ``userMetadata``, a JSON record::

    {"lakemerge": 1, "batch_id": "...", "table": "products",
     "metrics": {"rows_read": ..., "inserted": ..., ...},
     "files": [{"path": "file:/...", "size": 123, "modified": 1700000000000}, ...]}

That record is the ledger: files listed in a committed record are never applied again.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lakemerge.errors import InputError
from lakemerge.results import AppliedFile
from lakemerge.spark.scoped import scoped_conf
from lakemerge.table import saved_walks
from lakemerge.table.offsets import furthest
from lakemerge.table.snapshots import commits, latest_snapshot
from lakemerge.table.store import sql_path, table_exists
from lakemerge.table.walk import Ledger as Ledger
from lakemerge.table.walk import Walk
from lakemerge.table.walk import parse_record as parse_record

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"


_TXN_VERSION = "spark.databricks.delta.write.txnVersion"


#: Delta transaction identifier shared by every lakemerge writer of a table. Each batch commits
#: with the next version of it, so two writers racing for the same batch number cannot both commit:
#: Delta skips or rejects the second (idempotent writes).
TXN_APP_ID = "lakemerge"


RECORD_VERSION = 1


@contextlib.contextmanager
def commit_record(
    spark: SparkSession, record: dict[str, Any], *, txn_version: int | None, app_id: str = TXN_APP_ID
) -> Iterator[None]:
    """Attach ``record`` to the Delta commit made inside the block, as userMetadata, and (unless
    ``txn_version`` is None) make the commit idempotent under lakemerge's transaction identifier."""
    settings = {USER_METADATA: record_metadata(record)}
    if txn_version is not None:
        settings.update({_TXN_APP_ID: app_id, _TXN_VERSION: str(txn_version)})
    with scoped_conf(spark, settings):
        yield


def record_metadata(record: dict[str, Any]) -> str:
    """``record`` as a commit's userMetadata (the JSON that :func:`parse_record` reads back)."""
    return json.dumps({"lakemerge": RECORD_VERSION, **record}, separators=(",", ":"))


def txn_version(spark: SparkSession, path: str, app_id: str = TXN_APP_ID) -> int:
    """The last batch number committed to the table under lakemerge's transaction identifier
    (0 for a new table). Read from Delta's snapshot state, which keeps it across log cleanup: from
    the version's checksum where it lists the transactions, else from the log's whole state."""
    snapshot = latest_snapshot(spark, path)
    listed = snapshot.transaction(app_id)
    if listed is not None:
        return max(listed, 0)
    return snapshot.transaction_state(app_id)


def history_rows(spark: SparkSession, path: str, limit: int | None = None) -> list[Any]:
    """Delta's history of ``path``, newest first (commit metadata only; no table data)."""
    frame = spark.sql(f"DESCRIBE HISTORY {sql_path(path)}" + (f" LIMIT {int(limit)}" if limit else ""))
    return list(
        frame.selectExpr(
            "version", "unix_millis(timestamp) AS ts_ms", "operation", "operationMetrics", "userMetadata"
        ).collect()
    )


def commit_rows(spark: SparkSession, path: str, first: int, last: int) -> list[dict[str, Any]] | None:
    """The commit metadata of versions ``first`` to ``last`` (version, ``userMetadata`` and
    ``operationMetrics``, like :func:`history_rows`' rows), read from their commit files without a
    Spark job where the session can (Delta's history costs one per call). ``None`` when they cannot
    be read so (a commit not yet written to the log directory, a file cleaned up, an action this
    reader does not know, a session that reads the log through SQL alone): the caller reads the
    history instead."""
    return commits(spark, path, first, last)


def state(spark: SparkSession, path: str, *, log_path: str | None = None) -> tuple[bool, Ledger]:
    """Whether the table (or its change log at ``log_path``, for ``log``-mode tables) exists, and
    the ledger of the batches committed to either. The log's snapshot positions are the later ones."""
    exists = table_exists(spark, path)
    found = ledger(spark, path) if exists else Ledger()
    if log_path is None or not table_exists(spark, log_path):
        return exists, found
    logged = ledger(spark, log_path)
    numbers = [n for n in (found.last_batch, logged.last_batch) if n is not None]
    return True, Ledger(
        files={**found.files, **logged.files},
        batch_ids=found.batch_ids | logged.batch_ids,
        snapshots={**found.snapshots, **logged.snapshots},
        sources={
            name: max(found.sources.get(name, -1), logged.sources.get(name, -1))
            for name in {*found.sources, *logged.sources}
        },
        last_batch=max(numbers) if numbers else None,
        offsets={
            name: furthest(found.offsets.get(name, {}), logged.offsets.get(name, {}))
            for name in {*found.offsets, *logged.offsets}
        },
    )


def last_batch(spark: SparkSession, path: str, *, log_path: str | None = None, known: Ledger | None = None) -> int:
    """The last batch number committed to the table or to its change log (0 when neither exists).

    With ``known`` (the ledger :func:`state` just read), the number comes from its records when
    they carry one, which spares the Spark job that Delta's transaction state costs; the batch
    commit's idempotent transaction still settles any race."""
    if known is not None and known.last_batch is not None:
        return known.last_batch
    found = txn_version(spark, path) if table_exists(spark, path) else 0
    if log_path is not None and table_exists(spark, log_path):
        found = max(found, txn_version(spark, log_path))
    return found


def ledger(spark: SparkSession, path: str) -> Ledger:
    """Walk the table's history (commit metadata only) into a :class:`Ledger`.

    A rollback undoes the batches of the versions after its target: their ids and snapshot
    positions are forgotten (the table no longer holds their changes), and, when recorded with
    ``reapply``, their files too, so that they are pending again.

    The walk is kept per table for the life of the process, and the next call reads only the
    commits made since (Delta's history is append-only): a table applied to every few minutes
    gathers thousands of commits, and reading all of them for every batch would make a batch's
    cost grow with the table's age. A process's first walk starts from the walk saved beside the
    table (:mod:`lakemerge.table.saved_walks`), which also keeps what commits removed by Delta's
    log cleanup said. A table recreated at the same path (another Delta table id), or history
    that does not continue the walk, is walked again from its start."""
    snapshot = latest_snapshot(spark, path)
    latest, table_id = snapshot.version, snapshot.table_id
    with _WALKS_LOCK:
        kept = _WALKS.get(path)
    walk: Walk | None = None
    if kept is not None and kept.table_id == table_id and kept.version <= latest:
        walk = _continued(spark, path, kept.copy(), latest)
    if walk is None:
        saved = saved_walks.load(spark, path, table_id, latest)
        walk = _continued(spark, path, Walk.from_json(table_id, saved), latest) if saved else None
    if walk is None:
        walk = Walk(table_id=table_id)
        for row in reversed(history_rows(spark, path)):
            walk.add(row)
    with _WALKS_LOCK:
        _WALKS[path] = walk
    _keep(spark, path, walk)
    return walk.ledger()


def _continued(spark: SparkSession, path: str, walk: Walk, latest: int) -> Walk | None:
    """``walk`` with the commits after its version up to ``latest`` added; ``None`` when the
    history does not continue it."""
    if latest == walk.version:
        return walk
    fresh = commit_rows(spark, path, walk.version + 1, latest)
    if fresh is None:
        # A few more than the versions known to be new: a commit may land meanwhile.
        rows = history_rows(spark, path, limit=latest - walk.version + _HISTORY_SLACK)
        fresh = sorted((r for r in rows if int(r["version"]) > walk.version), key=lambda r: int(r["version"]))
    numbers = [int(r["version"]) for r in fresh]
    expected = list(range(walk.version + 1, walk.version + 1 + len(numbers)))
    if not numbers or numbers != expected or numbers[-1] < latest:
        return None
    for row in fresh:
        walk.add(row)
    return walk


def _keep(spark: SparkSession, path: str, walk: Walk) -> None:
    """Save ``walk`` beside the table when the saved one is due (:mod:`lakemerge.table.saved_walks`);
    what was saved is remembered for the process, and a failed save is not tried again in it."""
    with _WALKS_LOCK:
        known = _SAVED.get(path)
    if known is None or known[0] != walk.table_id:
        listed = saved_walks.saved(spark, path, walk.table_id)
        known = (walk.table_id, listed[0][0], listed[0][2]) if listed else (walk.table_id, -1, 0.0)
    behind = walk.version - known[1]
    stale = time.time() - known[2] >= saved_walks.STALE_SECONDS
    if known[1] < 0 or behind >= saved_walks.EVERY or (behind > 0 and stale):
        saved_walks.save(spark, path, walk.table_id, walk.to_json())
        known = (walk.table_id, walk.version, time.time())
    with _WALKS_LOCK:
        _SAVED[path] = known


#: Extra history rows read beyond the versions known to be new (commits landing during the read).
_HISTORY_SLACK = 4


_WALKS: dict[str, Walk] = {}


#: Per table path, the walk saved beside it as this process knows it: table id, version (-1:
#: none), when it was saved.
_SAVED: dict[str, tuple[str, int, float]] = {}


_WALKS_LOCK = threading.Lock()


def check_unchanged(
    ledger: dict[str, tuple[AppliedFile, int]], path: str, size: int, modified: int, *, archived: bool = False
) -> bool:
    """True if ``path`` was applied before; raise if it was applied with another size or time.

    With ``archived`` (the feed moves applied files away), a file at an applied path but with
    another size or time is new content that arrived under a recurring name, not an error.

    Raises:
        InputError: the file changed after it was applied.
    """
    if path not in ledger:
        return False
    applied, version = ledger[path]
    if applied.size != size or applied.modified != modified:
        if archived:
            return False
        raise InputError(
            f"file was applied in table version {version} (size {applied.size}) and has changed since "
            f"(size {size}); a changed file is never re-applied silently: give the new content a new name",
            path=path,
        )
    return True


def find_commit(spark: SparkSession, path: str, batch_id: str) -> tuple[int, dict[str, str]] | None:
    """The version and Delta operation metrics of the commit recorded for ``batch_id``, or ``None``
    when Delta skipped the write because a concurrent writer committed the same batch number.

    The batch's commit is almost always the newest: its commit file is read first (no Spark job),
    then the newest few commits of the history, and the newest 50 only when it is not there either
    (concurrent writers, or a skipped write)."""
    latest = latest_snapshot(spark, path).version
    for row in commit_rows(spark, path, latest, latest) or []:
        record = parse_record(row["userMetadata"])
        if record and record.get("batch_id") == batch_id:
            return latest, dict(row["operationMetrics"])
    for limit in (_FIND_FIRST, 50):
        for row in history_rows(spark, path, limit=limit):
            record = parse_record(row["userMetadata"])
            if record and record.get("batch_id") == batch_id:
                return int(row["version"]), dict(row["operationMetrics"] or {})
    return None


#: History rows :func:`find_commit` reads first.
_FIND_FIRST = 3
