"""A transaction over the tables of a group: all or none at the group's point, aborted by an
exception, completed exactly once when run again after it stopped while committing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.batch import transactions
from tests.helpers import read_table

RULES = {"op_column": "op", "upsert_codes": ["I", "U"], "delete_codes": ["D"]}


def pipeline_of(root: Path) -> lakemerge.PipelineConfig:
    tables = {
        name: {"path": str(root / name), "key": key, "sequence": "seq", "records": RULES}
        for name, key in (("orders", "order_id"), ("lines", "line_id"))
    }
    groups = {"sales": {"tables": ["orders", "lines"], "state": str(root / "_groups" / "sales")}}
    return lakemerge.PipelineConfig.model_validate({"tables": tables, "groups": groups})


def orders(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, "order_id INT, seq BIGINT, op STRING, total INT")


def lines(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, "line_id INT, order_id INT, seq BIGINT, op STRING, qty INT")


def test_a_transaction_commits_every_table_then_the_groups_point(spark: Any, tmp_path: Path) -> None:
    pipeline = pipeline_of(tmp_path)
    with lakemerge.transaction(pipeline, "sales", spark=spark) as tx:
        tx.apply("orders", orders(spark, [(1, 1, "I", 100), (2, 1, "I", 50)]))
        tx.apply("lines", lines(spark, [(10, 1, 1, "I", 3), (11, 2, 1, "I", 1)]))
    assert tx.result is not None and tx.result.transaction == 1
    assert [b.version for b in tx.result.batches] == [0, 0]
    assert all(b.source == "group:sales" and b.source_batch == 1 for b in tx.result.batches)
    point = lakemerge.snapshot(pipeline, "sales", spark=spark)
    assert point is not None and point.transaction == 1 and point.versions == {"orders": 0, "lines": 0}
    with lakemerge.transaction(pipeline, "sales", spark=spark) as tx:
        tx.apply("orders", orders(spark, [(2, 2, "D", None)]))
        tx.apply("lines", lines(spark, [(11, 2, 2, "D", None)]))
    point = lakemerge.snapshot(pipeline, "sales", spark=spark)
    assert point is not None and point.transaction == 2 and point.versions == {"orders": 1, "lines": 1}
    assert read_table(tmp_path / "orders", ["order_id"]) == [{"order_id": 1}]


def test_an_exception_inside_the_block_applies_nothing(spark: Any, tmp_path: Path) -> None:
    pipeline = pipeline_of(tmp_path)
    with (
        pytest.raises(RuntimeError, match="upstream failed"),
        lakemerge.transaction(pipeline, "sales", spark=spark) as tx,
    ):
        tx.apply("orders", orders(spark, [(1, 1, "I", 100)]))
        raise RuntimeError("upstream failed")
    assert tx.result is None
    assert not (tmp_path / "orders").exists() and lakemerge.snapshot(pipeline, "sales", spark=spark) is None


def test_a_transaction_stopped_while_committing_is_completed_once_by_its_rerun(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Orders commit, then the process dies before the lines: the group's point does not move. The
    same transaction run again applies the lines only and records the point; once more, nothing."""
    pipeline = pipeline_of(tmp_path)
    real = transactions.apply_table

    def dies_before_lines(table: lakemerge.TableConfig, **kwargs: Any) -> lakemerge.BatchResult:
        if table.name == "lines":
            raise KeyboardInterrupt
        return real(table, **kwargs)

    def run(id: int) -> lakemerge.TransactionResult:
        with lakemerge.transaction(pipeline, "sales", id=id, spark=spark) as tx:
            tx.apply("orders", orders(spark, [(1, 1, "I", 100), (1, 2, "U", 120)]))
            tx.apply("lines", lines(spark, [(10, 1, 1, "I", 3)]))
        assert tx.result is not None
        return tx.result

    monkeypatch.setattr(transactions, "apply_table", dies_before_lines)
    with pytest.raises(KeyboardInterrupt):
        run(5)
    assert read_table(tmp_path / "orders", ["order_id", "total"]) == [{"order_id": 1, "total": 120}]
    assert lakemerge.snapshot(pipeline, "sales", spark=spark) is None, "readers of the point see none of it"
    monkeypatch.setattr(transactions, "apply_table", real)
    done = run(5)
    assert [(b.table, b.applied_before, b.version) for b in done.batches] == [
        ("orders", True, None),
        ("lines", False, 0),
    ]
    assert done.point is not None and done.point.versions == {"orders": 0, "lines": 0}
    assert lakemerge.history(str(tmp_path / "orders"), spark=spark)[0].version == 0, "orders applied once"
    again = run(5)
    assert again.applied_before and again.batches == () and again.point is None
    point = lakemerge.snapshot(pipeline, "sales", spark=spark)
    assert point is not None and point.point == 1 and point.transaction == 5


def test_a_transaction_names_only_its_groups_tables_once(spark: Any, tmp_path: Path) -> None:
    pipeline = pipeline_of(tmp_path)
    with (
        pytest.raises(lakemerge.ConfigError, match="not in group 'sales'"),
        lakemerge.transaction(pipeline, "sales", spark=spark) as tx,
    ):
        tx.apply("customers", orders(spark, []))
    with (
        pytest.raises(lakemerge.ConfigError, match="has changes for 'orders' already"),
        lakemerge.transaction(pipeline, "sales", spark=spark) as tx,
    ):
        tx.apply("orders", orders(spark, [(1, 1, "I", 1)]))
        tx.apply("orders", orders(spark, [(2, 1, "I", 1)]))
    with (
        pytest.raises(lakemerge.ConfigError, match="no group named 'returns'"),
        lakemerge.transaction(pipeline, "returns", spark=spark),
    ):
        pass
    assert not (tmp_path / "orders").exists()
