"""The local filesystem of a local session: Delta's commits without Hadoop's checksum side files.

Delta writes its commits, version checksums and ``_last_checkpoint`` through Hadoop's ``FileContext``,
whose default for ``file:`` paths (``ChecksumFs``) writes a ``.crc`` side file beside each file and
renames it with the file. With no native Hadoop library (PySpark ships none), Hadoop starts a process
for each status lookup in a rename (``readlink``, four per rename) and for each file it creates
(``chmod``): about twenty processes, 70-100 ms, for every Delta commit. Without the side files (Hadoop's
``RawLocalFs``) a commit starts half as many and takes 30-50 ms (bench/RESULTS.md, "Commits without
checksum side files"). Local sessions lakemerge starts use it; the files Delta reads and writes are
the same, and a reader that checks side files finds none for them, so checks nothing.

A file Delta overwrites in place (``_last_checkpoint``, ``_last_vacuum_info``) may still have a side file
from a session with the default: overwritten without it, the side file no longer matches, and such a
session's reads of the file fail their check (Delta then retries for three seconds, and finds the
checkpoint by listing). :func:`drop_stale_checksums` removes those side files before and after lakemerge
writes a table.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlparse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakemerge.config.table import TableConfig

logger = logging.getLogger(__name__)

#: The Hadoop setting of the ``FileContext`` implementation for ``file:`` paths.
SETTING = "spark.hadoop.fs.AbstractFileSystem.file.impl"

#: Hadoop's ``FileContext`` implementation for ``file:`` paths without checksum side files.
RAW = "org.apache.hadoop.fs.local.RawLocalFs"

#: The files of a Delta log that Delta overwrites in place.
OVERWRITTEN = ("_last_checkpoint", "_last_vacuum_info")


@contextlib.contextmanager
def writing(spark: SparkSession, paths: Iterable[str]) -> Iterator[None]:
    """A block that writes the Delta tables at ``paths``: their stale side files are dropped
    (:func:`drop_stale_checksums`) before it and after it, whatever happens in it."""
    paths = tuple(paths)
    drop_stale_checksums(spark, paths)
    try:
        yield
    finally:
        drop_stale_checksums(spark, paths)


def tables_of(table: TableConfig) -> tuple[str, ...]:
    """The Delta tables a batch or maintenance of ``table`` may write: the table, its log, its
    tombstones and its quarantine."""
    return (table.path, table.log_table, table.tombstone_table, table.quarantine)


def drop_stale_checksums(spark: SparkSession, paths: Iterable[str]) -> None:
    """Remove the checksum side files of the files Delta overwrites in place (:data:`OVERWRITTEN`)
    from the logs of the local Delta tables at ``paths``, when this session writes without side
    files (``RawLocalFs``, see the module's notes); nothing for other sessions or paths. Called before
    lakemerge writes a table (a side file beside a file it is about to overwrite would go stale, and
    Delta checks it on every read, in this session too) and after (a default session may have
    written one meanwhile). Removing a side file that still matches its file only stops the check.
    Never raises: a side file left in place costs a reader time, not data."""
    from lakemerge.spark.backends import backend

    try:
        if not backend(spark).jvm:
            return  # (the server writes its tables as its own settings say)
        if not str(spark.sparkContext.master).startswith("local") or spark.conf.get(SETTING, None) != RAW:
            return
        for path in paths:
            local = _local(spark, path)
            if local is None:
                continue
            for name in OVERWRITTEN:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(local, "_delta_log", f".{name}.crc"))
    except Exception:  # (a stopped session, say: nothing to clean then)
        logger.debug("side files of %s left in place", list(paths), exc_info=True)


def _local(spark: SparkSession, path: str) -> str | None:
    """``path`` on this machine's filesystem (no scheme, or ``file:`` on this host), absolute as the
    JVM resolves it; else ``None``."""
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return parsed.path if parsed.netloc in ("", "localhost") else None
    if parsed.scheme and not (len(parsed.scheme) == 1 and os.name == "nt"):
        return None
    if os.path.isabs(path):
        return path
    from lakemerge.spark.backends import backend

    return backend(spark).driver_path(path)
