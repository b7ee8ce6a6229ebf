"""Which Spark lakemerge runs on, and the artifacts it takes for each: read without a JVM, an
unsupported release refused in one line before any JVM starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakemerge.config import SparkSettings
from lakemerge.errors import ConfigError
from lakemerge.spark import versions
from lakemerge.spark.session import session_conf


@pytest.mark.parametrize(
    ("version", "delta", "kafka"),
    [
        ("4.2.0", "io.delta:delta-spark_4.2_2.13:4.4.0", "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"),
        ("4.2.0.dev1", "io.delta:delta-spark_4.2_2.13:4.4.0", "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"),
        ("4.1.4", "io.delta:delta-spark_4.1_2.13:4.4.0", "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1"),
        ("4.1.0", "io.delta:delta-spark_4.1_2.13:4.4.0", "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1"),
    ],
)
def test_each_supported_spark_line_takes_its_own_delta_and_kafka_builds(version: str, delta: str, kafka: str) -> None:
    matching = versions.pairing(version)
    assert (matching.delta, matching.kafka) == (delta, kafka)
    assert matching.avro.endswith(f":{kafka.rsplit(':', 1)[1]}")


@pytest.mark.parametrize("version", ["3.5.6", "4.0.1", "4.3.0", "5.0.0", "nonsense"])
def test_an_unsupported_spark_is_one_line_naming_it_and_the_supported_lines(version: str) -> None:
    with pytest.raises(ConfigError) as caught:
        versions.pairing(version)
    message = str(caught.value)
    assert caught.value.exit_code == 2
    assert f"Spark {version} is not supported" in message
    assert "4.2 and 4.1" in message
    assert "\n" not in message


def test_the_installed_pyspark_decides_the_packages_a_session_starts_with() -> None:
    import pyspark

    line = ".".join(pyspark.__version__.split(".")[:2])
    packages = session_conf(SparkSettings())["spark.jars.packages"].split(",")
    assert packages[:2] == [versions.PAIRINGS[line].delta, versions.PAIRINGS[line].avro]


def _fake_spark_home(tmp_path: Path, version: str) -> Path:
    home = tmp_path / f"spark-{version}"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / f"spark-core_2.13-{version}.jar").write_bytes(b"")
    return home


def test_spark_home_names_the_spark_that_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_HOME", str(_fake_spark_home(tmp_path, "4.1.4")))
    assert versions.installed_spark() == "4.1.4"
    assert versions.installed_pairing().spark == "4.1"
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "not-a-spark"))
    import pyspark

    assert versions.installed_spark() == pyspark.__version__


def test_the_command_line_refuses_an_unsupported_spark_before_starting_a_jvm(tmp_path: Path) -> None:
    """With ``SPARK_HOME`` at a Spark 4.3 (whose launcher is not even there), ``apply`` exits 2 with
    the version line: had it tried to start the JVM, the missing launcher would have failed instead."""
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        '[tables.t]\npath = "t"\nkey = "id"\n[tables.t.feed]\nlocation = "in"\nformat = "csv"\nheader = true\n'
    )
    env = {**os.environ, "SPARK_HOME": str(_fake_spark_home(tmp_path, "4.3.0"))}
    done = subprocess.run(
        [sys.executable, "-m", "lakemerge.cli.app", "apply", str(pipeline)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: Spark 4.3.0 is not supported: lakemerge runs on Spark 4.2 and 4.1 (pip install 'pyspark>=4.1,<=4.2.0')"
    ]


def test_conf_prints_the_artifacts_of_the_clusters_spark(tmp_path: Path) -> None:
    """``lakemerge conf --spark-version`` gives spark-submit the builds of the cluster's Spark line, the
    Kafka source among them when a table streams from Kafka; an unsupported line is one line, exit 2."""
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        '[tables.t]\npath = "t"\nkey = "id"\n'
        '[tables.t.stream]\nbootstrap_servers = "127.0.0.1:9092"\ntopics = ["x"]\ncheckpoint = "cp"\n'
    )

    def conf(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "lakemerge.cli.app", "conf", str(pipeline), "--json", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    for line, matching in versions.PAIRINGS.items():
        done = conf("--spark-version", f"{line}.7")
        assert done.returncode == 0, done.stderr
        packages = json.loads(done.stdout)["conf"]["spark.jars.packages"].split(",")
        assert packages == [matching.delta, matching.avro, matching.kafka]
    refused = conf("--spark-version", "3.5.6")
    assert refused.returncode == 2
    assert json.loads(refused.stdout)["error"]["message"].startswith("Spark 3.5.6 is not supported")
