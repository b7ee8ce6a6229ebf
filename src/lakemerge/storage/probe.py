"""Reach the stores of a command's paths once before it starts, so that a store that cannot be
reached (no filesystem for its scheme in the session, wrong credentials, a missing bucket, an
unreachable endpoint) fails in one line naming the path, before anything is read or committed."""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lakemerge.errors import ConfigError, InputError
from lakemerge.storage import paths as spelling
from lakemerge.storage.filesystem import StorageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: What Hadoop says when a scheme has no filesystem class in the session (its jar is missing).
_NO_FILESYSTEM = ("No FileSystem for scheme", "S3AFileSystem not found", "ClassNotFoundException")

#: Java class names and S3A's restatement of the path, left out of the reason a user reads.
_NOISE = re.compile(r"(?:[a-z]\w*\.)+[A-Z]\w*(?:Exception|Error): |getFileStatus on [^:]*: |:null$")

#: The buckets each session reached already (a session's commands probe each bucket once).
_REACHED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def bucket(path: str) -> str:
    """The store and bucket of an object store's ``path``: ``s3a://lake``."""
    scheme, authority, _ = spelling.split(path)
    return f"{str(scheme).lower()}://{authority or ''}"


def stores(paths: Iterable[str]) -> dict[str, str]:
    """The first of ``paths`` on each object store's bucket (:func:`bucket`), in order."""
    seen: dict[str, str] = {}
    for path in paths:
        if spelling.is_object_store(path):
            seen.setdefault(bucket(path), path)
    return seen


def probe(spark: SparkSession, paths: Iterable[str]) -> None:
    """Ask the store of each bucket among ``paths`` (:func:`stores`) for its first path's status,
    once per session and bucket.

    Raises:
        ConfigError: the session has no filesystem for the path's scheme (its jar is missing).
        InputError: the store answered with an error or could not be reached (the path and the
            store's reason).
    """
    from lakemerge.storage.filesystems import filesystem

    with _LOCK:
        reached = _REACHED.setdefault(spark, set())
    for where, path in stores(paths).items():
        if where in reached:
            continue
        try:
            filesystem(spark, path).status(path)
        except StorageError as exc:
            reason = _NOISE.sub("", str(exc).replace(f"{path}: ", "")).strip() or str(exc)
            if any(marker in reason for marker in _NO_FILESYSTEM):
                scheme = spelling.scheme(path)
                raise ConfigError(
                    f"{path}: the Spark session has no filesystem for {scheme}: paths ({reason}); lakemerge adds "
                    "Hadoop's S3A jars to the sessions it starts, a session started elsewhere needs "
                    "org.apache.hadoop:hadoop-aws of its Hadoop release (lakemerge conf prints the settings)"
                ) from None
            raise InputError(f"cannot reach the store: {reason}", path=path) from None
        with _LOCK:
            reached.add(where)
