"""Change files and folders whose names hold the characters a glob gives a meaning (``[ ] { } * ?
\\``), spaces, ``%``, ``#`` or non-Latin letters are read by their very names in every format,
recorded in the ledger and archived under them, and never applied twice; a location written as a
glob still expands, and one naming such a folder says how to escape it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import lakemerge
from lakemerge.batch.run import run_tables
from lakemerge.cli.app import app
from tests.feeds import avro_files
from tests.feeds.debezium_events import Table, avro_row, avro_schema
from tests.helpers import planned_batches, read_table, write_lines
from tests.oracle import Oracle

#: One name per character (its own kind of trouble), each in a folder holding others.
STEMS = ("o[2]", "o]2}", "o{a,b}", "o*", "o?", "o\\2", "o 2", "o%20", "o#2", "заказ_日本")
FOLDERS = ("d[1]", "d{x,y} *", "d?\\", "d %25#", "папка")
#: Beside each pattern-like name, a file its unescaped pattern would match (and read twice).
DECOYS = {"o[2]": "o2", "o{a,b}": "oa", "o*": "oX", "o?": "oY"}
#: Every one of those characters in one file name, and in one folder name.
ALL_NAME = "o[2]{a,b}*?\\ %20#ü日"
ALL_FOLDER = "d[1]{x}*?\\ %25#папка"
COLUMNS = ("id", "seq", "v")
DEBEZIUM = Table("t", {"id": "bigint", "seq": "bigint", "v": "text"})
Row = dict[str, Any]


def _csv(path: Path, rows: list[Row]) -> None:
    write_lines(path, ["id,seq,op,v", *(f"{r['id']},{r['seq']},{r['op']},{r['v']}" for r in rows)])


def _json(path: Path, rows: list[Row]) -> None:
    write_lines(path, [json.dumps(r) for r in rows])


def _arrow(rows: list[Row]) -> pa.Table:
    return pa.table({c: [r[c] for r in rows] for c in ("id", "seq", "op", "v")})


def _parquet(path: Path, rows: list[Row]) -> None:
    pq.write_table(_arrow(rows), path)


def _orc(path: Path, rows: list[Row]) -> None:
    pyarrow.orc.write_table(_arrow(rows), str(path))


def _avro(path: Path, rows: list[Row]) -> None:
    fields = [{"name": "id", "type": "long"}, {"name": "seq", "type": "long"}]
    fields += [{"name": "op", "type": "string"}, {"name": "v", "type": "string"}]
    avro_files.write(path, {"type": "record", "name": "change", "fields": fields}, rows)


def _debezium_json(path: Path, rows: list[Row]) -> None:
    events = [{"before": None, "after": {c: r[c] for c in COLUMNS}, "op": "c", "ts_ms": 1} for r in rows]
    write_lines(path, [json.dumps(e) for e in events])


def _debezium_avro(path: Path, rows: list[Row]) -> None:
    events = [avro_row(DEBEZIUM, "c", None, {c: r[c] for c in COLUMNS}, lsn=n) for n, r in enumerate(rows)]
    avro_files.write(path, avro_schema(DEBEZIUM), events)


#: Per feed: its extension, how its files are written, and its settings.
FORMATS: dict[str, tuple[str, Callable[[Path, list[Row]], None], dict[str, Any]]] = {
    "csv": (".csv", _csv, {"format": "csv", "header": True, "op_column": "op"}),
    "text": (".txt", _csv, {"format": "text", "header": True, "delimiter_regex": ",", "op_column": "op"}),
    "json": (".json", _json, {"format": "json", "op_column": "op"}),
    "parquet": (".parquet", _parquet, {"format": "parquet", "op_column": "op"}),
    "orc": (".orc", _orc, {"format": "orc", "op_column": "op"}),
    "avro": (".avro", _avro, {"format": "avro", "op_column": "op"}),
    "debezium": (".json", _debezium_json, {"format": "debezium"}),
    "debezium_avro": (".avro", _debezium_avro, {"format": "debezium", "container": "avro"}),
}
TYPES = {"id": "bigint", "seq": "bigint"}


def _file_rows(number: int, feed_number: int) -> list[Row]:
    """A file's own key, then two keys every file writes at the same sequence: the table's (the
    batch's last file wins it) and its feed's (the feed's last file wins it)."""
    v = f"file {number}"
    return [
        {"id": 1000 + number, "seq": 1, "op": "I", "v": v},
        {"id": 0, "seq": 1, "op": "U", "v": v},
        {"id": 100 + feed_number, "seq": 1, "op": "U", "v": v},
    ]


def _landing(tmp_path: Path, fmt: str) -> Path:
    return tmp_path / ("text [t]" if fmt == "text" else fmt)


def _feed(tmp_path: Path, fmt: str) -> lakemerge.FeedConfig:
    """The feed of ``fmt``'s files: CSV's location is a glob matching folders and files of any
    name, text's a folder named with ``[``, written with its glob characters escaped."""
    location = str(_landing(tmp_path, fmt))
    if fmt == "csv":
        location += "/*/*.csv"
    elif fmt == "text":
        location = location.replace("[", "\\[").replace("]", "\\]")
    archive = tmp_path / "done [a]{b}*" if fmt == "csv" else tmp_path / "done" / fmt
    return lakemerge.FeedConfig(location=(location,), archive=str(archive), types=TYPES, **FORMATS[fmt][2])


def test_files_named_with_glob_characters_in_every_format(spark: Any, tmp_path: Path) -> None:
    """One batch over a feed of each format: every file is read once as itself (a pattern would
    read the files beside it too, or none), each row known by its file (equal sequences go to the
    later file); the ledger records each file's real name, so a run knows them as applied and
    archives them under those names (in their folders), and a location left with no file has nothing
    pending."""
    landed: dict[str, list[Path]] = {}
    for fmt, (ext, _, _) in FORMATS.items():
        landed[fmt] = [_landing(tmp_path, fmt) / ALL_FOLDER / f"{ALL_NAME}{ext}", _landing(tmp_path, fmt) / f"p{ext}"]
    csv = _landing(tmp_path, "csv")
    landed["csv"] = [csv / FOLDERS[i % len(FOLDERS)] / f"{stem}.csv" for i, stem in enumerate(STEMS)]
    landed["csv"] += [p.with_name(f"{DECOYS[p.stem]}.csv") for p in landed["csv"] if p.stem in DECOYS]
    landed["csv"].append(csv / ALL_FOLDER / f"{ALL_NAME}.csv")
    unmatched = [write_lines(csv / "top.csv", ["id"]), write_lines(csv / FOLDERS[0] / "notes.txt", ["id"])]
    written: dict[Path, list[Row]] = {}
    for feed_number, (fmt, (_, write, _)) in enumerate(FORMATS.items()):
        for path in landed[fmt]:
            path.parent.mkdir(parents=True, exist_ok=True)
            written[path] = _file_rows(len(written), feed_number)
            write(path, written[path])
    feeds = [_feed(tmp_path, fmt) for fmt in FORMATS]
    t = lakemerge.TableConfig(
        name="t", path=str(tmp_path / "table"), key=("id",), sequence=("seq",), feed=feeds[0], more_feeds=(*feeds[1:],)
    )

    result = lakemerge.apply_table(t, spark=spark)  # (as if the run stopped before archiving)
    # File order: the feeds in turn, each's files by path.
    ordered = [p for fmt in FORMATS for p in sorted(landed[fmt], key=str)]
    oracle = Oracle(key=("id",), seq="seq", op="op")
    counts = oracle.apply([written[p] for p in ordered])
    assert read_table(t.path, COLUMNS) == read_table_rows(oracle.rows())
    metrics = result.metrics
    assert (metrics.rows_read, metrics.inserted, metrics.superseded) == (
        counts.rows_read,
        counts.inserted,
        counts.superseded,
    )
    [commit] = lakemerge.history(t.path, spark=spark)
    assert [f.path for f in commit.files] == [f"file:{p}" for p in ordered], "recorded under their real names"

    assert run_tables([t], spark=spark) == [], "each file is known as applied by its name"
    for fmt, feed in zip(FORMATS, t.feeds, strict=True):
        archived = sorted(p.relative_to(str(feed.archive)) for p in Path(str(feed.archive)).rglob("*") if p.is_file())
        assert archived == sorted(p.relative_to(_landing(tmp_path, fmt)) for p in landed[fmt]), fmt
    left = sorted(p for fmt in FORMATS for p in _landing(tmp_path, fmt).rglob("*") if p.is_file())
    assert left == sorted(unmatched), "archived by their names; what the glob location does not match stays"
    assert run_tables([t], spark=spark) == []
    assert len(lakemerge.history(t.path, spark=spark)) == 1


def read_table_rows(rows: list[Row]) -> list[Row]:
    """The oracle's rows as :func:`tests.helpers.read_table` sorts a table's."""
    picked = [{c: r[c] for c in COLUMNS} for r in rows]
    return sorted(picked, key=lambda r: [(v is None, str(v)) for v in r.values()])


def test_a_location_naming_such_a_folder_says_how_to_escape_it(spark: Any, tmp_path: Path) -> None:
    """A location is a glob pattern: one that matches nothing while an entry of its very name exists
    says how to name it; a pattern whose folder is missing is an error, as a missing folder is."""
    write_lines(tmp_path / "in[1]" / "a.csv", ["id,seq,op,v", "1,1,I,a"])

    def table(location: str) -> lakemerge.TableConfig:
        feed = lakemerge.FeedConfig(location=(location,), types=TYPES, **FORMATS["csv"][2])
        return lakemerge.TableConfig(name="t", path=str(tmp_path / "table"), key=("id",), sequence=("seq",), feed=feed)

    with pytest.raises(lakemerge.InputError) as info:
        lakemerge.apply_table(table(str(tmp_path / "in[1]")), spark=spark)
    assert str(info.value) == (
        f"{tmp_path}/in[1]: input pattern matches no file; a location is a glob pattern, in which [ ] {{ }} * ? \\ "
        f"have a meaning: to name the entry of this very name, write a backslash before each ({tmp_path}/in\\[1\\])"
    )
    write_lines(tmp_path / "b\\s" / "a.csv", ["id,seq,op,v", "1,1,I,a"])
    with pytest.raises(lakemerge.InputError, match=r"write a backslash before each \(.*/b\\\\s\)$"):
        lakemerge.apply_table(table(str(tmp_path / "b\\s")), spark=spark)  # ('\\' escapes too)
    with pytest.raises(lakemerge.InputError, match=r"the folder before its first wildcard \(.*/gone\) does not exist"):
        lakemerge.apply_table(table(str(tmp_path / "gone" / "*.csv")), spark=spark)
    with pytest.raises(lakemerge.InputError, match=r"/gone\[1\]: input path does not exist$"):
        lakemerge.apply_table(table(str(tmp_path / "gone\\[1\\]")), spark=spark)  # (no wildcard: one path)
    assert not (tmp_path / "table").exists()


def test_literal_escapes_the_path_and_leaves_the_scheme_and_authority() -> None:
    from lakemerge.feeds.files import literal

    assert literal("file:/in/o[2]{a}*?\\ #%.csv") == "file:/in/o\\[2\\]\\{a\\}\\*\\?\\\\ #%.csv"
    assert literal("hdfs://[::1]:8020/in/x[1]") == "hdfs://[::1]:8020/in/x\\[1\\]"
    assert literal("s3a://bucket/plain/a.csv") == "s3a://bucket/plain/a.csv"


def test_a_poison_file_so_named_is_named_and_skipped_by_its_real_name(spark: Any, tmp_path: Path) -> None:
    """Spark names a file it fails on percent-encoded; the error still names it as listed, and
    ``lakemerge skip`` takes that name."""
    path = tmp_path / "p.toml"
    path.write_text(
        '[tables.t]\npath = "table"\nkey = "id"\nsequence = "seq"\n'
        '[tables.t.feed]\nlocation = "landing"\nformat = "csv"\nheader = true\nop_column = "op"\n'
        'schema = "id BIGINT, seq BIGINT, op STRING, v STRING"\n'
    )
    good = write_lines(tmp_path / "landing" / "a{1} ok#.csv", ["id,seq,op,v", "1,1,I,a"])
    poison = tmp_path / "landing" / "d[2] é" / "b?*%20.csv.gz"
    poison.parent.mkdir(parents=True)
    poison.write_bytes(b"\x1f\x8b not gzip after all")
    table = lakemerge.load_pipeline(path).table("t")
    with pytest.raises(lakemerge.InputError, match="lakemerge skip") as info:
        run_tables([table], spark=spark)
    assert info.value.path == f"file:{poison}", "named as listed among the batch's two files"
    assert f"'file:{poison}'" in str(info.value)

    result = CliRunner().invoke(app, ["skip", str(path), "-t", "t", str(poison), "--reason", "cut short"])
    assert result.exit_code == 0, result.output
    [done] = run_tables([table], spark=spark)
    assert [f.path for f in done.files] == [f"file:{good}"]
    assert read_table(table.path, COLUMNS) == [{"id": 1, "seq": 1, "v": "a"}]
    skipped, applied = lakemerge.history(table.path, spark=spark)[::-1]
    assert skipped.skip_reason == "cut short" and [f.path for f in skipped.files] == [f"file:{poison}"]
    assert [f.path for f in applied.files] == [f"file:{good}"]
    assert run_tables([table], spark=spark) == []


def test_columnar_files_read_twice_are_checked_by_their_names(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of Parquet and ORC files reads them twice and checks before its commit, by their
    names, that none changed since it was listed."""
    planned = planned_batches(monkeypatch, "reread")
    feeds = [_feed(tmp_path, fmt) for fmt in ("parquet", "orc")]
    t = lakemerge.TableConfig(
        name="t", path=str(tmp_path / "table"), key=("id",), sequence=("seq",), feed=feeds[0], more_feeds=(feeds[1],)
    )
    oracle = Oracle(key=("id",), seq="seq", op="op")
    for batch in range(2):
        files = []
        for number, fmt in enumerate(("parquet", "orc")):
            ext, write, _ = FORMATS[fmt]
            target = _landing(tmp_path, fmt) / ALL_FOLDER / f"{batch} {ALL_NAME}{ext}"
            target.parent.mkdir(parents=True, exist_ok=True)
            rows = [{"id": number, "seq": batch, "op": "U", "v": f"{fmt} {batch}"}]
            rows.append({"id": 9, "seq": 1, "op": "U", "v": fmt})  # (the same sequence each batch: the later wins)
            write(target, rows)
            files.append(rows)
        result = lakemerge.apply_table(t, spark=spark)
        counts = oracle.apply(files)
        assert (result.metrics.rows_read, result.metrics.updated) == (counts.rows_read, counts.updated)
        assert read_table(t.path, COLUMNS) == read_table_rows(oracle.rows())
    assert planned[-1][0], "the second batch read its files twice"


def test_a_bad_row_is_named_by_its_file_as_listed(spark: Any, tmp_path: Path) -> None:
    """A row's file is known from the path Spark reports for it (percent-encoded): a bad row names
    its file as listed, also when its bytes are read again as lines (bytes that are not UTF-8)."""
    good = write_lines(tmp_path / "in" / "d[1] #" / "a{1}.csv", ["id,seq,op,v", "1,1,I,a"])
    bad = tmp_path / "in" / "d[1] #" / "b* %25ü.csv"
    bad.write_bytes(b"id,seq,op,v\n2,1,I,b\n3,1,I,caf\xe9\n")
    feed = lakemerge.FeedConfig(location=(str(tmp_path / "in"),), types=TYPES, **FORMATS["csv"][2])
    t = lakemerge.TableConfig(name="t", path=str(tmp_path / "table"), key=("id",), sequence=("seq",), feed=feed)
    with pytest.raises(lakemerge.InputError) as info:
        lakemerge.apply_table(t, spark=spark)
    assert (info.value.path, info.value.row) == (f"file:{bad}", 3)
    assert "invalid UTF-8: byte E9" in str(info.value)
    with_room = t.model_copy(update={"max_bad_rows": 1})
    result = lakemerge.apply_table(with_room, spark=spark)
    assert [f.path for f in result.files] == [f"file:{good}", f"file:{bad}"]
    assert read_table(t.path, COLUMNS) == [{"id": 1, "seq": 1, "v": "a"}, {"id": 2, "seq": 1, "v": "b"}]
    [quarantined] = lakemerge.quarantine(with_room, spark=spark)
    assert (quarantined.file, quarantined.row) == (f"file:{bad}", 3)
