"""The filesystem of a classic session: Hadoop's FileSystem API in the driver's JVM, through py4j
(:mod:`lakemerge.storage.filesystem` says what a filesystem is).

Every scheme the session's Hadoop knows works (``file:``, ``hdfs:``, ``s3a:``, ``abfss:``...), with
the session's Hadoop settings; Parquet footers and Avro headers are read by Spark's and Avro's own
classes there.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, BinaryIO

from lakemerge.config.base import absolute
from lakemerge.spark.jvm import jclass
from lakemerge.storage import paths
from lakemerge.storage.filesystem import Entry, FileSystem, RangeReader, StorageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


class HadoopFileSystem(FileSystem):
    """Hadoop's FileSystem API in a classic session's JVM."""

    def __init__(self, spark: SparkSession) -> None:
        super().__init__(spark)
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _path(self, path: str) -> Any:
        return jclass(self.spark, "org.apache.hadoop.fs.Path")(path)

    def _fs(self, hpath: Any) -> Any:
        return hpath.getFileSystem(self._conf)

    def qualify(self, path: str) -> str:
        hpath = self._path(absolute(path))
        return str(self._fs(hpath).makeQualified(hpath).toString())

    def uri(self, path: str) -> str:
        return str(self._path(path).toUri().toString())

    def status(self, path: str) -> Entry | None:
        from py4j.protocol import Py4JJavaError

        hpath = self._path(path)
        try:
            return _entry(self._fs(hpath).getFileStatus(hpath))
        except Py4JJavaError as exc:
            if "FileNotFoundException" in str(exc.java_exception.getClass().getName()):
                return None
            raise StorageError(java_message(exc)) from None
        except Exception as exc:  # (py4j's own errors)
            raise StorageError(java_message(exc)) from None

    def listdir(self, path: str) -> list[Entry]:
        from py4j.protocol import Py4JJavaError

        hpath = self._path(path)
        try:
            fs = self._fs(hpath)
            own = str(fs.makeQualified(hpath).toString())
            children = [_entry(s) for s in fs.listStatus(hpath)]
        except Py4JJavaError as exc:
            if "FileNotFoundException" in str(exc.java_exception.getClass().getName()):
                return []
            raise StorageError(java_message(exc)) from None
        except Exception as exc:
            raise StorageError(java_message(exc)) from None
        return [c for c in children if c.path != own]  # (a file lists itself)

    def walk(self, path: str) -> list[Entry]:
        hpath = self._path(path)
        try:
            return self._walk(self._fs(hpath), hpath)
        except Exception as exc:  # py4j wraps Java's IOExceptions
            raise StorageError(java_message(exc)) from None

    def _walk(self, fs: Any, folder: Any) -> list[Entry]:
        found: list[Entry] = []
        listed = [_entry(s) for s in fs.listStatus(folder)]
        for child in listed:
            found.append(child)
            if child.directory and not paths.hidden(child.name):
                found.extend(self._walk(fs, self._path(child.path)))
        found.extend(_unlisted(folder, {c.name for c in listed}))
        return found

    def mkdirs(self, path: str) -> None:
        hpath = self._path(path)
        try:
            self._fs(hpath).mkdirs(hpath)
        except Exception as exc:
            raise StorageError(java_message(exc)) from None

    def move(self, source: str, target: str) -> None:
        src, dst = self._path(source), self._path(target)
        try:
            fs = self._fs(dst)
            if fs.exists(dst):
                raise StorageError(f"{target} exists")
            fs.mkdirs(dst.getParent())
            moved = self._rename(self._fs(src), src, dst)
        except StorageError:
            raise
        except Exception as exc:
            raise StorageError(java_message(exc)) from None
        if not moved:
            raise StorageError(f"Hadoop's rename to {target} failed")

    def _rename(self, fs: Any, source: Any, target: Any) -> bool:
        """Hadoop's rename; for a name holding ':' on a filesystem of checksum side files (the
        local one), which cannot name the file's side file (so it has none), the file's alone."""
        if ":" in str(source.getName()) or ":" in str(target.getName()):
            checksums = jclass(self.spark, "java.lang.Class").forName("org.apache.hadoop.fs.ChecksumFileSystem")
            if checksums.isInstance(fs):
                return bool(fs.getRawFileSystem().rename(source, target))
        return bool(fs.rename(source, target))

    def write(self, path: str, data: bytes) -> None:
        hpath = self._path(path)
        try:
            out = self._fs(hpath).create(hpath, True)
            try:
                out.write(bytearray(data))
            finally:
                out.close()
        except Exception as exc:
            raise StorageError(java_message(exc)) from None

    def delete(self, path: str) -> None:
        hpath = self._path(path)
        try:
            self._fs(hpath).delete(hpath, False)
        except Exception as exc:
            raise StorageError(java_message(exc)) from None

    def open(self, path: str) -> BinaryIO:
        hpath = self._path(path)
        try:
            fs = self._fs(hpath)
            size = int(fs.getFileStatus(hpath).getLen())
            stream = fs.open(hpath)
        except Exception as exc:
            raise StorageError(java_message(exc)) from None

        def read_range(offset: int, length: int) -> bytes:
            stream.seek(offset)
            return bytes(stream.readNBytes(length))

        reader = _Closing(size, read_range, stream)
        return reader  # type: ignore[return-value]

    def parquet_schema(self, path: str) -> StructType | None:
        """By Spark's own function (``ParquetFileFormat.readSchemaFromFooter``) in the JVM."""
        import json

        from pyspark.sql.types import StructType

        spark: Any = self.spark
        try:
            hpath = self._path(path)
            footer = self._footer(hpath)
            parquet = "org.apache.spark.sql.execution.datasources.parquet"
            session_conf = spark._jsparkSession.sessionState().conf()
            converter = jclass(spark, f"{parquet}.ParquetToSparkSchemaConverter")(session_conf)
            found = jclass(spark, f"{parquet}.ParquetFileFormat").readSchemaFromFooter(
                jclass(spark, "org.apache.parquet.hadoop.Footer")(hpath, footer), converter
            )
            # (Spark makes every column of a file source nullable, as its inference does.)
            return StructType.fromJson(json.loads(str(found.asNullable().json())))
        except Exception:  # (py4j wraps the JVM's errors) Spark's own inference names the file
            return None

    def parquet_metadata(self, path: str, key: str) -> str | None:
        try:
            found = self._footer(self._path(path)).getFileMetaData().getKeyValueMetaData().get(key)
            return str(found) if found is not None else None
        except Exception:  # (py4j wraps the JVM's errors)
            return None

    def _footer(self, hpath: Any) -> Any:
        spark: Any = self.spark
        conf = spark._jsparkSession.sessionState().newHadoopConf()  # (with the session's fs.* settings)
        everything = jclass(spark, "org.apache.parquet.format.converter.ParquetMetadataConverter").NO_FILTER
        return jclass(spark, "org.apache.parquet.hadoop.ParquetFileReader").readFooter(conf, hpath, everything)

    def avro_schema(self, path: str) -> str | None:
        """By Avro's own reader in the JVM (the schema as Avro prints it)."""
        try:
            hpath = self._path(path)
            stream = self._fs(hpath).open(hpath)
            try:
                reader = jclass(self.spark, "org.apache.avro.file.DataFileStream")(
                    stream, jclass(self.spark, "org.apache.avro.generic.GenericDatumReader")()
                )
                return str(reader.getSchema().toString())
            finally:
                stream.close()
        except Exception:  # (py4j wraps the JVM's errors)
            return None


