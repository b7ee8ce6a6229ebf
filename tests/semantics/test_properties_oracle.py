"""Property tests of docs/semantics.md §1, §2 and §8 against tests/oracle.py's `apply_batch`.

Random multi-batch change sets (duplicate keys within a batch, equal sequences, late records across
batches, deletes and re-inserts, a composite key, partition moves, 1-3 files of 1-6 rows per
batch) are written as CSV files, applied through lakemerge's public API and read back with
delta-rs, an independent reader; the table and every metric must match the oracle after every
batch, and every batch must be exactly one Delta commit.

Null values: the value column `v` is either None or a non-empty string of letters. None is written
as an empty CSV field, which Spark's CSV reader reads as null; a non-empty value can therefore
never be confused with null. The oracle works with None directly.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakemerge
from tests.oracle import COUNT_NAMES, State, apply_batch, sort_rows, state_rows

COLUMNS = ("k1", "k2", "part", "seq", "v")
FEED_COLUMNS = ("k1", "k2", "part", "seq", "op", "v")
SCHEMA = "k1 INT, k2 STRING, part STRING, seq BIGINT, op STRING, v STRING"
# Names whose lexicographic order differs from their numeric order ("f_10" < "f_9") and from the
# order they are written in (the strategy permutes them): the tie-break must follow names only.
FILE_NAMES = ("f_10.csv", "f_9.csv", "g_0.csv", "a_7.csv")

Files = list[tuple[str, list[dict[str, Any]]]]
_dirs = itertools.count()

# ---------------------------------------------------------------------------------------------
# Strategies: a tiny key space (3 x 2 keys) and sequence range (0..6) so that duplicates, ties,
# late records, deletes of absent keys and re-inserts after deletes all occur often.
# ---------------------------------------------------------------------------------------------
change = st.fixed_dictionaries(
    {
        "k1": st.integers(0, 2),
        "k2": st.sampled_from(["x", "y"]),
        "part": st.sampled_from(["a", "b"]),
        "seq": st.integers(0, 6),
        "op": st.sampled_from(["I", "U", "U", "D"]),
        "v": st.one_of(st.none(), st.text(alphabet="pqrs", min_size=1, max_size=3)),
    }
)


@st.composite
def batches(draw: st.DrawFn) -> list[Files]:
    """1-3 batches of 1-3 files of 1-6 rows. Half the rows copy the key and sequence of a row drawn
    before (in this batch or an earlier one), so that exact ties, within a batch (decided by file
    name, then row) and against the stored row (incoming wins), are common rather than rare."""
    drawn: list[dict[str, Any]] = []
    result: list[Files] = []
    for _ in range(draw(st.integers(1, 3))):
        files: Files = []
        for name in draw(st.lists(st.sampled_from(FILE_NAMES), min_size=1, max_size=3, unique=True)):
            rows = []
            for _ in range(draw(st.integers(1, 6))):
                row = draw(change)
                if drawn and draw(st.booleans()):
                    twin = draw(st.sampled_from(drawn))
                    row.update(k1=twin["k1"], k2=twin["k2"], seq=twin["seq"])
                rows.append(row)
                drawn.append(row)
            files.append((name, rows))
        result.append(files)
    return result


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------
def csv_line(row: dict[str, Any]) -> str:
    return ",".join("" if row[c] is None else str(row[c]) for c in FEED_COLUMNS)


def write_batch(folder: Path, files: Files, reverse: bool = False) -> Path:
    """Write the files in the given order (or reversed), so write order/mtime never matches name order."""
    folder.mkdir(parents=True)
    for name, rows in reversed(files) if reverse else files:
        (folder / name).write_text("\n".join([",".join(FEED_COLUMNS), *map(csv_line, rows)]) + "\n")
    return folder


def table_config(path: Path, location: Path) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name="t",
        path=str(path),
        key=("k1", "k2"),
        sequence=("seq",),
        partition_by=("part",),
        feed=lakemerge.FeedConfig(
            location=(str(location),),
            format="csv",
            header=True,
            schema=SCHEMA,
            op_column="op",
            delete_codes=("D",),
            upsert_codes=("I", "U"),
        ),
    )


def read_rows(path: Path) -> list[dict[str, Any]]:
    return sort_rows(deltalake.DeltaTable(str(path)).to_pyarrow_table().to_pylist(), COLUMNS)


def metrics_of(result: lakemerge.BatchResult) -> dict[str, int]:
    return dict(vars(result.metrics))


def check_batch(
    result: lakemerge.BatchResult, path: Path, n: int, expected_state: State, expected_counts: dict[str, int]
) -> None:
    """The n-th batch (0-based) was one new commit and left exactly the oracle's table and counts."""
    where = f"batch {n}"
    assert result.version == n, f"{where}: one commit per batch, got version {result.version}"
    assert result.created is (n == 0), where
    table = deltalake.DeltaTable(str(path))
    assert table.version() == n, f"{where}: exactly one new Delta version"
    assert list(table.metadata().partition_columns) == ["part"], where
    fields = [f.name for f in table.schema().fields]
    assert "op" not in fields, f"{where}: the op column is never stored"
    assert sorted(fields) == sorted(COLUMNS), where

    got = metrics_of(result)
    want = {name: expected_counts.get(name, 0) for name in got}  # every other metric (rows_bad, ...) is 0
    assert set(COUNT_NAMES) <= set(got), f"{where}: metrics lack {set(COUNT_NAMES) - set(got)}"
    assert got == want, f"{where}: metrics"

    rows = read_rows(path)
    keys = [(r["k1"], r["k2"]) for r in rows]
    assert len(keys) == len(set(keys)), f"{where}: a key is stored twice (partition move left a copy?)"
    assert rows == state_rows(expected_state, COLUMNS), f"{where}: table content"


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(change_sets=batches())
def test_random_batches_match_the_oracle(spark: object, tmp_path: Path, change_sets: list[Files]) -> None:
    root = tmp_path / f"run_{next(_dirs)}"
    state: State = {}
    graves: dict[Any, Any] = {}
    for n, files in enumerate(change_sets):
        folder = write_batch(root / f"batch_{n:03d}", files)
        state, counts = apply_batch(state, files, tombstones=graves)
        result = lakemerge.apply_table(table_config(root / "table", folder), spark=spark)
        check_batch(result, root / "table", n, state, counts)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(change_sets=batches())
