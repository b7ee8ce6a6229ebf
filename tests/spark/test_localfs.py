"""A local session writes Delta's commits without Hadoop's checksum side files
(lakemerge.spark.localfs): none beside its commits, and none left stale beside a file Delta
overwrites in place, which a session with Hadoop's default would then fail to read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.spark import localfs
from lakemerge.spark.session import session_conf
from tests.helpers import csv_table, write_lines


def test_local_sessions_write_delta_s_commits_without_side_files_and_others_keep_hadoop_s_default() -> None:
    assert session_conf(lakemerge.SparkSettings())[localfs.SETTING] == localfs.RAW
    assert localfs.SETTING not in session_conf(lakemerge.SparkSettings(master="spark://h:7077"))
    own = lakemerge.SparkSettings(conf={localfs.SETTING: "org.apache.hadoop.fs.local.LocalFs"})
    assert session_conf(own)[localfs.SETTING] == "org.apache.hadoop.fs.local.LocalFs", "the user's conf wins"


def _read_checked(spark: Any, path: Path) -> bytes:
    """The file at ``path`` read as a session with Hadoop's default does: checked against its side file."""
    jvm = spark.sparkContext._jvm
    checked = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    stream = checked.open(jvm.org.apache.hadoop.fs.Path(str(path)))
    try:
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
    finally:
        stream.close()


@pytest.mark.classic
def test_a_batch_drops_the_stale_side_file_of_a_file_delta_overwrites(spark: Any, tmp_path: Path) -> None:
    assert spark.conf.get(localfs.SETTING) == localfs.RAW, "the suite's session is a local one"
    table = csv_table(tmp_path, "log")
    write_lines(tmp_path / "in" / "b1.csv", ["k,seq,op", "1,1,U", "2,1,U"])
    lakemerge.apply_table(table, spark=spark)
    logs = [Path(table.log_table) / "_delta_log"]
    assert not [p for log in logs for p in log.glob(".*.crc")], "no side file beside the commits"
    # A session with Hadoop's default writes _last_checkpoint with its side file ...
    last = logs[0] / "_last_checkpoint"
    jvm = spark.sparkContext._jvm
    default = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    out = default.create(jvm.org.apache.hadoop.fs.Path(str(last)), True)
    out.write(bytearray(b'{"version":0,"size":3}\n'))
    out.close()
    side = logs[0] / "._last_checkpoint.crc"
    assert side.exists() and _read_checked(spark, last) == last.read_bytes()
    # ... which this session's Delta overwrites without it: the side file no longer matches.
    last.write_bytes(b'{"version":1,"size":4}\n')
    with pytest.raises(Exception, match="Checksum"):
        _read_checked(spark, last)
    write_lines(tmp_path / "in" / "b2.csv", ["k,seq,op", "2,2,D", "3,2,U"])
    lakemerge.apply_table(table, spark=spark)
    assert not side.exists()
    assert _read_checked(spark, last) == last.read_bytes()
    merged = lakemerge.read_merged(spark, table)
    assert merged is not None and sorted(r["k"] for r in merged.select("k").collect()) == [1, 3]


@pytest.mark.classic
def test_only_local_paths_of_a_session_without_side_files_are_touched(spark: Any, tmp_path: Path) -> None:
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    for name in localfs.OVERWRITTEN:
        (log / f".{name}.crc").write_bytes(b"crc")
    # (Each names the real directory in its path: only its scheme or host keeps it from being touched.)
    elsewhere = [f"s3a://bucket{tmp_path / 't'}", f"hdfs://nn{tmp_path / 't'}", f"file://otherhost{tmp_path / 't'}"]
    localfs.drop_stale_checksums(spark, [*elsewhere, str(tmp_path / "missing")])
    assert len(list(log.glob(".*.crc"))) == len(localfs.OVERWRITTEN)
    localfs.drop_stale_checksums(spark, [f"file://{tmp_path / 't'}"])
    assert not list(log.glob(".*.crc"))
    for name in localfs.OVERWRITTEN:
        (log / f".{name}.crc").write_bytes(b"crc")
    localfs.drop_stale_checksums(spark, [os.path.relpath(tmp_path / "t")])  # relative: as the JVM resolves it
    assert not list(log.glob(".*.crc"))
