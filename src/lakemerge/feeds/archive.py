"""Move applied change files out of the landing zone, through Hadoop's FileSystem API.

Archiving happens after the batch's commit. A crash in between leaves applied files in place;
they are recognised by the commit's record (and skipped) and archived by the next run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from lakemerge.errors import InputError
from lakemerge.spark.jvm import jclass

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def archive_files(spark: SparkSession, paths: Iterable[str], archive: str) -> list[tuple[str, str]]:
    """Move each of ``paths`` into the folder ``archive`` (created if needed), keeping its name;
    a name already taken there gets a ``.1``, ``.2``, ... suffix. Paths already gone are skipped.

    Returns:
        The (source, destination) pairs moved.

    Raises:
        InputError: a move failed.
    """
    hadoop_path = jclass(spark, "org.apache.hadoop.fs.Path")
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    target_dir = hadoop_path(archive)
    fs = target_dir.getFileSystem(conf)
    fs.mkdirs(target_dir)
    moved = []
    for path in paths:
        source = hadoop_path(path)
        source_fs = source.getFileSystem(conf)
        if not source_fs.exists(source):
            continue
        name = str(source.getName())
        target = hadoop_path(target_dir, name)
        n = 0
        while fs.exists(target):
            n += 1
            target = hadoop_path(target_dir, f"{name}.{n}")
        if not source_fs.rename(source, target):
            raise InputError(f"cannot move applied file to the archive {target.toString()}", path=path)
        moved.append((path, str(target.toString())))
    return moved
