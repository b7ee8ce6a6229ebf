"""List a feed's change files through Hadoop's FileSystem API and put them in order.

Going through Hadoop (not ``os``) keeps every path a URI (``file:``, ``hdfs:``, ``s3a:``), so the
same code lists a laptop's folder and a cluster's object store.

File order, used to break ties between changes with equal sequences, is defined as:

- ``file_order = "name"``: by the file's full path, compared as a string;
- ``file_order = "name_number"``: by the number after the last ``_`` of the name (before the
  extension; ``products_1428415316.csv`` → 1428415316), then by path;
- ``file_order = "mtime"``: by modification time, then by path.

A location is a Hadoop glob pattern (``landing/*/orders_*.csv``), as Spark's readers take one; a
listed file is a path, read by its very name: :func:`literal` escapes the characters a glob gives a
meaning wherever a listed path meets a glob's expansion (Spark's readers, ``globStatus``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakemerge.config.base import absolute
from lakemerge.errors import InputError
from lakemerge.spark.jvm import jclass

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_NAME_NUMBER = re.compile(r"_(\d+)(?:\.[^._]*)*$")

#: The characters a Hadoop glob pattern gives a meaning (``org.apache.hadoop.fs.GlobPattern``, as
#: Spark's readers tell a pattern from a path); a backslash before one makes it stand for itself.
GLOB_CHARACTERS = "[]{}*?\\"

#: A URI's scheme and authority (``s3a://bucket``, ``file:``), which a pattern leaves as they are.
_PREFIX = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:(?://[^/]*)?)?")


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
COLON = "its name holds ':', which a Hadoop path cannot hold; not read: rename it to apply it"
UNLISTED = "Hadoop does not list it (a dangling symbolic link, or an entry it cannot read); not read"


def literal(path: str) -> str:
    """The glob pattern that matches ``path`` and nothing else: each of ``[ ] { } * ? \\`` in it
    after its scheme and authority escaped with a backslash (``file:/in/o[2].csv`` →
    ``file:/in/o\\[2\\].csv``). Spark's readers expand the paths they are given as patterns, so a
    listed file reaches them in this form; its rows still report its real path."""
    prefix, rest = _split(path)
    return prefix + "".join("\\" + c if c in GLOB_CHARACTERS else c for c in rest)


def _split(path: str) -> tuple[str, str]:
    """``path``'s scheme and authority (``s3a://bucket``, ``file:``, or nothing), and the rest."""
    prefix = _PREFIX.match(path)
    start = prefix.end() if prefix else 0
    return path[:start], path[start:]


def is_pattern(location: str) -> bool:
    """Whether ``location`` holds a character a glob gives a meaning (then it is expanded as one)."""
    return any(c in GLOB_CHARACTERS for c in location)


def list_feed_files(spark: SparkSession, locations: Iterable[str], *, file_order: str) -> list[FeedFile]:
    """The change files under ``locations`` in file order (:func:`list_feed_entries` without the
    entries it does not read)."""
    return list_feed_entries(spark, locations, file_order=file_order)[0]


def list_feed_entries(
    spark: SparkSession, locations: Iterable[str], *, file_order: str
) -> tuple[list[FeedFile], list[tuple[str, str]]]:
    """List every change file under ``locations`` (files, directories walked recursively, or globs),
    in file order, and the entries found there that are not read, each with why: hidden ones (``.``
    or ``_`` prefix, as Spark skips them), names a Hadoop path cannot hold, and, on the local
    filesystem, entries Hadoop does not list (dangling symbolic links).

    Raises:
        InputError: a location does not exist or cannot be listed, or (for ``name_number``) a
            file's name carries no number.
    """
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    seen: dict[str, FeedFile] = {}
    ignored: dict[str, str] = {}
    for location in map(absolute, locations):
        for status in _statuses(spark, hadoop_conf, location, ignored):
            path = status.getPath()
            if ":" in str(path.getName()):
                ignored[str(path.toString())] = COLON
                continue
            item = FeedFile(
                path=str(path.toString()),
                name=str(path.getName()),
                size=int(status.getLen()),
                modified=int(status.getModificationTime()),
                name_number=name_number(str(path.getName())),
            )
            seen[item.path] = item
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
    hpath = jclass(spark, "org.apache.hadoop.fs.Path")(absolute(path))
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return str(fs.makeQualified(hpath).toString())


def spark_file_path(spark: SparkSession, path: str) -> str:
    """How Spark's ``_metadata.file_path`` spells a listed file: its URI, percent-encoded
    (``file:/x/a b.csv`` → ``file:/x/a%20b.csv``)."""
    return str(jclass(spark, "org.apache.hadoop.fs.Path")(path).toUri().toString())