class _Closing(RangeReader):
    def __init__(self, size: int, read_range: object, stream: Any) -> None:
        super().__init__(size, read_range)
        self._stream = stream

    def close(self) -> None:
        if not self.closed:
            try:
                self._stream.close()
            finally:
                super().close()


def _entry(status: Any) -> Entry:
    path = status.getPath()
    directory = bool(status.isDirectory())
    return Entry(
        path=str(path.toString()),
        name=str(path.getName()),
        size=0 if directory else int(status.getLen()),
        modified=int(status.getModificationTime()),
        directory=directory,
    )


def _unlisted(folder: Any, names: set[str]) -> list[Entry]:
    """The entries of a local ``folder`` that Hadoop did not list (it passes over dangling
    symbolic links without a word)."""
    uri = folder.toUri()
    if str(uri.getScheme() or "file") != "file":
        return []
    try:
        entries = os.listdir(str(uri.getPath()))
    except OSError:
        return []
    where = str(folder.toString())
    return [Entry(paths.child(where, n), n, listed=False) for n in entries if n not in names]


def java_message(exc: BaseException) -> str:
    """The telling part of a JVM error as py4j gives it (the text after its exception's class)."""
    text = str(exc).strip().splitlines()
    for line in text:
        if "Exception:" in line:
            return line.split("Exception:", 1)[1].strip()
    return text[0] if text else type(exc).__name__
