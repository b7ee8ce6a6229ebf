"""What a filesystem's listing gives (:mod:`lakemerge.storage.filesystem`), and how it fails."""

from __future__ import annotations

from dataclasses import dataclass


class StorageError(Exception):
    """An operation of a filesystem failed; the text says why (the filesystem's own reason)."""


@dataclass(frozen=True)
class Entry:
    """A file or folder as a listing gives it.

    Attributes:
        path: fully qualified, spelled as Hadoop spells it (:mod:`lakemerge.storage.paths`).
        name: the last component of the path.
        size: bytes (0 for a folder).
        modified: the modification time, epoch milliseconds (0 where the filesystem gives none).
        directory: a folder (on an object store, a common prefix of objects).
        listed: ``False`` for an entry of a local folder that the filesystem does not list (a
            dangling symbolic link): it is there, and nothing reads it.
    """

    path: str
    name: str
    size: int = 0
    modified: int = 0
    directory: bool = False
    listed: bool = True
