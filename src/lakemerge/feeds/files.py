"""List a feed's change files and put them in order.

Listing goes through the session's filesystem (:mod:`lakemerge.storage`: Hadoop in a classic
session; ``pyarrow.fs`` or Spark's own listing over Spark Connect), which keeps every path a URI
spelled as Hadoop spells it (``file:``, ``hdfs:``, ``s3a:``), so the same code lists a laptop's
folder and a cluster's object store.

File order, used to break ties between changes with equal sequences, is defined as:

- ``file_order = "name"``: by the file's full path, compared as a string;
- ``file_order = "name_number"``: by the number after the last ``_`` of the name (before the
  extension; ``products_1428415316.csv`` → 1428415316), then by path;
- ``file_order = "mtime"``: by modification time, then by path.

A location is a Hadoop glob pattern (``landing/*/orders_*.csv``), as Spark's readers take one; a
listed file is a path, read by its very name: :func:`literal` escapes the characters a glob gives a
meaning wherever a listed path meets a glob's expansion (Spark's readers). On an object store
(``s3a:``, ``gs:``, ``abfss:``...), where a folder is only the prefix of the objects in it, an empty
or absent location holds no file; elsewhere a location that does not exist is an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakemerge.config.base import absolute
from lakemerge.errors import InputError
from lakemerge.storage import paths
from lakemerge.storage.filesystem import Entry, FileSystem, StorageError
from lakemerge.storage.filesystems import filesystem
from lakemerge.storage.globs import GLOB_CHARACTERS, is_pattern, literal, split_prefix

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["GLOB_CHARACTERS", "FeedFile", "is_pattern", "literal"]

_NAME_NUMBER = re.compile(r"_(\d+)(?:\.[^._]*)*$")


@dataclass(frozen=True, order=True)
class FeedFile:
    """One change file, as listed before reading.

    Attributes:
        path: the fully qualified Hadoop path, as listed: the file's real name, recorded so in the
            ledger (Spark's readers take it through :func:`literal`, and report it percent-encoded,
            :func:`spark_file_path`).
        name: the last path component.
        size: bytes.
        modified: modification time, epoch milliseconds.
        name_number: the number after the last ``_`` in the name, if any.
    """

    path: str
    name: str
    size: int
    modified: int
    name_number: int | None

    def is_delete_file(self, prefix: str | None) -> bool:
        """True when ``prefix`` is set and the file's name starts with it."""
        return bool(prefix) and self.name.startswith(prefix or "")


def name_number(name: str) -> int | None:
    """The number after the last ``_`` in a file name, ignoring extensions (``x_17.csv.gz`` → 17)."""
    match = _NAME_NUMBER.search(name)
    return int(match.group(1)) if match else None


#: Why an entry of a landing zone is not read (:func:`list_feed_entries`).
HIDDEN = "hidden: its name starts with '.' or '_' (as Hadoop's and Spark's own files do); not read"
UNLISTED = "Hadoop does not list it (a dangling symbolic link, or an entry it cannot read); not read"


def list_feed_files(spark: SparkSession, locations: Iterable[str], *, file_order: str) -> list[FeedFile]:
    """The change files under ``locations`` in file order (:func:`list_feed_entries` without the
    entries it does not read)."""
    return list_feed_entries(spark, locations, file_order=file_order)[0]


def list_feed_entries(
    spark: SparkSession, locations: Iterable[str], *, file_order: str
) -> tuple[list[FeedFile], list[tuple[str, str]]]:
    """List every change file under ``locations`` (files, directories walked recursively, or globs),
    in file order, and the entries found there that are not read, each with why: hidden ones (``.``
    or ``_`` prefix, as Spark skips them) and, on the local filesystem, entries it does not list
    (dangling symbolic links).

    Raises:
        InputError: a location does not exist (on an object store, an absent one holds no file) or
            cannot be listed, or (for ``name_number``) a file's name carries no number.
    """
    seen: dict[str, FeedFile] = {}
    ignored: dict[str, str] = {}
    for location in map(absolute, locations):
        for entry in location_files(filesystem(spark, location), location, ignored):
            seen[entry.path] = FeedFile(entry.path, entry.name, entry.size, entry.modified, name_number(entry.name))
    files = list(seen.values())
    if file_order == "name_number":
        missing = [f.path for f in files if f.name_number is None]
        if missing:
            raise InputError(
                "file name has no number after its last '_' (e.g. products_1428415316.csv), which orders "
                "changes when the feed has no ordering field",
                path=missing[0],
            )
        files.sort(key=lambda f: (f.name_number, f.path))
    elif file_order == "mtime":
        files.sort(key=lambda f: (f.modified, f.path))
    else:
        files.sort(key=lambda f: f.path)
    return files, sorted(ignored.items())


def qualified(spark: SparkSession, path: str) -> str:
    """``path`` as a fully qualified Hadoop URI (``/x`` → ``file:/x``, or ``hdfs://nn:8020/x`` when
    the default filesystem is HDFS), spelled as Hadoop lists files, so that paths compare as strings."""
    return filesystem(spark, path).qualify(absolute(path))


