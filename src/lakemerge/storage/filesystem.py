"""What lakemerge asks of the filesystem holding landing zones and tables, behind one interface.

Listing a landing zone, checking that its files did not change, moving applied files to an archive,
reading a footer or a header, checking a table's folder: :class:`FileSystem` says what each needs.
A classic session's driver goes through Hadoop's FileSystem API in its JVM
(:mod:`lakemerge.storage.hadoop`); a Spark Connect client through ``pyarrow.fs`` where it can reach
the files itself (:mod:`lakemerge.storage.arrow`), or through Spark's own listing where only the
server can (:mod:`lakemerge.storage.server`). :func:`lakemerge.storage.filesystems.filesystem`
picks one per session and scheme; callers never ask which one they hold.

Every implementation spells paths as Hadoop does (:mod:`lakemerge.storage.paths`): fully qualified
(``file:/in/a.csv``, ``s3a://bucket/in/a.csv``), so that what one session records another finds.
"""

from __future__ import annotations

import abc
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, BinaryIO

from lakemerge.storage import globs, paths
from lakemerge.storage.entries import Entry, StorageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


__all__ = ["Entry", "FileSystem", "RangeReader", "StorageError"]


class FileSystem(abc.ABC):
    """One way to reach files (see the module)."""

    #: Whether files can be moved (an archive); where not, :attr:`immovable` says why and what to do.
    moves: bool = True
    immovable: str = ""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    @abc.abstractmethod
    def qualify(self, path: str) -> str:
        """``path`` fully qualified as Hadoop spells it (``/x`` → ``file:/x``)."""

    def uri(self, path: str) -> str:
        """How Spark's ``_metadata.file_path`` names the listed file ``path`` (percent-encoded)."""
        return paths.as_uri(path)

    @abc.abstractmethod
    def status(self, path: str) -> Entry | None:
        """The file or folder at ``path``; ``None`` when there is none.

        Raises:
            StorageError: the filesystem cannot tell (no permission, an unreachable store).
        """

    def statuses(self, listed: Sequence[str]) -> list[Entry | None]:
        """:meth:`status` of each of ``listed`` (some filesystems ask once for all)."""
        return [self.status(p) for p in listed]

    @abc.abstractmethod
    def listdir(self, path: str) -> list[Entry]:
        """The entries of the folder ``path`` (hidden ones too); none when it is absent or a file.

        Raises:
            StorageError: it cannot be listed.
        """

    @abc.abstractmethod
    def walk(self, path: str) -> list[Entry]:
        """Every entry under the folder ``path``, folders too, at any depth: a hidden folder
        (:func:`lakemerge.storage.paths.hidden`) is given, what it holds may be left out.

        Raises:
            StorageError: it cannot be listed.
        """

    def listing(self, path: str) -> list[Entry] | None:
        """What a location holds: ``[itself]`` for a file, :meth:`walk` for a folder, ``None``
        when there is nothing at ``path``."""
        found = self.status(path)
        if found is None:
            return None
        return self.walk(found.path) if found.directory else [found]

    def glob(self, pattern: str) -> list[Entry]:
        """The entries Hadoop's glob ``pattern`` matches (:mod:`lakemerge.storage.globs`).

        Raises:
            StorageError: a folder cannot be listed, or the pattern is not one.
        """
        try:
            return globs.glob(self, pattern)
        except globs.PatternError as exc:
            raise StorageError(str(exc)) from None

    def exists(self, path: str) -> bool:
        """Whether there is a file or folder at ``path`` (its name taken as it is)."""
        return self.status(path) is not None

    @abc.abstractmethod
    def mkdirs(self, path: str) -> None:
        """Make the folder ``path`` and those above it (nothing on an object store, whose folders
        come with their objects)."""

    @abc.abstractmethod
    def move(self, source: str, target: str) -> None:
        """Move the file ``source`` to ``target`` (its folder made as needed), never over an entry.

        Raises:
            StorageError: ``target`` exists, or the move failed.
        """

    @abc.abstractmethod
    def open(self, path: str) -> BinaryIO:
        """The bytes of the file ``path``, to read and seek (a footer, a header).

        Raises:
            StorageError: it cannot be opened.
        """

    @abc.abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Write ``data`` as the file ``path`` (its folder made as needed), replacing one there.

        Raises:
            StorageError: it cannot be written (here, or by this filesystem at all).
        """

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Delete the file ``path`` (nothing when there is none).

        Raises:
            StorageError: it cannot be deleted.
        """

    def parquet_schema(self, path: str) -> StructType | None:
        """The Spark schema of the Parquet file ``path`` as Spark reads it from its footer
        (:func:`lakemerge.storage.footers.parquet_schema`); ``None`` where it cannot be read so."""
        from lakemerge.storage import footers

        try:
            with self.open(path) as file:
                return footers.parquet_schema(file, footers.ParquetSettings.of(self.spark))
        except Exception:  # (Spark's own inference then names the problem)
            return None

    def parquet_metadata(self, path: str, key: str) -> str | None:
        """The value of ``key`` in the key-value metadata of the Parquet file ``path``'s footer."""
        from lakemerge.storage import footers

        try:
            with self.open(path) as file:
                return footers.parquet_metadata(file).get(key)
        except Exception:  # (Spark's reader then names the problem)
            return None

    def avro_schema(self, path: str) -> str | None:
        """The writer schema (JSON) in the header of the Avro file ``path``; ``None`` where it
        cannot be read (Spark's reader then names the problem)."""
        from lakemerge.storage import footers

        try:
            with self.open(path) as file:
                return footers.avro_schema(file)
        except Exception:  # (Spark's reader then names the problem)
            return None


class RangeReader(io.RawIOBase):
    """A seekable binary file over a function reading ``length`` bytes at ``offset``, of a file of
    ``size`` bytes: for filesystems whose files are read by ranges (py4j, Spark)."""

    def __init__(self, size: int, read_range: object) -> None:
        super().__init__()
        assert callable(read_range)
        self._size, self._read_range, self._position = size, read_range, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer: object) -> int:
        view = memoryview(buffer)  # type: ignore[arg-type]
        length = min(len(view), self._size - self._position)
        if length <= 0:
            return 0
        data: bytes = self._read_range(self._position, length)
        view[: len(data)] = data
        self._position += len(data)
        return len(data)
