"""Each filesystem lists a landing zone as Hadoop does: the same entries, sizes, modification
times and spellings from Hadoop in a classic session's JVM, from ``pyarrow.fs`` and from Spark's
``binaryFile`` listing; glob patterns match the same entries, also beside names holding ':'."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lakemerge.storage import paths
from lakemerge.storage.arrow import ArrowFileSystem
from lakemerge.storage.filesystem import Entry, FileSystem, StorageError
from lakemerge.storage.filesystems import filesystem
from lakemerge.storage.server import ServerFileSystem

#: A landing zone's names: characters a URI quotes or a glob reads, letters beyond ASCII, hidden
#: files and folders, and a folder named with ':' (a timestamp).
FILES = (
    "a.csv",
    "d [1] %25#/o[2]{a,b}*?\\ %20#ü.csv",
    "d [1] %25#/o2.csv",
    "папка/заказ_日本.csv",
    "2024-01-01T10:00:00/x.csv",
    "deep/er/est/z.csv",
    "deep/_tmp/hidden.csv",
    "_SUCCESS",
    ".part.crc",
)


def _landing(root: Path) -> Path:
    for n, name in enumerate(FILES):
        path = root / "landing" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * (n + 1))
    (root / "landing" / "empty").mkdir()
    os.symlink(root / "gone.csv", root / "landing" / "dangling.csv")
    return root / "landing"


def _seen(entries: list[Entry]) -> set[tuple[str, str, int, int, bool, bool]]:
    """Entries as compared: a file's size, its time to the second (what a ledger compares); not
    the hidden ones (Hadoop's local filesystem does not list its checksum side files, ``.x.crc``:
    hidden either way)."""
    return {
        (e.path, e.name, e.size, e.modified // 1000, e.directory, e.listed)
        for e in entries
        if not e.directory and not paths.hidden(e.name)
    }


@pytest.mark.classic
def test_arrow_and_hadoop_give_the_same_entries_sizes_times_and_spellings(spark: Any, tmp_path: Path) -> None:
    from lakemerge.storage.hadoop import HadoopFileSystem

    landing = _landing(tmp_path)
    hadoop, arrow = HadoopFileSystem(spark), ArrowFileSystem(spark, "file")
    root = f"file:{landing}"
    walked = hadoop.walk(root)
    shown = {(e.path, e.directory) for e in walked if not paths.hidden(e.name)}
    assert shown == {(e.path, e.directory) for e in arrow.walk(root) if not paths.hidden(e.name)}
    assert _seen(walked) == _seen(arrow.walk(root))
    exact = {e.path: e.modified for e in walked}
    same = [exact[e.path] == e.modified for e in arrow.walk(root) if e.listed and not paths.hidden(e.name)]
    assert same and all(same), "to the millisecond here"
    assert not any(e.path.startswith(f"{root}/deep/_tmp/") for e in walked), "a hidden folder is not entered"
    assert [e.name for e in walked if not e.listed and not paths.hidden(e.name)] == ["dangling.csv"]
    for spelling in (str(landing), f"{landing}//a.csv", f"file://{landing}/./deep/../a.csv", os.path.relpath(landing)):
        assert arrow.qualify(spelling) == hadoop.qualify(spelling), spelling
    for entry in walked:
        assert arrow.uri(entry.path) == hadoop.uri(entry.path), entry.path
    for path in (root, f"{root}/a.csv", f"{root}/nothing", f"{root}/2024-01-01T10:00:00/x.csv"):
        assert arrow.status(path) == hadoop.status(path), path
        assert _seen(arrow.listdir(path)) == _seen(hadoop.listdir(path)), path
    assert arrow.listdir(f"{root}/a.csv") == [] and arrow.listdir(f"{root}/nothing") == []


@pytest.mark.classic
def test_globs_match_what_hadoop_s_glob_matches(spark: Any, tmp_path: Path) -> None:
    """Hadoop's own ``globStatus`` as the reference (on names it can build paths from), then a
    folder holding a ':' name, which Hadoop's fails on and the matching here does not."""
    from lakemerge.storage.hadoop import HadoopFileSystem

    landing = _landing(tmp_path)
    (landing / "2024-01-01T10:00:00").rename(landing / "2024-01-01T10-00-00")
    hadoop = HadoopFileSystem(spark)
    jvm_fs = spark._jvm.org.apache.hadoop.fs
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for pattern in ("*", "*/*.csv", "d \\[1\\] %25#/o?.csv", "{deep/er,папка}/*", "deep/*/*/z.{csv,txt}", "[a-d]*"):
        location = f"file:{landing}/{pattern}"
        found = jvm_fs.Path(location).getFileSystem(conf).globStatus(jvm_fs.Path(location)) or []
        assert {e.path for e in hadoop.glob(location)} == {str(s.getPath().toString()) for s in found}, pattern
        arrow = {e.path for e in ArrowFileSystem(spark, "file").glob(location) if not e.name.endswith(".crc")}
        assert arrow == {e.path for e in hadoop.glob(location)}, pattern
    (landing / "10:00.csv").write_text("x")
    location = f"file:{landing}/*.csv"
    with pytest.raises(Exception, match="Relative path in absolute URI"):
        jvm_fs.Path(location).getFileSystem(conf).globStatus(jvm_fs.Path(location))
    assert sorted(e.name for e in hadoop.glob(location)) == ["10:00.csv", "a.csv"]


