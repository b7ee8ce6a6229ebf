"""A corpus of bad input: each case yields its documented error (one line, nothing committed) or
its quarantine entries, and no row is ever lost: rows read = applied + quarantined + late +
superseded (+ ignored)."""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from tests.helpers import table_version, write_lines

HEADER = "id,seq,op,day,v"
SCHEMA = "id INT, seq BIGINT, op STRING, day DATE, v STRING"
GOOD = ["1,5,U,2024-01-01,ok"]


@dataclass
class Case:
    name: str
    files: dict[str, bytes | str] = field(default_factory=dict)
    quarantined: int | None = None  # expected bad rows, when the batch commits
    error: type[lakemerge.LakemergeError] | None = None
    words: str = ""
    feed: dict[str, Any] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None
    inputs: Callable[[Path], list[str]] | None = None


def csv(*rows: str, header: str = HEADER) -> str:
    return "\n".join([header, *rows]) + "\n"


def corrupt_parquet(folder: Path) -> None:
    (folder / "in").mkdir(parents=True, exist_ok=True)
    (folder / "in" / "x.parquet").write_bytes(b"PAR1" + b"\x00" * 64 + b"garbage footer")


CASES = [
    # Single-line CSV: an unterminated quote ends with its line, and the value is taken as read.
    Case("unterminated quote", {"a.csv": csv(*GOOD, '2,5,U,2024-01-01,"open')}, quarantined=0),
    Case("too few fields", {"a.csv": csv(*GOOD, "2,5,U")}, quarantined=1),
    Case("too many fields", {"a.csv": csv(*GOOD, "2,5,U,2024-01-01,v,extra")}, quarantined=1),
    Case("null key", {"a.csv": csv(*GOOD, ",5,U,2024-01-01,v")}, quarantined=1),
    Case("null sequence", {"a.csv": csv(*GOOD, "2,,U,2024-01-01,v")}, quarantined=1),
    Case("unknown op code", {"a.csv": csv(*GOOD, "2,5,X,2024-01-01,v")}, quarantined=1),
    Case("null op code", {"a.csv": csv(*GOOD, "2,5,,2024-01-01,v")}, quarantined=1),
    Case("unparseable date", {"a.csv": csv(*GOOD, "2,5,U,2024-13-45,v")}, quarantined=1),
    Case("unparseable key", {"a.csv": csv(*GOOD, "two,5,U,2024-01-01,v")}, quarantined=1),
    Case("key overflows INT", {"a.csv": csv(*GOOD, "99999999999,5,U,2024-01-01,v")}, quarantined=1),
    Case("sequence not a number", {"a.csv": csv(*GOOD, "2,soon,U,2024-01-01,v")}, quarantined=1),
    Case("binary garbage line", {"a.csv": csv(*GOOD).encode() + b"\x00\xff\xfe\x01garbage\x00\n"}, quarantined=1),
    Case(
        "several bad rows in several files",
        {"a.csv": csv(*GOOD, ",1,U,,"), "b.csv": csv("x,1,U,,", "3,1,U,,v")},
        quarantined=2,
    ),
    Case(
        "bad rows in a delete file",
        {"del_1.csv": csv("1,6,D,,", "x,6,D,,")},
        quarantined=1,
        feed={"delete_file_prefix": "del"},
    ),
    Case(
        "malformed JSON line",
        {"a.json": '{"id": 1, "seq": 5, "op": "U"}\n{"id": 2, "seq": \n'},
        quarantined=1,
        feed={"format": "json", "header": False},
    ),
    Case(
        "JSON value of the wrong type",
        {"a.json": '{"id": 1, "seq": 5, "op": "U"}\n{"id": "x", "seq": 5, "op": "U"}\n'},
        quarantined=1,
        feed={"format": "json", "header": False},
    ),
    Case(
        "text line with the wrong field count",
        {"a.txt": "1|5|U|2024-01-01|v\n2|5|U\n"},
        quarantined=1,
        feed={
            "format": "text",
            "header": False,
            "delimiter_regex": "\\|",
            "columns": ("id", "seq", "op", "day", "v"),
            "schema": None,
            "types": {"id": "int", "seq": "bigint", "day": "date"},
        },
    ),
    Case("huge field is fine", {"a.csv": csv(*GOOD, "2,5,U,2024-01-01," + "x" * 1_000_000)}, quarantined=0),
    Case(
        "byte order mark is fine",
        {"a.csv": "\ufeff" + csv(*GOOD)},
        quarantined=0,
        feed={"schema": None, "types": {"id": "int", "seq": "bigint", "day": "date"}},
    ),
    Case("header-only file is fine", {"a.csv": csv(*GOOD), "b.csv": csv()}, quarantined=0),
    Case("zero-byte file beside others is fine", {"a.csv": csv(*GOOD), "b.csv": ""}, quarantined=0),
    Case(
        "wrong encoding",
        {"a.csv": csv(*GOOD, "2,5,U,2024-01-01,café").encode("utf-16")},
        error=lakemerge.InputError,
        words="",
        feed={"schema": None},
    ),
    Case(
        "only zero-byte files",
        {"a.csv": ""},
        error=lakemerge.InputError,
        words="files are empty",
        feed={"schema": None},
    ),
    Case(
        "truncated gzip",
        {"a.csv.gz": gzip.compress(csv(*GOOD, *GOOD).encode())[:30]},
        error=lakemerge.InputError,
        words="cannot read change files",
    ),
    Case(
        "corrupt parquet footer",
        setup=corrupt_parquet,
        error=lakemerge.InputError,
        words="cannot read change files",
        feed={"format": "parquet", "header": False, "schema": None},
    ),
    Case(
        "duplicate column names",
        {"a.csv": csv("1,5,U,x,y", header="id,seq,op,v,V")},
        error=lakemerge.InputError,
        words="duplicate column names",
        feed={"schema": None},
    ),
    Case(
        "reserved column name",
        {"a.csv": csv("1,5,U,x", header="id,seq,op,_lm_file")},
        error=lakemerge.InputError,
        words="reserved",
        feed={"schema": None},
    ),
    Case(
        "key column missing from the feed",
        {"a.csv": csv("5,U,x", header="seq,op,v")},
        error=lakemerge.InputError,
        words="key column 'id' is not in the feed",
        feed={"schema": None},
    ),
    Case(
        "input path that does not exist",
        inputs=lambda root: [str(root / "missing")],
        error=lakemerge.InputError,
        words="input path does not exist",
    ),
    Case(
        "landing zone that cannot be listed",
        inputs=lambda root: ["nosuchfs://landing/x"],
        error=lakemerge.InputError,
        words="cannot list input path",
    ),
    Case(
        "a file that disappears between listing and reading",
        {"a.csv": csv(*GOOD)},
        error=lakemerge.InputError,
        words="cannot read change files",
    ),
    Case("a directory where a file was expected", {"x.csv/part-0.csv": csv(*GOOD)}, quarantined=0),
]


