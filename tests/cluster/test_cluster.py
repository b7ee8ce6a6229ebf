"""Beyond one JVM: the same pipeline on a Spark standalone cluster (a master and two workers, each a
separate process started from the installed PySpark), and tables registered in a Hive metastore
queried over JDBC from the Spark Thrift server.

Marked ``cluster`` (left out of the default run): ``python -m pytest -m cluster``.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.spark.session import session_conf
from tests.cluster.standalone import beeline, standalone, thrift_server
from tests.helpers import read_table, write_lines
from tests.oracle import Oracle

pytestmark = pytest.mark.cluster

COLUMNS = ["id", "seq", "region", "name"]

PIPELINE = """
[spark]
{spark}

[spark.conf]
"spark.executor.memory" = "512m"
"spark.cores.max" = "2"
"spark.sql.shuffle.partitions" = "4"
"spark.databricks.delta.snapshotPartitions" = "2"

[tables.orders]
path = "lake/orders"
key = "id"
sequence = "seq"
partition_by = "region"
max_files_per_batch = 1

[tables.orders.feed]
location = "landing/orders"
format = "csv"
header = true
op_column = "op"
upsert_codes = ["U"]
delete_codes = ["D"]
schema = "id INT, seq BIGINT, op STRING, region STRING, name STRING"

[tables.customers]
path = "lake/customers"
key = "id"
sequence = "seq"
history = "scd2"
max_files_per_batch = 1

[tables.customers.feed]
location = "landing/customers"
format = "csv"
header = true
op_column = "op"
upsert_codes = ["U"]
delete_codes = ["D"]
schema = "id INT, seq BIGINT, op STRING, region STRING, name STRING"
"""


def changes(seed: int, batches: int = 3, rows: int = 40) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    out = []
    for b in range(batches):
        batch = []
        for _ in range(rows):
            key = rng.randint(1, 25)
            op = "D" if rng.random() < 0.15 else "U"
            batch.append(
                {"id": key, "seq": rng.randint(1, 40) + 20 * b, "op": op, "region": f"r{key % 3}", "name": f"n{b}"}
            )
        out.append(batch)
    return out


def make_pipeline(root: Path, spark_section: str, batches: list[list[dict[str, Any]]]) -> Path:
    for table in ("orders", "customers"):
        for b, rows in enumerate(batches):
            lines = ["id,seq,op,region,name"]
            for r in rows:
                name = r["name"] if r["op"] == "U" else ""
                lines.append(f"{r['id']},{r['seq']},{r['op']},{r['region']},{name}")
            write_lines(root / "landing" / table / f"f_{b}.csv", lines)
    pipeline = root / "pipeline.toml"
    pipeline.write_text(PIPELINE.format(spark=spark_section))
    return pipeline


def run_cli(*args: str, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "lakemerge.cli.app", *args], cwd=cwd, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    return result.stdout


def test_a_pipeline_on_a_standalone_cluster_equals_local_mode_and_the_oracle(spark: Any, tmp_path: Path) -> None:
    batches = changes(seed=8)
    on_cluster = tmp_path / "cluster"
    local = tmp_path / "local"
    with standalone(tmp_path / "services") as master:
        pipeline = make_pipeline(on_cluster, f'master = "{master}"', batches)
        run_cli("run", str(pipeline), "--json", cwd=on_cluster)
        logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "services").glob("worker-*.log"))
        assert "Asked to launch executor" in logs, "the batches ran on the cluster's executors"

    lakemerge.run(make_pipeline(local, "", batches), spark=spark)

    oracle = Oracle(key=("id",), seq="seq", op="op")
    for rows in batches:
        oracle.apply([rows])
    expected = sorted(
        ({c: r[c] for c in COLUMNS} for r in oracle.rows()), key=lambda r: [(v is None, str(v)) for v in r.values()]
    )
    assert read_table(on_cluster / "lake" / "orders", COLUMNS) == read_table(local / "lake" / "orders", COLUMNS)
    assert read_table(on_cluster / "lake" / "orders", COLUMNS) == expected
    history = [*COLUMNS, "__start_at", "__end_at", "__current"]
    assert read_table(on_cluster / "lake" / "customers", history) == read_table(local / "lake" / "customers", history)
    versions = lakemerge.history(str(on_cluster / "lake" / "orders"), spark=spark)
    assert len([c for c in versions if c.batch_id]) == 3, "one commit per batch, as in local mode"


def test_tables_and_views_in_a_hive_metastore_answer_over_jdbc(tmp_path: Path) -> None:
    root = tmp_path / "hive"
    pipeline = make_pipeline(root, 'catalog = "hive"\ndatabase = "lake"', changes(seed=3))
    run_cli("run", str(pipeline), cwd=root)  # each batch registers its table (and the SCD2 view)
    config = lakemerge.load_pipeline(pipeline)
    expected_orders = read_table(root / "lake" / "orders", COLUMNS)
    current = [r for r in read_table(root / "lake" / "customers", [*COLUMNS, "__current"]) if r["__current"]]
    # The embedded Derby metastore admits one JVM at a time: lakemerge has exited, the server opens it.
    with thrift_server(root / "services", session_conf(config.spark)) as port:
        rows = beeline(port, "SELECT count(*), sum(id), max(seq) FROM lake.orders", work=root / "services")
        assert rows == [
            [str(len(expected_orders)), str(sum(r["id"] for r in expected_orders)),
             str(max(r["seq"] for r in expected_orders))]
        ]  # fmt: skip
        rows = beeline(port, "SELECT id, name FROM lake.customers_current ORDER BY id", work=root / "services")
        assert rows == [[str(r["id"]), r["name"]] for r in sorted(current, key=lambda r: r["id"])]
        tables = beeline(port, "SHOW TABLES IN lake", work=root / "services")
        assert {t[1] for t in tables} >= {"orders", "customers", "customers_current"}