def test_spark_s_listing_gives_what_the_session_s_filesystem_lists(spark: Any, tmp_path: Path) -> None:
    """Spark's ``binaryFile`` listing (the server's, over Spark Connect) against the session's own
    filesystem (Hadoop's, or this client's): the same visible files, sizes, times and spellings;
    hidden entries and dangling links are left out by Spark, folders known from their files."""
    landing = _landing(tmp_path)
    own, server = filesystem(spark, str(landing)), ServerFileSystem(spark)
    root = own.qualify(str(landing))
    assert server.qualify(str(landing)) == root
    visible = [e for e in own.walk(root) if e.listed and not any(map(paths.hidden, _inside(e.path, root)))]
    assert _seen(server.walk(root)) == _seen(visible)
    assert server.listing(f"{root}/a.csv") == [own.status(f"{root}/a.csv")]
    assert server.status(f"{root}/nothing") is None and server.listing(f"{root}/nothing") is None
    assert server.status(root) == Entry(root, "landing", directory=True)
    pattern = f"{root}/{{deep/er,d \\[1\\] %25#}}/*"
    assert {e.path for e in server.glob(pattern)} == {e.path for e in own.glob(pattern)}
    listed = [f"{root}/a.csv", f"{root}/2024-01-01T10:00:00/x.csv", f"{root}/gone.csv"]
    assert server.statuses(listed) == [own.status(p) for p in listed]
    with server.open(f"{root}/deep/er/est/z.csv") as file:
        assert file.read() == b"x" * 6
    assert not server.moves
    with pytest.raises(StorageError, match='landing = "client"'):
        server.move(f"{root}/a.csv", f"{root}/b.csv")


def _inside(path: str, root: str) -> list[str]:
    return (paths.relative(path, root) or "").split("/")


def test_moves_never_go_over_an_entry_and_make_their_folder(spark: Any, tmp_path: Path) -> None:
    fs: FileSystem = filesystem(spark, str(tmp_path))
    root = fs.qualify(str(tmp_path))
    (tmp_path / "a.csv").write_text("a")
    (tmp_path / "b.csv").write_text("b")
    fs.move(f"{root}/a.csv", f"{root}/archive/x/a:1.csv")
    assert (tmp_path / "archive" / "x" / "a:1.csv").read_text() == "a" and not (tmp_path / "a.csv").exists()
    with pytest.raises(StorageError, match="exists"):
        fs.move(f"{root}/b.csv", f"{root}/archive/x/a:1.csv")
    assert (tmp_path / "b.csv").exists() and (tmp_path / "archive" / "x" / "a:1.csv").read_text() == "a"
