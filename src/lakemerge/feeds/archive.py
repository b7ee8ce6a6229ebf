"""Move applied change files out of the landing zone, through the session's filesystem
(:mod:`lakemerge.storage`).

Archiving happens after the batch's commit. A crash in between leaves applied files in place;
they are recognised by the commit's record (and skipped) and archived by the next run.

A file keeps its place relative to its location (the folder it names, the folder holding the file
it names, or a pattern's folder before its first wildcard): ``landing/a/x.csv`` goes to
``archive/a/x.csv``, ``landing/b/x.csv`` to ``archive/b/x.csv``. Nothing is ever moved over an
existing entry: every destination is chosen before the first move, and one already taken (a file
name that recurs in the landing zone, its earlier content archived under it) gets the first free
suffix ``.1``, ``.2``, ..., or (the feed's ``archive_conflict = "fail"``) stops the archiving
before anything moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from lakemerge.config.base import absolute
from lakemerge.config.feed import ArchiveConflict
from lakemerge.errors import ConfigError, InputError
from lakemerge.storage import paths
from lakemerge.storage.filesystem import Entry, FileSystem, StorageError
from lakemerge.storage.filesystems import filesystem
from lakemerge.storage.globs import has_wildcard, is_pattern, split_prefix, unescaped

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def check_archive(spark: SparkSession, locations: Sequence[str], archive: str) -> None:
    """Raise, before any batch, when files of ``locations`` cannot be moved to ``archive``.

    Raises:
        ConfigError: the filesystem reaching them moves nothing (saying why and what to set).
    """
    for path in (archive, *locations):
        fs = filesystem(spark, absolute(path))
        if not fs.moves:
            raise ConfigError(f"cannot archive applied files to {archive}: {fs.immovable}", key="feed.archive")


def archive_files(
    spark: SparkSession,
    files: Iterable[str],
    locations: Sequence[str],
    archive: str,
    *,
    conflict: ArchiveConflict = "suffix",
) -> list[tuple[str, str]]:
    """Move each of ``files`` that ``locations`` name into the folder ``archive``, keeping its path
    relative to its location (see the module). Files already gone are passed over.

    Returns:
        The (source, destination) pairs moved.

    Raises:
        InputError: a move failed (the files before it are archived, the others stay in place), or
            with ``conflict="fail"`` a destination is taken (nothing moved).
    """
    target = filesystem(spark, archive)
    root = target.qualify(archive)
    bases = [_base(spark, location) for location in map(absolute, locations)]
    planned: list[tuple[str, str]] = []
    taken: set[str] = set()
    for path in dict.fromkeys(files):
        source = filesystem(spark, path)
        below = next((b for b in (_below(source, path, base, matched) for base, matched in bases) if b), None)
        if below is None or _status(source, path) is None:
            continue
        wanted = paths.child(root, below)
        destination = _free(target, wanted, taken)
        if destination != wanted and conflict == "fail":
            raise InputError(
                f"cannot archive the applied file: {wanted} exists already (nothing was moved; move or rename"
                ' one of them, or set the feed\'s archive_conflict = "suffix" to keep both)',
                path=path,
            )
        taken.add(destination)
        planned.append((path, destination))
    moved = []
    for path, destination in planned:
        try:
            filesystem(spark, path).move(path, destination)
        except StorageError as exc:
            raise InputError(f"cannot move applied file to the archive {destination}: {exc}", path=path) from None
        moved.append((path, destination))
    return moved


def _base(spark: SparkSession, location: str) -> tuple[str, list[str] | None]:
    """The folder a location's files keep their paths relative to, and (for a pattern) what it
    matches: a pattern's folder before its first wildcard; a folder; a file's folder."""
    fs = filesystem(spark, location)
    if is_pattern(location):
        prefix, rest = split_prefix(location)
        fixed: list[str] = []
        for part in rest.split("/"):
            if has_wildcard(part):
                break
            fixed.append(unescaped(part))
        matched = [e.path for e in fs.glob(location)] if fixed != rest.split("/") else None
        if matched is not None:
            return fs.qualify(prefix + ("/".join(fixed) or "/")), matched
        location = prefix + "/".join(fixed)
    own = fs.qualify(location)
    found = _status(fs, own)
    if found is not None and not found.directory:
        return own.rsplit("/", 1)[0], [own]
    return own, [own]


def _below(fs: FileSystem, path: str, base: str, matched: list[str] | None) -> str | None:
    """``path``'s part below ``base`` when one of ``matched`` is it or holds it; else ``None``."""
    qualified = fs.qualify(path)
    if not any(qualified == m or paths.relative(qualified, m) is not None for m in matched or [base]):
        return None
    return paths.relative(qualified, base)


def _free(fs: FileSystem, wanted: str, taken: set[str]) -> str:
    """``wanted``, or with the first suffix ``.1``, ``.2``... that names no entry yet."""
    candidate, n = wanted, 0
    while candidate in taken or _status(fs, candidate) is not None:
        n += 1
        candidate = f"{wanted}.{n}"
    return candidate


def _status(fs: FileSystem, path: str) -> Entry | None:
    try:
        return fs.status(path)
    except StorageError as exc:
        raise InputError(f"cannot read the status of {path}: {exc}", path=path) from None
