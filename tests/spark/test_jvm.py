"""JVM classes by name (lakemerge.spark.jvm): a batch names every JVM class it uses whole, so py4j
never walks a package path (one round trip per segment, each a search of the class path)."""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any

import pytest
from py4j import java_gateway

import lakemerge
from lakemerge.spark.jvm import jclass
from tests.helpers import csv_table, write_lines


def test_a_class_by_name_constructs_calls_statics_and_keeps_its_members(spark: Any) -> None:
    path = jclass(spark, "org.apache.hadoop.fs.Path")
    assert jclass(spark, "org.apache.hadoop.fs.Path") is path
    assert str(path("/a/b", "c").toString()) == "/a/b/c"
    option = jclass(spark, "scala.Option")
    assert option.empty is option.empty  # looked up once
    assert not option.empty().isDefined() and option.apply(3).get() == 3
    assert str(jclass(spark, "org.apache.spark.sql.SaveMode").Append.name()) == "Append"
    nested = jclass(spark, "org.apache.spark.sql.delta.DeltaOperations$Write")
    assert nested._fqn.endswith("$Write")
    with pytest.raises(java_gateway.Py4JError):
        _ = jclass(spark, "org.apache.hadoop.fs.Path").no_such_member


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Package-path lookups (``jvm.org.apache...``) made from lakemerge's own modules."""
    seen: list[str] = []
    for cls in (java_gateway.JVMView, java_gateway.JavaPackage):
        real = cls.__getattr__

        def spy(self: Any, name: str, real: Any = real) -> Any:
            frames = [f for f in traceback.extract_stack()[:-1] if "py4j" not in f.filename]
            caller = frames[-1] if frames else None
            if caller is not None and f"{os.sep}lakemerge{os.sep}" in caller.filename and not name.startswith("__"):
                seen.append(f"{caller.filename}:{caller.lineno} {name}")
            return real(self, name)

        monkeypatch.setattr(cls, "__getattr__", spy)
    return seen


@pytest.mark.internals
@pytest.mark.parametrize("mode", ["log", "copy_on_write"])
def test_a_batch_walks_no_jvm_package_path(spark: Any, tmp_path: Path, walks: list[str], mode: str) -> None:
    table = csv_table(tmp_path, mode)
    write_lines(tmp_path / "in" / "b1.csv", ["k,seq,op,a", "1,1,U,x", "2,1,U,y"])
    lakemerge.apply_table(table, spark=spark)
    write_lines(tmp_path / "in" / "b2.csv", ["k,seq,op,a", "1,2,U,z", "2,2,D,", "3,2,U,w"])
    walks.clear()
    result = lakemerge.apply_table(table, spark=spark)
    assert (result.metrics.inserted, result.metrics.updated, result.metrics.deleted) == (1, 1, 1)
    assert walks == []