def _table(root: Path, location: Path, *, max_bad_rows: int = 0, **feed: Any) -> lakemerge.TableConfig:
    """The corpus's table at ``root / "table"``, its CSV feed at ``location`` (``feed`` overrides)."""
    settings: dict[str, Any] = {
        "location": (str(location),),
        "format": "csv",
        "header": True,
        "schema": SCHEMA,
        "op_column": "op",
        "upsert_codes": ("I", "U"),
        "delete_codes": ("D",),
        **feed,
    }
    return lakemerge.TableConfig(
        name="t",
        path=str(root / "table"),
        key=("id",),
        sequence=("seq",),
        max_bad_rows=max_bad_rows,
        feed=lakemerge.FeedConfig(**settings),
    )


def _write(path: Path, content: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


def _nothing_lost(m: lakemerge.BatchMetrics) -> bool:
    """Every row read is accounted for: applied, quarantined, late, superseded, a truncate or ignored."""
    applied = m.inserted + m.updated + m.deleted + m.late + m.deletes_absent
    return m.rows_read == applied + m.superseded + m.rows_bad + m.truncates + m.ignored


@pytest.fixture(scope="module")
def seeded(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A table holding one row, applied once for the module; each case starts from a copy of it (a
    Delta table's log names its files relative to its folder, so a copy is the same table)."""
    root = tmp_path_factory.mktemp("seeded")
    write_lines(root / "seed" / "s.csv", [HEADER, "100,1,I,2024-01-01,seed"])
    seed = _table(root, root / "seed")
    lakemerge.apply_table(seed, spark=spark)
    return root / "table"


def _alone(case: Case) -> bool:
    """Whether the case needs a batch of its own: an error, its own feed settings or setup. The
    others (bad or odd rows of the default CSV feed) are applied together, one file each."""
    return case.error is not None or bool(case.feed) or case.setup is not None or case.inputs is not None


TOGETHER = [c for c in CASES if not _alone(c)]


@pytest.mark.parametrize("case", [c for c in CASES if _alone(c)], ids=[c.name for c in CASES if _alone(c)])
def test_bad_input(spark: object, tmp_path: Path, case: Case, monkeypatch: pytest.MonkeyPatch, seeded: Path) -> None:
    assert len(CASES) >= 30 and len(TOGETHER) >= 10
    table = _table(tmp_path, tmp_path / "in", max_bad_rows=10, **case.feed)
    # An existing table, so that "unchanged" is checkable: a copy of the one the module made.
    shutil.copytree(seeded, tmp_path / "table")
    for name, content in case.files.items():
        _write(tmp_path / "in" / name, content)
    if case.setup:
        case.setup(tmp_path)
    if case.name.startswith("a file that disappears"):
        from lakemerge.feeds import readers

        original = readers.read_feed

        def vanish(spark: object, feed: object, files: Any, **kwargs: Any) -> Any:
            for f in files:
                Path(f.path.removeprefix("file:")).unlink()
            return original(spark, feed, files, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr("lakemerge.batch.read.read_feed", vanish)
    inputs = case.inputs(tmp_path) if case.inputs else None

    if case.error is not None:
        with pytest.raises(case.error) as info:
            lakemerge.apply_table(table, inputs=inputs, spark=spark)
        assert case.words in str(info.value) and "\n" not in str(info.value)
        assert table_version(table.path) == 0  # nothing committed
        return
    result = lakemerge.apply_table(table, inputs=inputs, spark=spark)
    m = result.metrics
    assert m.rows_bad == case.quarantined
    assert _nothing_lost(m)
    listed = lakemerge.quarantine(table, spark=spark)
    assert len(listed) == case.quarantined
    assert all(q.reason and q.file and q.row >= 1 and q.batch_id == result.batch_id for q in listed)


def test_bad_rows_of_many_kinds_in_one_batch(spark: object, tmp_path: Path, seeded: Path) -> None:
    """The cases of bad or odd rows in the default CSV feed, each in its own file of one batch:
    each file gets exactly its case's quarantine entries (naming that file, a row and a reason),
    the batch commits, and no row is lost."""
    shutil.copytree(seeded, tmp_path / "table")
    table = _table(tmp_path, tmp_path / "in", max_bad_rows=100)
    folders = {}
    for number, case in enumerate(TOGETHER):
        folders[case.name] = f"case{number:02d}-"
        for name, content in case.files.items():
            _write(tmp_path / "in" / f"case{number:02d}-{name}", content)
    result = lakemerge.apply_table(table, spark=spark)
    m = result.metrics
    expected = sum(case.quarantined or 0 for case in TOGETHER)
    assert m.rows_bad == expected
    assert _nothing_lost(m)
    listed = lakemerge.quarantine(table, spark=spark)
    assert len(listed) == expected
    assert all(q.reason and q.row >= 1 and q.batch_id == result.batch_id for q in listed)
    for case in TOGETHER:
        mine = [q for q in listed if f"/{folders[case.name]}" in q.file]
        assert len(mine) == case.quarantined, case.name
