"""Schema changes by policy (docs/semantics.md §7 Schema drift): each kind of change as the table's
``schema_changes`` settings say, recorded in the commit that makes it and shown by ``history``."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import deltalake
import pytest

import lakemerge
from tests.helpers import read_table, table_columns, table_version, write_lines


def cfg(tmp_path: Path, schema: str, folder: str, **table: Any) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name="t",
        path=str(tmp_path / "table"),
        key=("id",),
        sequence=("seq",),
        feed=lakemerge.FeedConfig(location=(str(tmp_path / folder),), format="csv", header=True, schema=schema),
        **table,
    )


def apply(spark: Any, tmp_path: Path, schema: str, lines: list[str], **table: Any) -> lakemerge.BatchResult:
    folder = f"in{len(list(tmp_path.glob('in*')))}"
    write_lines(tmp_path / folder / "f.csv", lines)
    return lakemerge.apply_table(cfg(tmp_path, schema, folder, **table), spark=spark)


def recorded(path: Path) -> list[list[dict[str, Any]]]:
    """The schema changes each commit's record holds, oldest first (read by delta-rs)."""
    found = []
    for commit in sorted(deltalake.DeltaTable(str(path)).history(), key=lambda c: int(c["version"])):
        record = json.loads(commit.get("userMetadata") or "{}")
        found.append(record.get("schema_changes", []))
    return found


def start(spark: Any, tmp_path: Path) -> None:
    apply(spark, tmp_path, "id INT, seq BIGINT, v STRING, n INT", ["id,seq,v,n", "1,1,a,10", "2,1,b,20"])


def test_a_new_column_is_added_by_default_and_recorded(spark: Any, tmp_path: Path) -> None:
    start(spark, tmp_path)
    r = apply(spark, tmp_path, "id INT, seq BIGINT, v STRING, n INT, extra STRING", ["id,seq,v,n,extra", "1,2,a,11,x"])
    assert [str(c) for c in r.schema_changes] == ["extra added (string)"]
    assert read_table(tmp_path / "table") == [
        {"id": 1, "seq": 2, "v": "a", "n": 11, "extra": "x"},
        {"id": 2, "seq": 1, "v": "b", "n": 20, "extra": None},
    ]
    assert recorded(tmp_path / "table")[-1] == [{"column": "extra", "change": "added", "type": "string", "was": None}]
    commits = lakemerge.history(str(tmp_path / "table"), spark=spark)
    assert commits[0].schema_changes == r.schema_changes and commits[1].schema_changes == ()


def test_a_new_column_ignored_or_refused(spark: Any, tmp_path: Path) -> None:
    start(spark, tmp_path)
    wider = "id INT, seq BIGINT, v STRING, n INT, extra STRING"
    with pytest.raises(lakemerge.SchemaError) as info:
        apply(
            spark,
            tmp_path,
            wider,
            ["id,seq,v,n,extra", "1,2,a,11,", "2,2,b,21,x"],
            schema_changes={"new_column": "fail"},
        )
    message = str(info.value)
    assert "table 't'" in message and "column 'extra' is not in the table" in message
    assert f"{tmp_path / 'in1' / 'f.csv'}, row 3" in message and "nothing was applied" in message
    assert table_version(tmp_path / "table") == 0
    r = apply(spark, tmp_path, wider, ["id,seq,v,n,extra", "1,2,a,11,x"], schema_changes={"new_column": "ignore"})
    assert [str(c) for c in r.schema_changes] == ["extra ignored"]
    assert table_columns(tmp_path / "table") == ["id", "seq", "v", "n"]
    assert read_table(tmp_path / "table")[0] == {"id": 1, "seq": 2, "v": "a", "n": 11}