def test_same_input_gives_the_same_table(spark: object, tmp_path: Path, change_sets: list[Files]) -> None:
    """Semantics 2: the same input, written in a different order into another place, gives an
    identical table (and identical metrics) after every batch."""
    root = tmp_path / f"det_{next(_dirs)}"
    state: State = {}
    graves: dict[Any, Any] = {}
    for n, files in enumerate(change_sets):
        first = write_batch(root / "one" / f"batch_{n:03d}", files)
        second = write_batch(root / "two" / f"batch_{n:03d}", files, reverse=True)
        a = lakemerge.apply_table(table_config(root / "table_one", first), inputs=[str(first)], spark=spark)
        b = lakemerge.apply_table(table_config(root / "table_two", second), inputs=[str(second)], spark=spark)
        assert (a.version, a.created, metrics_of(a)) == (b.version, b.created, metrics_of(b)), f"batch {n}"
        assert read_rows(root / "table_one") == read_rows(root / "table_two"), f"batch {n}"
        state, _ = apply_batch(state, files, tombstones=graves)
        assert read_rows(root / "table_one") == state_rows(state, COLUMNS), f"batch {n}"


# A fixed scenario: ties within a batch decided by file name then row, a partition move, a delete
# of an absent key, a late update, a delete then a re-insert in the next batch, an exact tie with
# the stored row, an insert and a delete of the same key at the same sequence (later row wins).
FIXED: list[Files] = [
    [
        ("f_9.csv", [{"k1": 1, "k2": "x", "part": "a", "seq": 3, "op": "I", "v": "late_file"}]),
        (
            "f_10.csv",  # sorts before f_9.csv: its equal-sequence change loses
            [
                {"k1": 1, "k2": "x", "part": "b", "seq": 3, "op": "I", "v": "early_file"},
                {"k1": 2, "k2": "y", "part": "a", "seq": 1, "op": "I", "v": "r1"},
                {"k1": 2, "k2": "y", "part": "a", "seq": 1, "op": "U", "v": None},  # later row wins
                {"k1": 0, "k2": "x", "part": "a", "seq": 0, "op": "D", "v": None},  # absent key
            ],
        ),
    ],
    [
        (
            "f_00.csv",
            [
                {"k1": 1, "k2": "x", "part": "b", "seq": 5, "op": "U", "v": "moved"},  # partition move
                {"k1": 2, "k2": "y", "part": "a", "seq": 0, "op": "U", "v": "too_old"},  # late
                {"k1": 0, "k2": "y", "part": "b", "seq": 2, "op": "I", "v": "new"},
            ],
        )
    ],
    [
        (
            "f_00.csv",
            [
                {"k1": 0, "k2": "y", "part": "b", "seq": 4, "op": "D", "v": None},  # delete
                {"k1": 1, "k2": "x", "part": "b", "seq": 5, "op": "U", "v": "tie_wins"},  # tie with stored
            ],
        )
    ],
    [
        (
            "f_00.csv",
            [
                {"k1": 0, "k2": "y", "part": "a", "seq": 6, "op": "I", "v": "back"},  # re-insert
                {"k1": 2, "k2": "x", "part": "a", "seq": 2, "op": "I", "v": "gone"},
                {"k1": 2, "k2": "x", "part": "a", "seq": 2, "op": "D", "v": None},  # same seq, later row
            ],
        )
    ],
]


