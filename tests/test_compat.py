"""The older supported Spark line still works, as users install it: the wheel with its ``spark``
extra in a fresh virtual environment beside PySpark 4.1, run outside the checkout. The demo, a file
pipeline in each write mode and a DataFrame batch, each read back with delta-rs and compared with
the oracle (``python -m pytest -m compat``; the Kafka stream on 4.1 is in tests/streams)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import query_rows, read_log_view, read_table, write_lines
from tests.oracle import apply_batch, state_rows
from tests.wheels import Venv

pytestmark = pytest.mark.compat

MODES = ("copy_on_write", "deletion_vectors", "log")
COLUMNS = ("k", "seq", "v")


def test_the_demo_runs_on_spark_4_1(spark41: Venv, tmp_path: Path) -> None:
    version = spark41.run(["python", "-c", "import pyspark; print(pyspark.__version__)"], cwd=tmp_path)
    assert version.stdout.startswith("4.1."), version.stdout + version.stderr
    demo = spark41.run(["lakemerge", "demo", "--dir", "demo", "--json"], cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
    assert [b["version"] for b in json.loads(demo.stdout)["batches"]] == [0, 1]
    stored = {r["product_id"]: r for r in read_table(tmp_path / "demo" / "lake" / "products")}
    assert "P0S7XBCQ45" not in stored and stored["VR8NCNE7DV"]["inventory"] == 82
    log = Path(spark41.env["LAKEMERGE_SPARK_LOG"]).read_text(errors="replace")
    assert "delta-spark_4.1_2.13" in log and "delta-spark_4.2_2.13" not in log


def _files(rng: random.Random, count: int) -> list[list[dict[str, Any]]]:
    """``count`` change files over 25 keys: inserts, updates, deletes and records older than what a
    table holds (late), several changes of one key in one file."""
    files = []
    for number in range(count):
        rows = []
        for _ in range(18):
            k = rng.randrange(25)
            seq = number * 10 + rng.randrange(-12, 10)
            rows.append({"k": k, "seq": seq, "op": rng.choice("IUUD"), "v": f"f{number}-{rng.randrange(1000)}"})
        files.append(rows)
    return files


def test_a_file_pipeline_in_each_write_mode_matches_the_oracle_on_spark_4_1(spark41: Venv, tmp_path: Path) -> None:
    files = _files(random.Random(41), 4)
    sections = []
    for mode in MODES:
        for number, rows in enumerate(files):
            lines = [f"{r['k']},{r['seq']},{r['op']},{r['v']}" for r in rows]
            write_lines(tmp_path / "landing" / mode / f"part_{number:02d}.csv", ["k,seq,op,v", *lines])
        sections.append(
            f'[tables.{mode}]\npath = "lake/{mode}"\nkey = "k"\nsequence = "seq"\nwrite_mode = "{mode}"\n'
            f"max_files_per_batch = 1\n"
            f'[tables.{mode}.feed]\nlocation = "landing/{mode}"\nformat = "csv"\nheader = true\nop_column = "op"\n'
            'types = { k = "int", seq = "bigint" }\n'
        )
    (tmp_path / "pipeline.toml").write_text("\n".join(sections))
    ran = spark41.run(["lakemerge", "run", "pipeline.toml", "--json"], cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    batches = json.loads(ran.stdout)["batches"]

    state: dict[Any, Any] = {}
    tombstones: dict[Any, Any] = {}
    expected_counts = []
    for number, rows in enumerate(files):
        state, counts = apply_batch(
            state, [(f"part_{number:02d}.csv", rows)], key=("k",), seq="seq", op="op", tombstones=tombstones
        )
        expected_counts.append(counts)
    expected = state_rows(state, COLUMNS)
    for mode in MODES:
        done = [b for b in batches if b["table"] == mode]
        assert [len(b["files"]) for b in done] == [1] * len(files), mode
        for batch, counts in zip(done, expected_counts, strict=True):
            got = {name: batch["metrics"][name] for name in ("inserted", "updated", "deleted", "late", "superseded")}
            assert got == {name: counts[name] for name in got}, (mode, batch["batch_id"])
    path = tmp_path / "lake"
    assert read_table(path / "copy_on_write", COLUMNS) == expected
    assert sorted(query_rows(path / "deletion_vectors", COLUMNS), key=_order) == sorted(expected, key=_order)
    assert read_log_view(path / "log", path / "log__log", "k", COLUMNS) == expected


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[c] for c in COLUMNS)


_FRAMES = """
import json, sys
import lakemerge
spark = lakemerge.spark_session(lakemerge.SparkSettings(master="local[1]"))
records = lakemerge.RecordsConfig(op_column="op", upsert_codes=("I", "U"))
table = lakemerge.TableConfig(name="t", path=sys.argv[1], key=("k",), sequence=("seq",), records=records)
said = []
for number, rows in enumerate(json.loads(sys.argv[2]), start=1):
    frame = spark.createDataFrame([tuple(r.values()) for r in rows], "k INT, seq BIGINT, op STRING, v STRING")
    result = lakemerge.apply_changes(table, frame, source="job", batch_id=number, spark=spark)
    said.append([result.version, result.metrics.inserted, result.metrics.updated, result.metrics.deleted])
again = lakemerge.apply_changes(table, frame, source="job", batch_id=1, spark=spark)
said.append([again.version, again.applied_before])
print("SAID " + json.dumps(said))
"""


def test_a_dataframe_batch_applies_once_on_spark_4_1(spark41: Venv, tmp_path: Path) -> None:
    files = _files(random.Random(4), 3)
    ran = spark41.run(["python", "-c", _FRAMES, str(tmp_path / "t"), json.dumps(files)], cwd=tmp_path)
    said = [line for line in ran.stdout.splitlines() if line.startswith("SAID ")]
    assert ran.returncode == 0 and said, ran.stdout[-2000:] + ran.stderr[-3000:]
    results = json.loads(said[0][5:])
    state: dict[Any, Any] = {}
    tombstones: dict[Any, Any] = {}
    for number, rows in enumerate(files):
        state, counts = apply_batch(state, [("frame", rows)], key=("k",), seq="seq", op="op", tombstones=tombstones)
        assert results[number][1:] == [counts["inserted"], counts["updated"], counts["deleted"]], number
    assert results[-1] == [None, True]
    assert read_table(tmp_path / "t", COLUMNS) == state_rows(state, COLUMNS)