def spark_file_path(spark: SparkSession, path: str) -> str:
    """How Spark's ``_metadata.file_path`` spells a listed file: its URI, percent-encoded
    (``file:/x/a b.csv`` → ``file:/x/a%20b.csv``)."""
    return filesystem(spark, path).uri(path)


def location_files(fs: FileSystem, location: str, ignored: dict[str, str]) -> list[Entry]:
    """The files the absolute ``location`` names on ``fs``, noting in ``ignored`` what is not read
    there, each with why (see :func:`list_feed_entries`).

    Raises:
        InputError: the location does not exist (not on an object store) or cannot be listed.
    """
    try:
        if is_pattern(location):
            matched = fs.glob(location)
            if not matched:
                _check_unmatched(fs, location)
            return [found for entry in matched for found in _walk(fs, entry, ignored)]
        listed = fs.listing(location)
        if listed is None:
            if paths.is_object_store(location):
                return []  # (an object store has no empty folders: nothing has arrived)
            raise InputError("input path does not exist", path=location)
        own = fs.qualify(location)
        if len(listed) == 1 and listed[0].path == own and not listed[0].directory:
            return _walk(fs, listed[0], ignored)
        return _visible(own, listed, ignored)
    except StorageError as exc:
        raise InputError(f"cannot list input path: {exc}", path=location) from None


def _walk(fs: FileSystem, entry: Entry, ignored: dict[str, str]) -> list[Entry]:
    """The files of one listed entry: itself, or those of the folder it is."""
    if not entry.directory:
        if paths.hidden(entry.name):
            ignored[entry.path] = HIDDEN
            return []
        return [entry]
    return _visible(entry.path, fs.walk(entry.path), ignored)


def _visible(folder: str, entries: Iterable[Entry], ignored: dict[str, str]) -> list[Entry]:
    """The files among a folder's entries that are read: none inside a hidden folder (which is
    noted once), none that the filesystem does not list."""
    found: list[Entry] = []
    for entry in entries:
        inside = paths.relative(entry.path, folder)
        parts = inside.split("/") if inside else [entry.name]
        concealed = next((i for i, part in enumerate(parts) if paths.hidden(part)), None)
        if concealed is not None:
            ignored[paths.child(folder, "/".join(parts[: concealed + 1]))] = HIDDEN
        elif not entry.listed:
            ignored[entry.path] = UNLISTED
        elif not entry.directory:
            found.append(entry)
    return found


def _check_unmatched(fs: FileSystem, location: str) -> None:
    """A pattern that matches no entry names nothing pending when the folder before its first
    wildcard exists (as an empty folder holds none: ``landing/*.csv`` once every file is archived),
    or is on an object store.

    Raises:
        InputError: that folder does not exist; the pattern has no wildcard (its characters are all
            escaped) and names a path that does not exist; or an entry spelled as the pattern is
            exists (it is named by escaping the pattern's characters).
    """
    if fs.exists(location):  # (the name as it is)
        raise InputError(
            f"input pattern matches no file; a location is a glob pattern, in which {' '.join(GLOB_CHARACTERS)} "
            f"have a meaning: to name the entry of this very name, write a backslash before each ({literal(location)})",
            path=location,
        )
    if paths.is_object_store(location):
        return
    prefix, rest = split_prefix(location)
    fixed: list[str] = []
    for part in rest.split("/"):
        if any(c in "[{*?" for c in re.sub(r"\\.", "", part)):  # (a wildcard, not escaped)
            break
        fixed.append(re.sub(r"\\(.)", r"\1", part))
    else:  # (every character escaped: the pattern names one path)
        raise InputError("input path does not exist", path=prefix + "/".join(fixed))
    folder = prefix + ("/".join(fixed) or "/")
    if not fs.exists(folder):
        raise InputError(
            f"input pattern matches no file: the folder before its first wildcard ({folder}) does not exist",
            path=location,
        )


def first_changed(spark: SparkSession, files: Sequence[FeedFile]) -> str | None:
    """The first of ``files`` that is gone, or whose size or modification time (to the second: an
    object store's listing and its status call give the time to different precisions) is no longer
    the listed one; ``None`` when none changed. One status call per file (Hadoop keeps one
    filesystem object per scheme and host), or one listing of them all where the filesystem lists.

    Raises:
        InputError: a file's status cannot be read (other than its being gone).
    """
    by_fs: dict[int, tuple[FileSystem, list[FeedFile]]] = {}
    for item in files:
        fs = filesystem(spark, item.path)
        by_fs.setdefault(id(fs), (fs, []))[1].append(item)
    changed: list[str] = []
    for fs, items in by_fs.values():
        try:
            statuses = fs.statuses([i.path for i in items])
        except StorageError:
            statuses = [_status(fs, i.path) for i in items]  # (to name the file at fault)
        for item, status in zip(items, statuses, strict=True):
            if status is None or status.size != item.size or status.modified // 1000 != item.modified // 1000:
                changed.append(item.path)
                break
    order = {f.path: i for i, f in enumerate(files)}
    return min(changed, key=order.__getitem__) if changed else None


def _status(fs: FileSystem, path: str) -> Entry | None:
    try:
        return fs.status(path)
    except StorageError as exc:
        raise InputError(f"cannot read the file's status: {exc}", path=path) from None