def test_batches_one_by_one_or_from_the_parent_and_reruns(spark: object, tmp_path: Path) -> None:
    """Semantics 8: applied files are never applied again. Applying each batch directory, or the
    growing parent landing directory each time, gives the same tables; rerunning an applied
    directory commits nothing and changes nothing."""
    landing = tmp_path / "landing"
    landing.mkdir()
    state: State = {}
    graves: dict[Any, Any] = {}
    for n, files in enumerate(FIXED):
        folder = write_batch(tmp_path / "batches" / f"batch_{n:03d}", files)
        state, counts = apply_batch(state, files, tombstones=graves)

        one = lakemerge.apply_table(table_config(tmp_path / "one", folder), inputs=[str(folder)], spark=spark)
        check_batch(one, tmp_path / "one", n, state, counts)

        shutil.copytree(folder, landing / folder.name)
        parent = lakemerge.apply_table(table_config(tmp_path / "parent", landing), spark=spark)
        check_batch(parent, tmp_path / "parent", n, state, counts)
        assert len(parent.files) == len(files), "only the new directory's files are applied"

    expected = state_rows(state, COLUMNS)
    assert expected == sort_rows(
        [
            {"k1": 0, "k2": "y", "part": "a", "seq": 6, "v": "back"},
            {"k1": 1, "k2": "x", "part": "b", "seq": 5, "v": "tie_wins"},
            {"k1": 2, "k2": "y", "part": "a", "seq": 1, "v": None},
        ],
        COLUMNS,
    ), "the oracle itself"

    last = len(FIXED) - 1
    for path, config, inputs in [
        (tmp_path / "one", table_config(tmp_path / "one", landing), [str(tmp_path / "batches" / "batch_001")]),
        (tmp_path / "one", table_config(tmp_path / "one", landing), [str(tmp_path / "batches")]),
        (tmp_path / "parent", table_config(tmp_path / "parent", landing), None),
    ]:
        again = lakemerge.apply_table(config, inputs=inputs, spark=spark)
        assert again.version is None, f"{path.name} {inputs}: nothing to commit"
        assert not again.files, f"{path.name} {inputs}: no file applied twice"
        assert deltalake.DeltaTable(str(path)).version() == last
        assert read_rows(path) == expected
