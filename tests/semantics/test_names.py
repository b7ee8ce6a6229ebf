"""Any column name a source can have works end to end: CSV headers and schemas, keys, sequences,
op columns, partial updates, SCD type 2 and ``log`` tables, compaction, catalog registration. Names
are drawn from printable Unicode (spaces, quotes, backticks, dots, semicolons, letters of any
script); tables whose names need it get column mapping. Tables are read back with delta-rs and
compared with the plain-Python oracles."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import lakemerge
from tests.helpers import read_log_view, read_table, table_columns
from tests.history_oracle import HistoryOracle
from tests.oracle import Oracle

#: Printable characters of any script; a name is stripped as a CSV header's names are, and may not
#: use lakemerge's reserved prefixes (``_lm_``, and ``__`` of SCD type 2's columns).
_CHARS = st.characters(categories=("L", "M", "N", "P", "S", "Zs"), exclude_characters="\ufeff\ufffd")
NAME = st.text(_CHARS, min_size=1, max_size=10).filter(
    lambda n: n == n.strip() and not n.startswith(("_lm_", "__")) and n == n.strip("\u3000\u2028\u2029\u00a0")
)
NAMES = st.lists(NAME, min_size=5, max_size=5, unique_by=(str.lower, str.upper, str.casefold))
ROW = st.tuples(
    st.integers(1, 4),
    st.integers(1, 4),
    st.sampled_from("UUD"),
    st.sampled_from(["a", "b", None]),
    st.sampled_from(["x", None]),
)
BATCHES = st.lists(st.lists(ROW, min_size=1, max_size=6), min_size=2, max_size=2)

SETTINGS = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def land(folder: Path, names: list[str], rows: list[tuple[Any, ...]]) -> Path:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(names)
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "f.csv").write_text(buffer.getvalue(), encoding="utf-8")
    return folder


def table(root: Path, names: list[str], **settings: Any) -> lakemerge.TableConfig:
    key, seq, op = names[:3]
    return lakemerge.TableConfig(
        name="t",
        path=str(root / "table"),
        key=(key,),
        sequence=(seq,),
        feed=lakemerge.FeedConfig(
            location=(str(root / "in"),), format="csv", header=True, op_column=op, types={key: "int", seq: "bigint"}
        ),
        **settings,
    )


def _dicts(names: list[str], rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [dict(zip(names, row, strict=True)) for row in rows]


@pytest.mark.parametrize("mode", ["copy_on_write", "log"])
@SETTINGS
@given(names=NAMES, batches=BATCHES)
def test_latest_tables_with_any_names(
    spark: object, tmp_path_factory: Any, mode: str, names: list[str], batches: Any
) -> None:
    root = tmp_path_factory.mktemp("names")
    key, seq, op, a, b = names
    t = table(root, names, write_mode=mode, ignore_null_updates=(b,))
    oracle = Oracle(key=(key,), seq=seq, op=op, partial=(b,))
    for n, rows in enumerate(batches):
        folder = land(root / "in" / f"b{n}", names, rows)
        oracle.apply([_dicts(names, rows)])
        lakemerge.apply_table(t, inputs=[str(folder)], spark=spark)
    columns = [key, seq, a, b]
    expected = sorted(
        ({c: r.get(c) for c in columns} for r in oracle.table.values()),
        key=lambda r: [(v is None, str(v)) for v in r.values()],
    )
    got = read_log_view(t.path, t.log_table, key, columns) if mode == "log" else read_table(t.path, columns)
    assert got == expected
    if mode == "log":
        lakemerge.compact(lakemerge.PipelineConfig(tables={"t": t}), spark=spark)
        assert read_log_view(t.path, t.log_table, key, columns) == expected
    assert sorted(lakemerge.read_current(spark, t).columns) == sorted(columns)  # type: ignore[arg-type]


@SETTINGS
@given(names=NAMES, batches=BATCHES)
def test_scd2_tables_with_any_names(spark: object, tmp_path_factory: Any, names: list[str], batches: Any) -> None:
    root = tmp_path_factory.mktemp("names")
    key, seq, op, a, b = names
    t = table(root, names, history="scd2", track_columns=(a,))
    oracle = HistoryOracle(key=(key,), seq=seq, columns=(a, b), track=(a,))
    for n, rows in enumerate(batches):
        folder = land(root / "in" / f"b{n}", names, rows)
        oracle.apply([[{**row, "op": row[op]} for row in _dicts(names, rows)]])
        lakemerge.apply_table(t, inputs=[str(folder)], spark=spark)
    columns = [key, seq, a, b, "__start_at", "__end_at"]
    expected = sorted(
        ({c: r.get(c) for c in columns} for r in oracle.rows()), key=lambda r: [(v is None, str(v)) for v in r.values()]
    )
    assert read_table(t.path, columns) == expected


def test_names_that_need_column_mapping_reach_every_table_and_the_catalog(spark: object, tmp_path: Path) -> None:
    names = ["cust id; DROP TABLE t", "seq`x", "op (I/U/D)", "first name", "a.b"]
    key, seq, _, a, b = names
    t = table(tmp_path, names, partition_by=(a,), catalog_name="default.named_t")
    land(tmp_path / "in" / "b0", names, [(1, 1, "U", "p", "x"), (2, 1, "U", "q", None)])
    lakemerge.apply_table(t, inputs=[str(tmp_path / "in" / "b0")], spark=spark)
    land(tmp_path / "in" / "b1", [*names[:4], "new col"], [(1, 2, "U", "p", "n"), (2, 2, "D", "", "")])
    try:
        lakemerge.apply_table(t, inputs=[str(tmp_path / "in" / "b1")], spark=spark)
        found = spark.sql("SELECT * FROM default.named_t").collect()  # type: ignore[attr-defined]
    finally:
        spark.sql("DROP TABLE IF EXISTS default.named_t")  # type: ignore[attr-defined]
    assert [r.asDict() for r in found] == [{key: 1, seq: 2, a: "p", b: "x", "new col": "n"}]
    assert read_table(t.path, [key, "new col"]) == [{key: 1, "new col": "n"}]
    assert read_table(t.tombstone_table, [key, seq]) == [{key: 2, seq: 2}]
    assert "new col" in table_columns(t.path)


@SETTINGS
@given(names=NAMES, code=st.text(_CHARS, min_size=1, max_size=4).filter(lambda c: c.strip() == c != "D"))
@example(names=["id", "se%q", "o'p\\", "a", "b"], code="it's\\")
@example(names=["0", "1", "000", "_metadata", "00"], code="x")  # (the name of Spark's hidden file column)
def test_a_bad_record_s_reason_names_its_column_or_code_whatever_they_are(
    spark: object, tmp_path_factory: Any, names: list[str], code: str
) -> None:
    root = tmp_path_factory.mktemp("names")
    key, seq, op, _, _ = names
    cases = [
        ((1, "x'\\", "U", "a", "x"), f"cannot convert column '{seq}' value 'x'\\' to bigint"),
        ((None, 1, "U", "a", "x"), f"null key column '{key}'"),
        ((1, 1, code, "a", "x"), f"unknown op code '{code}'"),
        ((1, 1, None, "a", "x"), f"null op code in column '{op}'"),
    ]
    for n, (row, reason) in enumerate(cases):
        folder = land(root / "in" / f"b{n}", names, [row])
        t = lakemerge.TableConfig(
            name="t",
            path=str(root / "table"),
            key=(key,),
            sequence=(seq,),
            feed=lakemerge.FeedConfig(
                location=(str(folder),),
                format="csv",
                header=True,
                op_column=op,
                upsert_codes=("U", "I"),
                types={key: "int", seq: "bigint"},
            ),
        )
        with pytest.raises(lakemerge.InputError) as raised:
            lakemerge.apply_table(t, spark=spark)
        assert reason in str(raised.value)
