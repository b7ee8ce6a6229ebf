"""The files only a Spark Connect server sees, listed through Spark's ``binaryFile`` source: each
file's path, size and modification time, its contents unread (:mod:`lakemerge.storage.filesystem`
says what a filesystem is).

Spark's listing passes over hidden entries (names starting with ``.`` or ``_``) and dangling links
without a word, so none is reported; folders are known from the files in them (an empty one is
none). A header or footer is read as a range of a file's contents, cut on the server. Nothing can
be moved from here: an archive needs a filesystem this client reaches itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

from lakemerge.config.base import absolute
from lakemerge.errors import first_line
from lakemerge.storage import globs, paths
from lakemerge.storage.filesystem import Entry, FileSystem, RangeReader, StorageError
from lakemerge.storage.globs import literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: What tells that a path Spark was given does not exist.
_ABSENT = ("PATH_NOT_FOUND", "Path does not exist")


class ServerFileSystem(FileSystem):
    """Files listed by the Spark Connect server (see the module)."""

    moves = False
    immovable = (
        'the landing zone is listed by the Spark Connect server (`[spark] landing = "server"`), and files '
        'cannot be moved from this client: set `landing = "client"` where this machine reaches the files '
        "(its own disk, S3, GCS), or leave `archive` out"
    )

    def __init__(self, spark: SparkSession) -> None:
        super().__init__(spark)
        found = spark.conf.get("spark.hadoop.fs.defaultFS", None) or "file:///"
        default_scheme, authority, _ = paths.split(str(found))
        self._default = f"{default_scheme or 'file'}:" + (f"//{authority}" if authority else "")

    def qualify(self, path: str) -> str:
        path = absolute(path)
        if paths.split(path)[0] is None:
            path = self._default + path
        return paths.spelled(path)

    def _files(self, locations: Sequence[str]) -> DataFrame:
        from pyspark.sql import functions as F

        return (
            self.spark.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .load([literal(p) for p in locations])
            .select("path", "length", F.unix_millis("modificationTime").alias("modified"))
        )

    def _list(self, locations: Sequence[str]) -> list[Entry] | None:
        """The files under ``locations`` (or those files themselves); ``None`` when one is absent."""
        try:
            rows = self._files(locations).collect()
        except Exception as exc:
            if any(marker in str(exc) for marker in _ABSENT):
                return None
            raise StorageError(first_line(exc)) from None
        return [_entry(r) for r in rows]

    def listing(self, path: str) -> list[Entry] | None:
        return self._list([path])

    def status(self, path: str) -> Entry | None:
        found = self._list([path])
        if found is None:
            return None
        own = self.qualify(path)
        return next((e for e in found if e.path == own), None) or Entry(own, own.rsplit("/", 1)[-1], directory=True)

    def statuses(self, listed: Sequence[str]) -> list[Entry | None]:
        found = self._list(listed) if listed else []
        if found is None:  # (one is gone: each alone)
            return [self.status(p) for p in listed]
        by_path = {e.path: e for e in found}
        return [by_path.get(self.qualify(p)) for p in listed]

    def listdir(self, path: str) -> list[Entry]:
        return _Tree(self._list([path]) or [], self.qualify(path)).listdir(self.qualify(path))

    def walk(self, path: str) -> list[Entry]:
        found = self._list([path])
        if found is None:
            raise StorageError(f"{path} does not exist")
        return found

    def glob(self, pattern: str) -> list[Entry]:
        """The folder before the pattern's first wildcard listed once; the pattern matched here."""
        scheme, authority, rest = paths.split(pattern)
        prefix = (f"{scheme}:" if scheme is not None else "") + (f"//{authority}" if authority is not None else "")
        fixed: list[str] = []
        for part in rest.split("/"):
            if globs.has_wildcard(part):
                break
            fixed.append(globs.unescaped(part))
        root = self.qualify(prefix + ("/".join(fixed) or "/"))
        tree = _Tree(self._list([root]) or [], root)
        try:
            return globs.glob(tree, pattern if scheme is not None else self.qualify("/")[:-1] + pattern)
        except globs.PatternError as exc:
            raise StorageError(str(exc)) from None

    def mkdirs(self, path: str) -> None:
        raise StorageError(self.immovable)

    def move(self, source: str, target: str) -> None:
        raise StorageError(self.immovable)

    def write(self, path: str, data: bytes) -> None:
        raise StorageError(f"{path}: files are listed by the Spark Connect server, and not written from this client")

    def delete(self, path: str) -> None:
        raise StorageError(f"{path}: files are listed by the Spark Connect server, and not deleted from this client")

    def open(self, path: str) -> BinaryIO:
        found = self.status(path)
        if found is None or found.directory:
            raise StorageError(f"{path}: no such file")
        return _Ranges(self, found.path, found.size)  # type: ignore[return-value]

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        from pyspark.sql import functions as F

        frame = self.spark.read.format("binaryFile").load(literal(path))
        row = frame.select(F.substring("content", offset + 1, length).alias("part")).collect()[0]
        return bytes(row["part"])

    def parquet_schema(self, path: str) -> StructType | None:
        return None  # (reading a footer here costs the Spark job that Spark's inference costs)


class _Ranges(RangeReader):
    """A file's contents read in blocks of at least 64 KiB, each one Spark job, the last kept."""

    BLOCK = 65536

    def __init__(self, fs: ServerFileSystem, path: str, size: int) -> None:
        self._block: tuple[int, bytes] = (0, b"")

        def read_range(offset: int, length: int) -> bytes:
            start, data = self._block
            if not (start <= offset and offset + length <= start + len(data)):
                begin = max(0, min(offset, size - max(length, self.BLOCK)))
                data = fs.read_range(path, begin, max(length, self.BLOCK))
                self._block = start, data = begin, data
            return data[offset - start : offset - start + length]

        super().__init__(size, read_range)


class _Tree:
    """Folders known from the files listed under ``root`` (Spark lists files alone)."""

    def __init__(self, files: list[Entry], root: str) -> None:
        self._entries: dict[str, dict[str, Entry]] = {}
        self._files = {f.path: f for f in files}
        for f in files:
            inside = paths.relative(f.path, root)
            if inside is None:
                continue
            parts = inside.split("/")
            folder = root
            for part in parts[:-1]:
                below = paths.child(folder, part)
                self._entries.setdefault(folder, {})[part] = Entry(below, part, directory=True)
                folder = below
            self._entries.setdefault(folder, {})[parts[-1]] = f

    def listdir(self, path: str) -> list[Entry]:
        return list(self._entries.get(path, {}).values())

    def status(self, path: str) -> Entry | None:
        if path in self._files:
            return self._files[path]
        if path in self._entries:
            return Entry(path, path.rsplit("/", 1)[-1], directory=True)
        return None


def _entry(row: Any) -> Entry:
    path = str(row["path"])
    return Entry(path, path.rsplit("/", 1)[-1], int(row["length"]), int(row["modified"]))
