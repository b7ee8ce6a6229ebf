"""Roll a table back to an earlier version with Delta's RESTORE (chombo's backup of the master data, as one commit).

The restore is one commit. Its record says whether the files applied by the undone versions
become pending again (``reapply``: the next run applies them anew) or stay consumed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lakemerge.errors import ConfigError, TableError
from lakemerge.operations.inspect import require_table
from lakemerge.results import RollbackResult
from lakemerge.spark import localfs
from lakemerge.table import ledger, store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def rollback(
    spark: SparkSession,
    path: str,
    *,
    to_version: int | None = None,
    to_timestamp: str | None = None,
    reapply: bool,
) -> RollbackResult:
    """Restore ``path`` to ``to_version`` (or to the last version committed at or before
    ``to_timestamp``, an ISO-8601 time, UTC unless it says otherwise).

    Raises:
        ConfigError: neither or both targets given, or a target outside the table's history.
        TableError: no Delta table at ``path``.
    """
    require_table(spark, path)
    if store.table_exists(spark, f"{path.rstrip('/')}__log"):
        raise ConfigError(
            f"{path} has a change log ({path.rstrip('/')}__log, write_mode = 'log'): rolling back the table alone "
            "would not undo batches still in the log; rollback is not supported for log-mode tables"
        )
    if (to_version is None) == (to_timestamp is None):
        raise ConfigError("give exactly one of --to-version and --to-timestamp")
    rows = ledger.history_rows(spark, path)
    latest = int(rows[0]["version"])
    if to_timestamp is not None:
        target_ms = _epoch_ms(to_timestamp)
        eligible = [int(r["version"]) for r in rows if int(r["ts_ms"]) <= target_ms]
        if not eligible:
            raise ConfigError(f"no version of {path} was committed at or before {to_timestamp}")
        to_version = max(eligible)
    assert to_version is not None
    known = {int(r["version"]) for r in rows}
    if to_version not in known or to_version > latest:
        raise ConfigError(f"version {to_version} is not in the history of {path} (latest is {latest})")
    if to_version == latest:
        raise ConfigError(f"{path} is already at version {latest}; nothing to roll back")
    undone = [r for r in rows if int(r["version"]) > to_version]
    pending = sorted(
        {f["path"] for r in undone for f in (ledger.parse_record(r["userMetadata"]) or {}).get("files", [])}
    )
    record = {"rollback": {"from_version": latest, "to_version": to_version, "reapply": reapply}}
    with localfs.writing(spark, (path,)), ledger.commit_record(spark, record, txn_version=None):
        spark.sql(f"RESTORE TABLE {store.sql_path(path)} TO VERSION AS OF {to_version}").collect()
    version = int(ledger.history_rows(spark, path, limit=1)[0]["version"])
    if version == latest:
        raise TableError(f"{path}: the restore made no commit")
    return RollbackResult(
        path=path,
        from_version=latest,
        to_version=to_version,
        version=version,
        reapply=reapply,
        pending_again=tuple(pending) if reapply else (),
    )


def _epoch_ms(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"--to-timestamp: {text!r} is not an ISO-8601 time (e.g. 2026-11-22T10:30:00)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
