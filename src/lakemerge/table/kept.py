"""A ``log`` table's table, kept in memory between the batches of one process.

Between compactions a ``log`` table's table does not change: each batch appends to its change log.
Yet each batch reads the table's keys and sequences again to classify its changes against them (a
Parquet read of every file its keys are in, and Delta's planning of that scan). The second batch of
a process that plans against a version of the table keeps the columns it classifies by in Spark's
cache (memory, then disk), and the batches after it that plan against the same version read them
from there. A batch that sees a newer version (a compaction, another writer) reads it, and keeps it
from the next batch on; the older version's rows are released.

Kept are tables whose checksum lists their files (Delta lists up to 50 there), with statistics that
count their rows, of at most :data:`MAX_KEPT_BYTES` in the kept columns; at most
:data:`MAX_KEPT_TABLES` tables a process, the least recently read released first. A process that
applies one batch keeps nothing. ``spark.lakemerge.keepTable=false`` in the session's settings
turns it off.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakemerge.spark.backends import backend
from lakemerge.spark.cache import persisted
from lakemerge.table import stats
from lakemerge.table.snapshots import latest_snapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: Session setting that turns keeping tables off (``false``).
ENABLED_CONF = "spark.lakemerge.keepTable"
#: The most a kept table may hold, estimated from its rows and the kept columns' types.
MAX_KEPT_BYTES = 256 << 20
#: How many tables a process keeps at once.
MAX_KEPT_TABLES = 4

#: Bytes a value of each fixed-width type takes, by Spark's type name.
_FIXED_WIDTHS = {
    **dict.fromkeys(("byte", "boolean"), 1),
    "short": 2,
    **dict.fromkeys(("integer", "date", "float"), 4),
    **dict.fromkeys(("long", "double", "timestamp", "timestamp_ntz"), 8),
}
_OTHER_WIDTH = 32  # strings, binaries, decimals and nested values: a guess on the safe side


@dataclass
class _Kept:
    """What the process knows of one table: the session and version it was read in, and, from the
    second batch that read that version, its rows in Spark's cache."""

    session: Any
    version: tuple[str, int, tuple[str, ...]]
    persisted: DataFrame | None = None
    leaf: DataFrame | None = None


_kept: OrderedDict[str, _Kept] = OrderedDict()
_lock = threading.Lock()


def table_side(spark: SparkSession, path: str, frame: DataFrame) -> DataFrame:
    """``frame``, the whole table at ``path`` as a batch reads it at the table's latest version
    (:func:`lakemerge.table.snapshots.latest_snapshot`), or the same rows from memory where this
    process keeps them (see the module)."""
    if str(spark.conf.get(ENABLED_CONF, "true")).strip().lower() == "false":
        return frame
    snapshot = latest_snapshot(spark, path)
    rows = stats.listed_rows(snapshot)
    if rows is None or rows * _row_width(frame.schema) > MAX_KEPT_BYTES:
        return frame
    version = (snapshot.table_id, snapshot.version, tuple(frame.columns))
    session = backend(spark).identity()
    with _lock:
        found = _kept.get(path)
        if found is not None and found.version == version and _same(found.session, session):
            _kept.move_to_end(path)
            if found.leaf is None:
                found.persisted, found.leaf = persisted(frame)
            return found.leaf
        if found is not None:
            _release(found)
        _kept[path] = _Kept(session, version)
        while len(_kept) > MAX_KEPT_TABLES:
            _release(_kept.popitem(last=False)[1])
    return frame


def release_all() -> None:
    """Release every kept table (their rows leave Spark's cache)."""
    with _lock:
        while _kept:
            _release(_kept.popitem()[1])


def _same(kept: Any, session: Any) -> bool:
    try:
        return bool(kept.equals(session)) if hasattr(kept, "equals") else bool(kept == session)
    except Exception:  # a session of a JVM that has gone
        return False


def _release(kept: _Kept) -> None:
    if kept.persisted is None:
        return
    with contextlib.suppress(Exception):  # a stopped session took its cache with it
        kept.persisted.unpersist()


def _row_width(schema: StructType) -> int:
    return sum(_FIXED_WIDTHS.get(f.dataType.typeName(), _OTHER_WIDTH) for f in schema.fields)
