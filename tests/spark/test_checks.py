"""A Spark session built by the user without what Delta needs is refused in one line saying what to
add, and a JVM that cannot start (a package that does not resolve) says which artifact: never a
``ClassNotFoundException`` or a Py4J trace. Each case needs a JVM started its own way, so each runs
in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakemerge.spark import versions

#: Builds sessions from the settings given in argv[1] (a JSON list of {setting: value} maps, one session
#: after another in one JVM), asks lakemerge for a table's history in each, and prints what it said.
_PROBE = """
import json, sys
from pyspark.sql import SparkSession
import lakemerge
said = []
for conf in json.loads(sys.argv[1]):
    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    try:
        lakemerge.history(sys.argv[2], spark=session)
        said.append(["ok", 0, ""])
    except lakemerge.LakemergeError as exc:
        said.append([type(exc).__name__, exc.exit_code, str(exc)])
    session.stop()
print("SAID " + json.dumps(said))
"""


def _probe(sessions: list[dict[str, str]], table: Path) -> list[list[object]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(sessions), str(table)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYSPARK_SUBMIT_ARGS": "pyspark-shell"},
    )
    said = [line for line in done.stdout.splitlines() if line.startswith("SAID ")]
    assert said, done.stderr[-3000:]
    return json.loads(said[0][5:])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory, spark: object) -> Path:
    import lakemerge

    root = tmp_path_factory.mktemp("checked")
    (root / "in").mkdir()
    (root / "in" / "a.csv").write_text("id,v\n1,a\n")
    (root / "p.toml").write_text(
        '[tables.t]\npath = "t"\nkey = "id"\n[tables.t.feed]\nlocation = "in"\nformat = "csv"\nheader = true\n'
    )
    lakemerge.apply(root / "p.toml", spark=spark)  # type: ignore[arg-type]
    return root / "t"


def test_a_session_without_delta_says_what_to_add(table: Path) -> None:
    extension = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"}
    catalog = {"spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}
    matching = versions.installed_pairing()
    said = _probe([{}, extension, {**extension, **catalog}], table)
    assert [s[:2] for s in said] == [["ConfigError", 2]] * 3
    none, no_jars, jars_missing_too = (str(s[2]) for s in said)
    assert none.startswith("the Spark session has no Delta Lake extension: add spark.sql.extensions=io.delta.sql.")
    assert matching.delta in none
    assert no_jars.startswith("the Spark session has Delta Lake's extension but not its jars: add the package ")
    assert matching.delta in no_jars
    assert jars_missing_too == no_jars


def test_a_session_with_delta_and_without_its_catalog_names_the_catalog(table: Path) -> None:
    matching = versions.installed_pairing()
    said = _probe(
        [{"spark.jars.packages": matching.delta, "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"}],
        table,
    )
    assert said[0][:2] == ["ConfigError", 2]
    assert "catalog is Spark's own, not Delta Lake's: add spark.sql.catalog.spark_catalog=" in str(said[0][2])


def test_delta_built_for_another_spark_line_is_refused_naming_the_right_build(table: Path) -> None:
    installed = versions.installed_pairing()
    other = next(p for line, p in versions.PAIRINGS.items() if line != installed.spark)
    said = _probe(
        [
            {
                "spark.jars.packages": other.delta,
                "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            }
        ],
        table,
    )
    assert said[0][:2] == ["ConfigError", 2]
    assert f"with Delta Lake's build for Spark {other.spark}" in str(said[0][2])
    assert f"use {installed.delta} instead" in str(said[0][2])


def test_a_package_spark_cannot_resolve_is_one_line_naming_the_artifact(tmp_path: Path) -> None:
    """Spark's Kafka source 4.1.3 lacks a dependency on Maven Central: the JVM does not start, and
    the command says which artifact is missing, of which package, and where Spark's log is."""
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        '[spark]\npackages = ["org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.3"]\n'
        '[tables.t]\npath = "t"\nkey = "id"\n[tables.t.feed]\nlocation = "in"\nformat = "csv"\nheader = true\n'
    )
    (tmp_path / "in").mkdir()
    log = tmp_path / "spark.log"
    done = subprocess.run(
        [sys.executable, "-m", "lakemerge.cli.app", "apply", str(pipeline)],
        env={**os.environ, "LAKEMERGE_SPARK_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "error: Spark could not resolve org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.1.3, "
        "a dependency of org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.3: "
    )
    assert f"(Spark's log: {log})" in lines[0]