def _statuses(spark: SparkSession, hadoop_conf: Any, location: str, ignored: dict[str, str]) -> list[Any]:
    path = jclass(spark, "org.apache.hadoop.fs.Path")(location)
    try:
        fs = path.getFileSystem(hadoop_conf)
        if is_pattern(location):
            matched = fs.globStatus(path) or []
            if not matched:
                _check_unmatched(spark, fs, path, location)
            return [found for status in matched for found in _walk(fs, status, ignored)]
        if not fs.exists(path):
            raise InputError("input path does not exist", path=location)
        return _walk(fs, fs.getFileStatus(path), ignored)
    except InputError:
        raise
    except Exception as exc:  # py4j wraps Java's IOExceptions
        raise InputError(f"cannot list input path: {_java_message(exc)}", path=location) from None


def _check_unmatched(spark: SparkSession, fs: Any, path: Any, location: str) -> None:
    """A pattern that matches no entry names nothing pending when the folder before its first
    wildcard exists (as an empty folder holds none: ``landing/*.csv`` once every file is archived).

    Raises:
        InputError: that folder does not exist; the pattern has no wildcard (its characters are all
            escaped) and names a path that does not exist; or an entry spelled as the pattern is
            exists (it is named by escaping the pattern's characters).
    """
    if fs.exists(path):  # (exists() takes the name as it is)
        raise InputError(
            f"input pattern matches no file; a location is a glob pattern, in which {' '.join(GLOB_CHARACTERS)} "
            f"have a meaning: to name the entry of this very name, write a backslash before each ({literal(location)})",
            path=location,
        )
    prefix, rest = _split(location)
    fixed: list[str] = []
    for part in rest.split("/"):
        if any(c in "[{*?" for c in re.sub(r"\\.", "", part)):  # (a wildcard, not escaped)
            break
        fixed.append(re.sub(r"\\(.)", r"\1", part))
    else:  # (every character escaped: the pattern names one path)
        raise InputError("input path does not exist", path=prefix + "/".join(fixed))
    folder = prefix + ("/".join(fixed) or "/")
    if not fs.exists(jclass(spark, "org.apache.hadoop.fs.Path")(folder)):
        raise InputError(
            f"input pattern matches no file: the folder before its first wildcard ({folder}) does not exist",
            path=location,
        )


def matched_locations(spark: SparkSession, locations: Iterable[str]) -> list[str]:
    """What ``locations`` name, as qualified Hadoop URIs: each pattern's matches (files or folders,
    as listing expands it), each other location itself."""
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    found: list[str] = []
    for location in map(absolute, locations):
        if not is_pattern(location):
            found.append(qualified(spark, location))
            continue
        path = jclass(spark, "org.apache.hadoop.fs.Path")(location)
        found.extend(str(s.getPath().toString()) for s in path.getFileSystem(hadoop_conf).globStatus(path) or [])
    return found


def _walk(fs: Any, status: Any, ignored: dict[str, str]) -> list[Any]:
    if not status.isDirectory():
        if _visible(str(status.getPath().getName())):
            return [status]
        ignored[str(status.getPath().toString())] = HIDDEN
        return []
    found: list[Any] = []
    listed = fs.listStatus(status.getPath())
    for child in listed:
        if _visible(str(child.getPath().getName())):
            found.extend(_walk(fs, child, ignored))
        else:
            ignored[str(child.getPath().toString())] = HIDDEN
    _unlisted(status.getPath(), {str(child.getPath().getName()) for child in listed}, ignored)
    return found


def _unlisted(directory: Any, names: set[str], ignored: dict[str, str]) -> None:
    """Note the entries of a local ``directory`` that Hadoop did not list (it passes over dangling
    symbolic links without a word)."""
    import os

    uri = directory.toUri()
    if str(uri.getScheme() or "file") != "file":
        return
    try:
        entries = os.listdir(str(uri.getPath()))
    except OSError:
        return
    for name in entries:
        if name not in names:
            where = str(directory.toString()).rstrip("/") + "/" + name
            ignored[where] = HIDDEN if not _visible(name) else UNLISTED


def _visible(name: str) -> bool:
    return not name.startswith((".", "_"))


def _java_message(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    for line in text:
        if "Exception:" in line:
            return line.split("Exception:", 1)[1].strip()
    return text[0] if text else type(exc).__name__


def first_changed(spark: SparkSession, files: Sequence[FeedFile]) -> str | None:
    """The first of ``files`` that is gone, or whose size or modification time (to the second: an
    object store's listing and its status call give the time to different precisions) is no longer
    the listed one; ``None`` when none changed. One status call per file (Hadoop keeps one
    filesystem object per scheme and host).

    Raises:
        InputError: a file's status cannot be read (other than its being gone).
    """
    from py4j.protocol import Py4JJavaError

    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    for item in files:
        path = jclass(spark, "org.apache.hadoop.fs.Path")(item.path)
        try:
            status = path.getFileSystem(hadoop_conf).getFileStatus(path)
        except Py4JJavaError as exc:
            if "FileNotFoundException" in str(exc.java_exception.getClass().getName()):
                return item.path
            raise InputError(f"cannot read the file's status: {_java_message(exc)}", path=item.path) from None
        same_time = int(status.getModificationTime()) // 1000 == item.modified // 1000
        if int(status.getLen()) != item.size or not same_time:
            return item.path
    return None
