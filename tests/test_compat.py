"""The older supported Spark line still works, as users install it: the wheel with its ``spark``
extra in a fresh virtual environment beside PySpark 4.1, run outside the checkout. The demo, a file
pipeline in each write mode and a DataFrame batch, each read back with delta-rs and compared with
the oracle (``python -m pytest -m compat``; the Kafka stream on 4.1 is in tests/streams)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import read_table
from tests.installed import dataframe_batches, pipeline_in_each_mode
from tests.wheels import Venv

pytestmark = pytest.mark.compat


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


def test_a_file_pipeline_in_each_write_mode_matches_the_oracle_on_spark_4_1(spark41: Venv, tmp_path: Path) -> None:
    pipeline_in_each_mode(spark41, tmp_path, seed=41)


def test_a_dataframe_batch_applies_once_on_spark_4_1(spark41: Venv, tmp_path: Path) -> None:
    dataframe_batches(spark41, tmp_path, seed=4)
