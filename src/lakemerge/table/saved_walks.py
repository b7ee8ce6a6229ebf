"""The ledger walk saved beside its table, so that a process's first batch reads a few commits
instead of the table's whole history, and the record of applied files outlives Delta's log cleanup.

The walk (:func:`lakemerge.table.ledger.ledger`) is what the commits up to one version say, and a
commit never changes: saved as of version ``V``, it is the walk of any later reader up to ``V``,
which then reads only the commits after it. It is saved as ``_lakemerge_ledger/<V>-<id>.json.gz`` in
the table's folder (Delta's readers and its ``VACUUM`` leave names starting with ``_`` alone), ``id``
the table's Delta id: a table recreated at the path has another id, and its walk starts again. A file
that cannot be read whole is passed over; one that cannot be written is not needed (the history
holds the same, until log cleanup), so a failure to save costs only the next process's longer walk.

It is saved again once it is :data:`EVERY` commits behind the table, or :data:`STALE_SECONDS` old
and behind: with Delta's 30 days of log retention, no commit leaves the history before a saved
walk holds it.
"""

from __future__ import annotations

import gzip
import json
import re
from typing import TYPE_CHECKING, Any

from lakemerge.storage.filesystem import StorageError
from lakemerge.storage.filesystems import filesystem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The folder of saved walks, in the table's folder.
FOLDER = "_lakemerge_ledger"
#: Commits a saved walk may be behind the table before it is saved again.
EVERY = 20
#: Seconds a saved walk behind the table may age before it is saved again.
STALE_SECONDS = 86_400.0
#: How many saved walks are kept (the newest, and the one before it for a reader listing meanwhile).
KEPT = 2
#: The layout of a saved walk; another is passed over.
FORMAT = 1

_NAME = re.compile(r"(\d{20})-(.+)\.json\.gz")


def folder(path: str) -> str:
    return f"{path.rstrip('/')}/{FOLDER}"


def saved(spark: SparkSession, path: str, table_id: str) -> list[tuple[int, str, float]]:
    """The walks saved for the table at ``path`` whose Delta id is ``table_id``: version, file and
    when it was written (seconds since the epoch), newest first; none where the folder cannot be
    listed."""
    return [(v, file, written) for v, found_id, file, written in _listed(spark, path) if found_id == table_id]


def load(spark: SparkSession, path: str, table_id: str, at_most: int) -> dict[str, Any] | None:
    """The newest walk saved for the table with Delta id ``table_id`` at a version up to
    ``at_most`` (the walk's JSON form), or ``None``."""
    for version, file, _ in saved(spark, path, table_id):
        if version > at_most:
            continue
        try:
            with filesystem(spark, path).open(file) as opened:
                payload = json.loads(gzip.decompress(opened.read()))
        except Exception:  # (written in part, a checksum that fails, not lakemerge's: an older one may do)
            continue
        if isinstance(payload, dict) and payload.get("format") == FORMAT and payload.get("version") == version:
            return payload
    return None


def save(spark: SparkSession, path: str, table_id: str, payload: dict[str, Any]) -> bool:
    """Save the walk ``payload`` (its JSON form, with its ``version``) of the table with Delta id
    ``table_id``, then delete the walks of other ids and all but the :data:`KEPT` newest; whether
    it was saved."""
    fs = filesystem(spark, path)
    version = int(payload["version"])
    data = gzip.compress(json.dumps({**payload, "format": FORMAT}, separators=(",", ":")).encode(), mtime=0)
    try:
        fs.write(f"{folder(path)}/{version:020d}-{table_id}.json.gz", data)
        mine = 0
        for _, found_id, file, _ in _listed(spark, path):
            mine += found_id == table_id
            if found_id != table_id or mine > KEPT:
                fs.delete(file)
    except StorageError:
        return False
    return True


def _listed(spark: SparkSession, path: str) -> list[tuple[int, str, str, float]]:
    """Every saved walk in the table's folder: version, table id, file, when written; newest first."""
    try:
        entries = filesystem(spark, path).listdir(folder(path))
    except StorageError:
        return []
    found = []
    for entry in entries:
        named = _NAME.fullmatch(entry.name)
        if named and not entry.directory:
            found.append((int(named[1]), named[2], entry.path, entry.modified / 1000))
    return sorted(found, reverse=True)
