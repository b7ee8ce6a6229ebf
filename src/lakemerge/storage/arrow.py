"""The filesystem a Spark Connect client reaches itself, through ``pyarrow.fs`` (PySpark's Connect
client brings pyarrow): this machine's disk, S3, GCS, and HDFS where libhdfs loads
(:mod:`lakemerge.storage.filesystem` says what a filesystem is).

Paths keep Hadoop's spelling (``s3a://bucket/key``, ``file:/x``); each maps to pyarrow's
(``bucket/key``, ``/x``). S3 takes the session's S3A settings (``spark.hadoop.fs.s3a.*``, and their
per-bucket forms ``fs.s3a.bucket.NAME.*``): endpoint, region, credentials, path-style access, SSL.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from lakemerge.config.base import absolute
from lakemerge.storage import paths
from lakemerge.storage.filesystem import Entry, FileSystem, StorageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The schemes pyarrow's S3 filesystem serves, and GCS's.
S3 = frozenset({"s3a", "s3", "s3n"})
GCS = frozenset({"gs", "gcs"})
HDFS = frozenset({"hdfs", "viewfs"})

#: S3A's credentials provider that signs nothing.
_ANONYMOUS = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"


def serves(scheme: str) -> bool:
    """Whether this module reaches paths of ``scheme`` (HDFS only where libhdfs loads)."""
    if scheme == "file" or scheme in S3 or scheme in GCS:
        return True
    if scheme in HDFS:
        try:
            from pyarrow.fs import HadoopFileSystem

            HadoopFileSystem("default")
        except Exception:  # (no libhdfs or no JVM here)
            return False
        return True
    return False


class ArrowFileSystem(FileSystem):
    """The files of one scheme through ``pyarrow.fs`` (one of pyarrow's filesystems per bucket or
    name node, made once)."""

    def __init__(self, spark: SparkSession, scheme: str) -> None:
        super().__init__(spark)
        self.scheme = scheme
        self._object_store = scheme in paths.OBJECT_STORES
        self._made: dict[str | None, Any] = {}
        self._lock = threading.Lock()

    def _arrow(self, path: str) -> tuple[Any, str, Callable[[str], str]]:
        """pyarrow's filesystem for ``path``, the path in its spelling, and the function spelling
        its paths back as Hadoop does."""
        _, authority, rest = paths.split(path)
        with self._lock:
            made = self._made.get(authority)
            if made is None:
                made = self._made[authority] = self._make(authority)
        if self.scheme == "file":
            return made, rest or "/", lambda p: "file:" + p
        if self.scheme in HDFS:
            return made, rest or "/", lambda p: f"{self.scheme}://{authority}{p}"
        inner = (authority or "") + (rest.rstrip("/") if rest != "/" else "")
        return made, inner, lambda p: f"{self.scheme}://{p}"

    def _make(self, authority: str | None) -> Any:
        from pyarrow import fs

        try:
            if self.scheme == "file":
                return fs.LocalFileSystem()
            if self.scheme in S3:
                return fs.S3FileSystem(**s3_options(self._settings("spark.hadoop.fs.s3a."), authority or ""))
            if self.scheme in GCS:
                return fs.GcsFileSystem()
            host, _, port = (authority or "default").partition(":")
            return fs.HadoopFileSystem(host, int(port) if port else 8020)
        except Exception as exc:
            raise StorageError(f"cannot reach {self.scheme}://{authority or ''}: {exc}") from None

    def _settings(self, prefix: str) -> dict[str, str]:
        everything = self.spark.conf.getAll
        found = everything() if callable(everything) else everything
        return {k[len(prefix) :]: str(v) for k, v in dict(found).items() if k.startswith(prefix)}

    def qualify(self, path: str) -> str:
        if self.scheme == "file":
            return paths.qualified_local(absolute(path))
        return paths.spelled(path)

    def status(self, path: str) -> Entry | None:
        fs, inner, spell = self._arrow(path)
        try:
            info = fs.get_file_info(inner)
        except Exception as exc:
            raise StorageError(_reason(exc)) from None
        return _entry(info, spell)

    def listdir(self, path: str) -> list[Entry]:
        from pyarrow.fs import FileSelector

        fs, inner, spell = self._arrow(path)
        try:
            infos = fs.get_file_info(FileSelector(inner, allow_not_found=True))
        except NotADirectoryError:
            return []
        except Exception as exc:
            if "not a directory" in str(exc).lower():
                return []
            raise StorageError(_reason(exc)) from None
        return [e for e in (_entry(i, spell) for i in infos) if e is not None]

    def walk(self, path: str) -> list[Entry]:
        """One recursive listing on an object store (a single paginated request for any depth);
        folder by folder elsewhere, leaving hidden folders unentered."""
        from pyarrow.fs import FileSelector

        fs, inner, spell = self._arrow(path)
        if self._object_store:
            try:
                infos = fs.get_file_info(FileSelector(inner, recursive=True))
            except Exception as exc:
                raise StorageError(_reason(exc)) from None
            return [e for e in (_entry(i, spell) for i in infos) if e is not None]
        return self._walk(path)

    def _walk(self, folder: str) -> list[Entry]:
        found: list[Entry] = []
        listed = self.listdir(folder)
        if not listed and self.status(folder) is None:
            raise StorageError(f"{folder} does not exist")
        for child in listed:
            found.append(child)
            if child.directory and not paths.hidden(child.name):
                found.extend(self._walk(child.path))
        if self.scheme == "file":
            found.extend(_unlisted(folder, {c.name for c in listed}))
        return found

    def mkdirs(self, path: str) -> None:
        if self._object_store:
            return
        fs, inner, _ = self._arrow(path)
        try:
            fs.create_dir(inner, recursive=True)
        except Exception as exc:
            raise StorageError(_reason(exc)) from None

    def move(self, source: str, target: str) -> None:
        if self.status(target) is not None:
            raise StorageError(f"{target} exists")
        fs, inner_source, _ = self._arrow(source)
        _, inner_target, _ = self._arrow(target)
        try:
            if not self._object_store:
                fs.create_dir(os.path.dirname(inner_target) or "/", recursive=True)
            fs.move(inner_source, inner_target)
        except Exception as exc:
            raise StorageError(_reason(exc)) from None

    def write(self, path: str, data: bytes) -> None:
        fs, inner, _ = self._arrow(path)
        try:
            if not self._object_store:
                fs.create_dir(os.path.dirname(inner) or "/", recursive=True)
            with fs.open_output_stream(inner) as out:
                out.write(data)
        except Exception as exc:
            raise StorageError(_reason(exc)) from None

    def delete(self, path: str) -> None:
        fs, inner, _ = self._arrow(path)
        try:
            fs.delete_file(inner)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise StorageError(_reason(exc)) from None

    def open(self, path: str) -> BinaryIO:
        fs, inner, _ = self._arrow(path)
        try:
            opened: BinaryIO = fs.open_input_file(inner)
        except Exception as exc:
            raise StorageError(_reason(exc)) from None
        return opened


def s3_options(settings: dict[str, str], bucket: str) -> dict[str, Any]:
    """pyarrow's ``S3FileSystem`` arguments from S3A's settings (keys without ``fs.s3a.``; a
    bucket's own ``bucket.NAME.KEY`` wins over ``KEY``)."""

    def get(key: str) -> str | None:
        found = settings.get(f"bucket.{bucket}.{key}", settings.get(key))
        return found.strip() if found is not None and found.strip() else None

    options: dict[str, Any] = {}
    endpoint = get("endpoint")
    ssl = (get("connection.ssl.enabled") or "true").lower() == "true"
    if endpoint:
        if "://" in endpoint:
            given, endpoint = endpoint.split("://", 1)
            ssl = given.lower() == "https"
        options["endpoint_override"] = endpoint.rstrip("/")
        options["force_virtual_addressing"] = (get("path.style.access") or "false").lower() != "true"
    options["scheme"] = "https" if ssl else "http"
    for key, option in (("connection.establish.timeout", "connect_timeout"), ("connection.timeout", "request_timeout")):
        millis = get(key)
        if millis and millis.isdigit():
            options[option] = int(millis) / 1000  # (S3A's are milliseconds)
    attempts = get("attempts.maximum")
    if attempts and attempts.isdigit():
        from pyarrow.fs import AwsStandardS3RetryStrategy

        options["retry_strategy"] = AwsStandardS3RetryStrategy(max_attempts=int(attempts))
    region = get("endpoint.region") or get("region")
    if region:
        options["region"] = region
    if get("aws.credentials.provider") == _ANONYMOUS:
        options["anonymous"] = True
    elif get("access.key") and get("secret.key"):
        options["access_key"], options["secret_key"] = get("access.key"), get("secret.key")
        if get("session.token"):
            options["session_token"] = get("session.token")
    return options


def _entry(info: Any, spell: Callable[[str], str]) -> Entry | None:
    from pyarrow.fs import FileType

    if info.type == FileType.NotFound:
        return None
    directory = info.type == FileType.Directory
    path = spell(info.path)
    name = path.rstrip("/").rsplit("/", 1)[-1]
    modified = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
    size = 0 if directory else int(info.size or 0)
    return Entry(path, name, size, modified, directory, listed=info.type != FileType.Unknown)


def _unlisted(folder: str, names: set[str]) -> list[Entry]:
    """The entries of a local ``folder`` that the listing did not give (dangling symbolic links)."""
    try:
        entries = os.listdir(paths.split(folder)[2])
    except OSError:
        return []
    return [Entry(paths.child(folder, n), n, listed=False) for n in entries if n not in names]


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