def test_a_dropped_column_kept_nulled_or_dropped(spark: Any, tmp_path: Path) -> None:
    start(spark, tmp_path)
    narrow = "id INT, seq BIGINT, n INT"
    kept = apply(spark, tmp_path, narrow, ["id,seq,n", "1,2,11", "3,1,30"])
    assert kept.schema_changes == ()  # (keep: the table's columns do not change)
    assert read_table(tmp_path / "table", ["id", "v"]) == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "b"},
        {"id": 3, "v": None},
    ]
    nulled = apply(spark, tmp_path, narrow, ["id,seq,n", "2,2,21"], schema_changes={"dropped_column": "null"})
    assert [str(c) for c in nulled.schema_changes] == ["v nulled"]
    assert read_table(tmp_path / "table", ["id", "v"]) == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": None},
        {"id": 3, "v": None},
    ]
    dropped = apply(spark, tmp_path, narrow, ["id,seq,n", "1,3,12"], schema_changes={"dropped_column": "drop"})
    assert [str(c) for c in dropped.schema_changes] == ["v dropped"]
    assert table_columns(tmp_path / "table") == ["id", "seq", "n"]
    assert read_table(tmp_path / "table") == [
        {"id": 1, "seq": 3, "n": 12},
        {"id": 2, "seq": 2, "n": 21},
        {"id": 3, "seq": 1, "n": 30},
    ]
    assert recorded(tmp_path / "table")[-1] == [{"column": "v", "change": "dropped", "type": None, "was": "string"}]
    # A column of that name coming back is a new column: null in the rows before it.
    back = apply(spark, tmp_path, "id INT, seq BIGINT, n INT, v STRING", ["id,seq,n,v", "2,3,22,z"])
    assert [str(c) for c in back.schema_changes] == ["v added (string)"]
    assert read_table(tmp_path / "table", ["id", "v"]) == [
        {"id": 1, "v": None},
        {"id": 2, "v": "z"},
        {"id": 3, "v": None},
    ]


def spark_rows(spark: Any, path: Path) -> list[dict[str, Any]]:
    """The table's rows read by Spark: delta-rs cannot read a table with type widening on."""
    return sorted((r.asDict() for r in spark.read.format("delta").load(str(path)).collect()), key=lambda r: r["id"])


def test_a_wider_type_widens_the_column_where_type_widening_is_on(spark: Any, tmp_path: Path) -> None:
    apply(spark, tmp_path, "id INT, seq BIGINT, n INT, p DECIMAL(6,2)", ["id,seq,n,p", "1,1,5,1.25", "2,1,6,2.50"])
    wide = "id INT, seq BIGINT, n BIGINT, p DECIMAL(9,3)"
    with pytest.raises(lakemerge.SchemaError, match=r"'n' is BIGINT in the feed but INT.*widened_type = 'enable'"):
        apply(spark, tmp_path, wide, ["id,seq,n,p", "1,2,5000000000,123456.125"])
    assert table_version(tmp_path / "table") == 0
    r = apply(
        spark, tmp_path, wide, ["id,seq,n,p", "1,2,5000000000,123456.125"], schema_changes={"widened_type": "enable"}
    )
    assert sorted(str(c) for c in r.schema_changes) == [
        "n widened int → bigint",
        "p widened decimal(6,2) → decimal(9,3)",
    ]
    assert spark_rows(spark, tmp_path / "table") == [
        {"id": 1, "seq": 2, "n": 5000000000, "p": Decimal("123456.125")},
        {"id": 2, "seq": 1, "n": 6, "p": Decimal("2.500")},
    ]
    properties = spark.sql(f"SHOW TBLPROPERTIES delta.`{tmp_path / 'table'}`").collect()
    assert {"delta.enableTypeWidening": "true"}.items() <= {p["key"]: p["value"] for p in properties}.items()
    # A narrower type afterwards is cast up, and changes nothing of the table; a wider one widens
    # again by default now that the table has type widening.
    again = apply(spark, tmp_path, "id INT, seq BIGINT, n INT, p DECIMAL(6,2)", ["id,seq,n,p", "2,2,7,3.75"])
    assert again.schema_changes == ()
    assert spark_rows(spark, tmp_path / "table")[1] == {"id": 2, "seq": 2, "n": 7, "p": Decimal("3.750")}
    more = apply(spark, tmp_path, "id INT, seq BIGINT, n BIGINT, p DECIMAL(12,4)", ["id,seq,n,p", "2,3,8,1.0001"])
    assert [str(c) for c in more.schema_changes] == ["p widened decimal(9,3) → decimal(12,4)"]
    assert spark_rows(spark, tmp_path / "table")[1]["p"] == Decimal("1.0001")


