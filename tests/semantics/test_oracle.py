"""Random multi-batch change sets through the public API, read back with delta-rs, against the
plain-Python oracle (tests/oracle.py): duplicates within a batch, equal sequences, late records,
deletes and re-inserts, a composite key, partition moves, partial updates and truncates. Each batch
is first planned as a dry run, which must report the real run's numbers and commit nothing."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakemerge
from tests.helpers import read_table, write_lines
from tests.oracle import Oracle

COLUMNS = ["k1", "k2", "part", "seq", "a", "b"]
SCHEMA = "k1 INT, k2 STRING, part STRING, seq BIGINT, op STRING, a STRING, b STRING"
counter = itertools.count()

value = st.one_of(st.none(), st.sampled_from(["p", "q", "r"]))


def change(ops: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "k1": st.integers(0, 3),
            "k2": st.sampled_from(["x", "y"]),
            "part": st.sampled_from(["a", "b"]),
            "seq": st.integers(0, 5),
            "op": st.sampled_from(ops),
            "a": value,
            "b": value,
        }
    )


def batches(ops: list[str]) -> st.SearchStrategy[list[list[list[dict[str, Any]]]]]:
    files = st.lists(st.lists(change(ops), min_size=1, max_size=5), min_size=1, max_size=3)
    return st.lists(files, min_size=1, max_size=3)


def csv(row: dict[str, Any]) -> str:
    if row["op"] == "T":  # a truncate carries only its sequence
        return f",,,{row['seq']},T,,"
    return ",".join("" if row[c] is None else str(row[c]) for c in ["k1", "k2", "part", "seq", "op", "a", "b"])


def run(spark: object, root: Path, change_sets: list[list[list[dict[str, Any]]]], **table: Any) -> None:
    oracle = Oracle(
        key=("k1", "k2"), seq="seq", op="op", partial=("a", "b") if table.get("ignore_null_updates") else ()
    )
    config = lakemerge.TableConfig(
        name="t",
        path=str(root / "table"),
        key=("k1", "k2"),
        sequence=("seq",),
        partition_by=("part",),
        feed=lakemerge.FeedConfig(
            location=(str(root / "in"),),
            format="csv",
            header=True,
            schema=SCHEMA,
            op_column="op",
            upsert_codes=("I", "U"),
            delete_codes=("D",),
            truncate_codes=("T",),
        ),
        **table,
    )
    for n, files in enumerate(change_sets):
        folder = root / f"batch_{n:03d}"
        for f, rows in enumerate(files):  # names sort as lakemerge's file order does
            write_lines(folder / f"f_{f:02d}.csv", ["k1,k2,part,seq,op,a,b", *[csv(r) for r in rows]])
        expected = oracle.apply(files)
        planned = lakemerge.apply_table(config, inputs=[str(folder)], spark=spark, dry_run=True)
        assert planned.dry_run and planned.version is None
        result = lakemerge.apply_table(config, inputs=[str(folder)], spark=spark)
        assert planned.metrics == result.metrics, "a dry run reports what the real run then does"
        assert result.version == n, "each batch is exactly one commit"
        got = {k: v for k, v in vars(result.metrics).items() if k != "rows_bad"}
        assert got == vars(expected), f"batch {n}"
        assert read_table(config.path, COLUMNS) == read_table_like(oracle.rows()), f"batch {n}"


def read_table_like(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(
        ({c: r.get(c) for c in COLUMNS} for r in rows), key=lambda r: [(v is None, str(v)) for v in r.values()]
    )


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(change_sets=batches(["I", "U", "U", "D"]))
def test_random_batches_match_the_oracle(spark: object, tmp_path: Path, change_sets: Any) -> None:
    run(spark, tmp_path / str(next(counter)), change_sets)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(change_sets=batches(["I", "U", "U", "U", "D", "T"]))
def test_partial_updates_and_truncates_match_the_oracle(spark: object, tmp_path: Path, change_sets: Any) -> None:
    run(spark, tmp_path / str(next(counter)), change_sets, ignore_null_updates=True)
