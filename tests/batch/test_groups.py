"""Groups of tables applied together, and the consistent point readers use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import lakemerge
from lakemerge.cli.app import app
from tests.helpers import write_lines

SCHEMA = "id INT, seq BIGINT, op STRING, v STRING"
PIPELINE = """
[tables.orders]
path = "lake/orders"
key = "id"
sequence = "seq"
[tables.orders.feed]
location = "landing/orders"
format = "csv"
header = true
schema = "{schema}"
op_column = "op"

[tables.lines]
path = "lake/lines"
key = "id"
sequence = "seq"
[tables.lines.feed]
location = "landing/lines"
format = "csv"
header = true
schema = "{schema}"
op_column = "op"

[groups.sales]
tables = ["orders", "lines"]
state = "lake/_groups/sales"
"""
runner = CliRunner()


def drop(tmp_path: Path, table: str, name: str, rows: list[str]) -> Path:
    return write_lines(tmp_path / "landing" / table / name, ["id,seq,op,v", *rows])


def at(spark: object, path: Path, version: int) -> dict[int, str]:
    frame = spark.read.format("delta").option("versionAsOf", version).load(str(path))  # type: ignore[attr-defined]
    return {r["id"]: r["v"] for r in frame.collect()}


def test_group_point_moves_only_when_every_table_committed(spark: object, tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(PIPELINE.format(schema=SCHEMA))
    pipeline = lakemerge.load_pipeline(tmp_path / "p.toml")
    drop(tmp_path, "orders", "o1.csv", ["1,1,I,order-1"])
    drop(tmp_path, "lines", "l1.csv", ["10,1,I,line-of-1"])
    assert lakemerge.snapshot(pipeline, "sales", spark=spark) is None
    results = lakemerge.run(pipeline, spark=spark)
    assert sorted(r.table for r in results) == ["lines", "orders"]
    point = lakemerge.snapshot(pipeline, "sales", spark=spark)
    assert point is not None and (point.point, point.versions) == (1, {"orders": 0, "lines": 0})

    # The next group run fails on its second table: the first table commits, the point stays.
    drop(tmp_path, "orders", "o2.csv", ["2,1,I,order-2"])
    bad = drop(tmp_path, "lines", "l2.csv", ["20,x,I,broken"])
    with pytest.raises(lakemerge.InputError):
        lakemerge.run(pipeline, spark=spark)
    point = lakemerge.snapshot(pipeline, "sales", spark=spark)
    assert point is not None and point.versions == {"orders": 0, "lines": 0}
    # Readers at the point see both tables as of the last complete group run.
    assert at(spark, tmp_path / "lake" / "orders", point.versions["orders"]) == {1: "order-1"}
    assert at(spark, tmp_path / "lake" / "orders", 1) == {1: "order-1", 2: "order-2"}

    bad.unlink()
    drop(tmp_path, "lines", "l3.csv", ["20,1,I,line-of-2"])
    results = lakemerge.run(pipeline, spark=spark)
    assert [r.table for r in results] == ["lines"]
    result = runner.invoke(app, ["snapshot", str(tmp_path / "p.toml"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["groups"]["sales"]["versions"] == {"orders": 1, "lines": 1}
    assert json.loads(result.output)["groups"]["sales"]["point"] == 2


@pytest.mark.parametrize(
    ("groups", "words"),
    [
        ('[groups.g]\ntables = ["orders", "nope"]\nstate = "s"\n', "does not define"),
        ('[groups.g]\ntables = ["orders"]\nstate = "s"\n[groups.h]\ntables = ["orders"]\nstate = "t"\n', "both groups"),
        ('[groups.g]\ntables = []\nstate = "s"\n', "at least one table"),
    ],
)
def test_group_config_errors(tmp_path: Path, groups: str, words: str) -> None:
    text = PIPELINE.format(schema=SCHEMA).split("[groups.sales]")[0] + groups
    (tmp_path / "p.toml").write_text(text)
    with pytest.raises(lakemerge.ConfigError, match=words):
        lakemerge.load_pipeline(tmp_path / "p.toml")
