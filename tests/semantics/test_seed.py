"""chombo's bulk mutator: its product example and its conventions through the
properties interface, from the CLI and from Python."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import lakemerge
from lakemerge.cli.app import app
from tests.helpers import read_table, table_columns, table_version, write_lines

MASTER = [
    "R217970F17,wearables,misfit,103,21,1427761080",
    "6QD0BAVS7I,laptop,asus,502,54,1427764070",
    "VR8NCNE7DV,wearables,fitbit,112,88,1427766458",
    "3SDS30A11P,laptop,thinkpad,551,54,1427770906",
]
INCREMENT = [
    "VR8NCNE7DV,wearables,fitbit,112,82,1428415316",  # update: inventory 88 -> 82
    "VRN5D60451,tablet,amazon kindle,258,96,1428527865",  # insert
    "R217970F17,wearables,misfit,99,21,1427000000",  # older than stored: late
]
DELETES = ["3SDS30A11P,laptop,thinkpad,551,54,1428600000"]
SEED_PROPERTIES = """#op.code.field.ordinal=4
deleted.op.code=D
deleted.record.file.prefix=del
temporal.ordering.field.ordinal=5
temporal.ordering.field.numeric=true
id.field.ordinals=0
"""
runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_seed_example_through_the_cli(spark: object, tmp_path: Path) -> None:
    props = tmp_path / "mutator.properties"
    props.write_text(SEED_PROPERTIES)
    table = tmp_path / "lake" / "products"
    write_lines(tmp_path / "master" / "part-00000", MASTER)
    code, out = cli("apply", "--properties", str(props), "--table", str(table), str(tmp_path / "master"), "--json")
    assert code == 0, out
    first = json.loads(out)["batches"][0]
    assert first["created"] is True and first["metrics"]["inserted"] == 4

    write_lines(tmp_path / "incr" / "incr_1428415316.csv", INCREMENT)
    write_lines(tmp_path / "incr" / "del_1428600000.csv", DELETES)
    code, out = cli("apply", "-p", str(props), "-t", str(table), str(tmp_path / "incr"), "--json")
    assert code == 0, out
    metrics = json.loads(out)["batches"][0]["metrics"]
    assert metrics == {
        "rows_read": 4,
        "rows_bad": 0,
        "changes": 4,
        "superseded": 0,
        "inserted": 1,
        "updated": 1,
        "deleted": 1,
        "late": 1,
        "deletes_absent": 0,
        "truncates": 0,
        "truncated": 0,
        "ignored": 0,
        "unchanged": 0,
        "snapshot_absent": 0,
        "tombstones_written": 1,
    }
    assert read_table(table) == [
        {"c0": "6QD0BAVS7I", "c1": "laptop", "c2": "asus", "c3": "502", "c4": "54", "c5": 1427764070},
        {"c0": "R217970F17", "c1": "wearables", "c2": "misfit", "c3": "103", "c4": "21", "c5": 1427761080},
        {"c0": "VR8NCNE7DV", "c1": "wearables", "c2": "fitbit", "c3": "112", "c4": "82", "c5": 1428415316},
        {"c0": "VRN5D60451", "c1": "tablet", "c2": "amazon kindle", "c3": "258", "c4": "96", "c5": 1428527865},
    ]
    # The op-code field is never stored; with none configured the table has exactly the six fields.
    assert table_columns(table) == ["c0", "c1", "c2", "c3", "c4", "c5"]

    code, out = cli("history", str(table), "--json")
    assert code == 0, out
    commits = json.loads(out)["commits"]
    assert [c["version"] for c in commits] == [1, 0]
    assert [Path(f["path"]).name for f in commits[0]["files"]] == ["del_1428600000.csv", "incr_1428415316.csv"]
    assert commits[0]["metrics"]["late"] == 1

    code, out = cli("show", str(table), "--json")
    assert code == 0, out
    shown = json.loads(out)
    assert shown["rows"] == 4 and shown["version"] == 1 and len(shown["sample"]) == 4


def test_named_columns_and_types_from_the_cli(spark: object, tmp_path: Path) -> None:
    props = tmp_path / "mutator.properties"
    props.write_text(SEED_PROPERTIES)
    write_lines(tmp_path / "in" / "master.csv", MASTER)
    table = tmp_path / "t"
    code, out = cli(
        "apply",
        "-p",
        str(props),
        "-t",
        str(table),
        str(tmp_path / "in"),
        "--columns",
        "product_id,category,brand,price,inventory,updated_at",
        "--type",
        "price=int",
        "--type",
        "inventory=int",
    )
    assert code == 0, out
    rows = read_table(table)
    assert rows[0] == {
        "product_id": "3SDS30A11P",
        "category": "laptop",
        "brand": "thinkpad",
        "price": 551,
        "inventory": 54,
        "updated_at": 1427770906,
    }


def test_file_name_number_orders_changes_without_an_ordering_field(spark: object, tmp_path: Path) -> None:
    """No temporal field: the number after the last '_' orders files (numerically, not by name),
    later rows of a file win, and the derived sequence is stored for later batches."""
    props = tmp_path / "m.properties"
    props.write_text("id.field.ordinals=0\ndeleted.record.file.prefix=del\n")
    table = str(tmp_path / "t")
    batch1 = tmp_path / "b1"
    write_lines(batch1 / "incr_20.csv", ["a,from-20", "b,from-20", "c,from-20", "c,from-20-later-row"])
    write_lines(batch1 / "incr_100.csv", ["a,from-100"])  # 100 > 20 although "incr_100" < "incr_20" by name
    write_lines(batch1 / "del_50.csv", ["a,x", "b,x"])  # deletes b (50 > 20); loses to a's update at 100
    cfg = lakemerge.load_properties(props, table_path=table, inputs=[str(batch1)], columns=["id", "v"])
    result = lakemerge.apply_table(cfg, spark=spark)
    assert result.metrics.inserted == 2 and result.metrics.deletes_absent == 1
    assert read_table(table) == [
        {"id": "a", "v": "from-100", "_lm_sequence": 100},
        {"id": "c", "v": "from-20-later-row", "_lm_sequence": 20},
    ]

    batch2 = tmp_path / "b2"
    write_lines(batch2 / "incr_30.csv", ["a,stale", "c,newer", "b,back"])
    result = lakemerge.apply_table(cfg, inputs=[str(batch2)], spark=spark)
    # b was deleted at 50 in the first batch: its tombstone makes this older update late (docs/semantics.md §12).
    assert (result.metrics.late, result.metrics.updated, result.metrics.inserted) == (2, 1, 0)
    assert read_table(table) == [
        {"id": "a", "v": "from-100", "_lm_sequence": 100},
        {"id": "c", "v": "newer", "_lm_sequence": 30},
    ]
    write_lines(tmp_path / "b3" / "incr_60.csv", ["b,back"])
    result = lakemerge.apply_table(cfg, inputs=[str(tmp_path / "b3")], spark=spark)
    assert result.metrics.inserted == 1, "a change newer than the tombstone brings the key back"


def test_regex_delimiter_composite_key_and_op_codes(spark: object, tmp_path: Path) -> None:
    props = tmp_path / "m.properties"
    props.write_text(
        "rsbm.id.field.ordinals=0,1\nrsbm.op.code.field.ordinal=2\nrsbm.deleted.op.code=DEL\n"
        "rsbm.temporal.ordering.field.ordinal=3\nrsbm.field.delim.regex=\\\\s*\\\\|\\\\s*\n"
    )
    write_lines(tmp_path / "in" / "c.txt", ["k1 | east | UPS | 1 | v1", "k1|west|UPS|1|w1", "k2|east|UPS|1|v2"])
    cfg = lakemerge.load_properties(props, table_path=str(tmp_path / "t"), inputs=[str(tmp_path / "in")])
    assert lakemerge.apply_table(cfg, spark=spark).metrics.inserted == 3
    write_lines(tmp_path / "in2" / "d.txt", ["k1|east|DEL|2|", "k2|east|UPS|2|v2b"])
    result = lakemerge.apply_table(cfg, inputs=[str(tmp_path / "in2")], spark=spark)
    assert (result.metrics.deleted, result.metrics.updated) == (1, 1)
    assert read_table(tmp_path / "t") == [
        {"c0": "k1", "c1": "west", "c3": 1, "c4": "w1"},
        {"c0": "k2", "c1": "east", "c3": 2, "c4": "v2b"},
    ]
    assert table_version(tmp_path / "t") == 1


def test_demo_applies_the_seed_example(spark: object, tmp_path: Path) -> None:
    code, out = cli("demo", "--dir", str(tmp_path / "demo"), "--json")
    assert code == 0, out
    result = json.loads(out)
    second = result["batches"][1]["metrics"]
    assert (second["inserted"], second["updated"], second["deleted"], second["late"]) == (2, 2, 2, 1)
    changes = {(c["before"] or c["after"])["product_id"]: c for c in result["changes"]}
    assert changes["VR8NCNE7DV"]["before"]["inventory"] == 88
    assert changes["VR8NCNE7DV"]["after"]["inventory"] == 82
    assert [c["version"] for c in result["history"]] == [1, 0]
    code, out = cli("demo", "--dir", str(tmp_path / "demo"))
    assert code == 0, out
    assert "88 → 82" in out and "ignored as late" in out and "history" in out