def test_a_wider_type_refused_by_policy_or_by_the_change_log(spark: Any, tmp_path: Path) -> None:
    start(spark, tmp_path)
    wide = "id INT, seq BIGINT, v STRING, n BIGINT"
    with pytest.raises(lakemerge.SchemaError, match=r"'n' is BIGINT in the feed but INT in the table.*widened_type"):
        apply(spark, tmp_path, wide, ["id,seq,v,n", "1,2,a,5000000000"], schema_changes={"widened_type": "fail"})
    assert table_version(tmp_path / "table") == 0
    log = tmp_path / "log"
    log.mkdir()
    apply(spark, log, "id INT, seq BIGINT, n INT", ["id,seq,n", "1,1,5"], write_mode="log")
    with pytest.raises(lakemerge.SchemaError, match="a table with a change log keeps its types"):
        apply(spark, log, "id INT, seq BIGINT, n BIGINT", ["id,seq,n", "1,2,5000000000"], write_mode="log")
    with pytest.raises(ValueError, match="dropped_column = 'drop' needs a table without a change log"):
        cfg(log, "id INT", "in", write_mode="log", schema_changes={"dropped_column": "drop"})


def test_an_incompatible_type_fails_naming_the_first_record(spark: Any, tmp_path: Path) -> None:
    start(spark, tmp_path)
    text = "id INT, seq BIGINT, v STRING, n STRING"
    with pytest.raises(lakemerge.SchemaError) as info:
        apply(spark, tmp_path, text, ["id,seq,v,n", "1,2,a,", "2,2,b,many"])
    message = str(info.value)
    assert "column 'n' is STRING in the feed but INT in the table" in message
    assert f"{tmp_path / 'in1' / 'f.csv'}, row 3" in message
    assert table_version(tmp_path / "table") == 0


def test_an_incompatible_type_quarantines_what_does_not_fit(spark: Any, tmp_path: Path) -> None:
    start(spark, tmp_path)
    text = "id INT, seq BIGINT, v STRING, n STRING"
    lines = ["id,seq,v,n", "1,2,a,12", "2,2,b,many", "3,1,c,"]
    policy = {"incompatible_type": "quarantine"}
    with pytest.raises(lakemerge.InputError, match=r"column 'n' is STRING in the feed but INT in the table: the value"):
        apply(spark, tmp_path, text, lines, schema_changes=policy)  # (within the threshold only: 0 bad rows)
    assert table_version(tmp_path / "table") == 0
    r = apply(spark, tmp_path, text, lines, schema_changes=policy, max_bad_rows=5)
    assert (r.metrics.rows_bad, r.metrics.updated, r.metrics.inserted) == (1, 1, 1)
    assert read_table(tmp_path / "table") == [
        {"id": 1, "seq": 2, "v": "a", "n": 12},
        {"id": 2, "seq": 1, "v": "b", "n": 20},
        {"id": 3, "seq": 1, "v": "c", "n": None},
    ]
    bad = read_table(tmp_path / "table__quarantine", ["row", "reason"])
    assert bad == [
        {"row": 3, "reason": "column 'n' is STRING in the feed but INT in the table: the value does not fit"}
    ]


def test_history_shows_the_changes(spark: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from lakemerge.cli.app import app

    start(spark, tmp_path)
    apply(
        spark,
        tmp_path,
        "id INT, seq BIGINT, n BIGINT, w STRING",
        ["id,seq,n,w", "1,2,5000000000,x"],
        schema_changes={"widened_type": "enable"},
    )
    shown = CliRunner().invoke(app, ["history", str(tmp_path / "table")], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    assert "version 3: columns: n widened int → bigint; w added (string)" in shown.output
