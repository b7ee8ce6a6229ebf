"""Applied files are archived keeping their place below their location, never over an entry: a
name taken already (a file name recurring in the landing zone) gets the first free numbered
suffix, chosen before anything moves; only the files a location names move to its archive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.batch.run import run_tables
from lakemerge.feeds.archive import archive_files
from lakemerge.feeds.files import qualified
from tests.helpers import read_table, write_lines

HEADER = "id,seq,op,v"


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_files_keep_their_folders_below_the_location(spark: Any, tmp_path: Path) -> None:
    landing, archive = tmp_path / "landing", tmp_path / "archive"
    for name in ("a/x.csv", "b/x.csv", "b/c/y:1.csv", "top.csv"):
        write_lines(landing / name, [HEADER, "1,1,I,a"])
    write_lines(tmp_path / "elsewhere.csv", [HEADER])
    names = ("a/x.csv", "b/x.csv", "b/c/y:1.csv", "top.csv")
    listed = [qualified(spark, str(landing / n)) for n in names]
    outside = qualified(spark, str(tmp_path / "elsewhere.csv"))
    moved = archive_files(spark, [*listed, outside], [str(landing)], str(archive))
    assert _files(archive) == ["a/x.csv", "b/c/y:1.csv", "b/x.csv", "top.csv"]
    assert [target for _, target in moved] == [qualified(spark, str(archive / n)) for n in names]
    assert _files(landing) == [] and (tmp_path / "elsewhere.csv").exists(), "only the location's files move"

    write_lines(landing / "a" / "x.csv", [HEADER, "2,1,I,b"])  # (the name recurs: new content)
    write_lines(archive / "a" / "x.csv.1", [HEADER])
    archive_files(spark, [listed[0], listed[0]], [str(landing)], str(archive))
    assert _files(archive) == ["a/x.csv", "a/x.csv.1", "a/x.csv.2", "b/c/y:1.csv", "b/x.csv", "top.csv"]
    assert (archive / "a" / "x.csv.2").read_text().splitlines()[1] == "2,1,I,b", "nothing moved over an entry"
    assert archive_files(spark, [listed[0]], [str(landing)], str(archive)) == [], "a file gone is passed over"


def test_a_pattern_s_files_keep_their_place_below_its_first_wildcard_and_a_file_s_below_its_folder(
    spark: Any, tmp_path: Path
) -> None:
    landing, archive = tmp_path / "landing", tmp_path / "archive"
    for name in ("2024/a/orders_1.csv", "2025/a/orders_1.csv", "2025/b/other.csv", "one/f.csv"):
        write_lines(landing / name, [HEADER])
    names = ("2024/a/orders_1.csv", "2025/a/orders_1.csv", "2025/b/other.csv")
    listed = [qualified(spark, str(landing / n)) for n in names]
    archive_files(spark, listed, [f"{landing}/*/a/orders_*.csv"], str(archive))
    assert _files(archive) == ["2024/a/orders_1.csv", "2025/a/orders_1.csv"], "what the pattern matches"
    one = str(landing / "one" / "f.csv")
    archive_files(spark, [qualified(spark, one)], [one], str(archive))
    assert "f.csv" in _files(archive), "a file's place is below its own folder"


def test_a_run_archives_recurring_names_without_losing_one(spark: Any, tmp_path: Path) -> None:
    """``landing/a/x.csv`` and ``landing/b/x.csv`` both applied and archived apart; the same name
    landing again with new content is a new file, applied and archived beside the first."""
    feed = lakemerge.FeedConfig(
        location=(str(tmp_path / "landing"),), archive=str(tmp_path / "archive"), format="csv", header=True,
        op_column="op", types={"id": "int", "seq": "bigint"},
    )  # fmt: skip
    table = lakemerge.TableConfig(name="t", path=str(tmp_path / "table"), key=("id",), sequence=("seq",), feed=feed)
    write_lines(tmp_path / "landing" / "a" / "x.csv", [HEADER, "1,1,I,a"])
    write_lines(tmp_path / "landing" / "b" / "x.csv", [HEADER, "2,1,I,b"])
    assert len(run_tables([table], spark=spark)) == 1
    write_lines(tmp_path / "landing" / "a" / "x.csv", [HEADER, "1,2,U,c", "3,1,I,d"])
    assert len(run_tables([table], spark=spark)) == 1
    assert _files(tmp_path / "archive") == ["a/x.csv", "a/x.csv.1", "b/x.csv"]
    assert read_table(table.path, ["id", "v"]) == [{"id": 1, "v": "c"}, {"id": 2, "v": "b"}, {"id": 3, "v": "d"}]


def test_a_feed_that_refuses_archive_conflicts_moves_nothing_and_names_the_entry(spark: Any, tmp_path: Path) -> None:
    """With ``archive_conflict = "fail"``, a recurring name stops the archiving before anything of
    the batch moves: the batch stays committed, its files in place, and once the entry in the way is
    gone the next run archives them without applying them again."""
    landing, archive = tmp_path / "landing", tmp_path / "archive"
    feed = lakemerge.FeedConfig(
        location=(str(landing),), archive=str(archive), archive_conflict="fail", format="csv", header=True,
        op_column="op", types={"id": "int", "seq": "bigint"},
    )  # fmt: skip
    table = lakemerge.TableConfig(name="t", path=str(tmp_path / "table"), key=("id",), sequence=("seq",), feed=feed)
    write_lines(landing / "a" / "x.csv", [HEADER, "1,1,I,a"])
    run_tables([table], spark=spark)
    write_lines(landing / "a" / "x.csv", [HEADER, "1,2,U,c"])
    write_lines(landing / "b" / "y.csv", [HEADER, "2,1,I,b"])
    with pytest.raises(lakemerge.InputError) as failed:
        run_tables([table], spark=spark)
    line = str(failed.value)
    assert str(archive / "a" / "x.csv") in line and "exists already" in line and "nothing was moved" in line
    assert failed.value.path is not None and failed.value.path.endswith("landing/a/x.csv")
    assert [r.version for r in failed.value.committed] == [1], "the batch committed is reported with the failure"
    assert _files(landing) == ["a/x.csv", "b/y.csv"] and _files(archive) == ["a/x.csv"], "nothing of the batch moved"
    assert (archive / "a" / "x.csv").read_text().splitlines()[1] == "1,1,I,a", "the entry in the way is untouched"
    assert read_table(table.path, ["id", "v"]) == [{"id": 1, "v": "c"}, {"id": 2, "v": "b"}]

    (archive / "a" / "x.csv").rename(tmp_path / "kept.csv")
    assert run_tables([table], spark=spark) == [], "nothing is applied again"
    assert _files(archive) == ["a/x.csv", "b/y.csv"] and _files(landing) == []
    assert (archive / "a" / "x.csv").read_text().splitlines()[1] == "1,2,U,c"
