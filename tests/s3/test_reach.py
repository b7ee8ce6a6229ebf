"""Reaching S3: the jars and settings every command gets, from a pipeline file or the user's own
settings file alone, and the one line each store that cannot be reached gets (exit 3; 2 when the
session has no S3 filesystem), before anything is read or committed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bench.moto import free_port, start_moto
from lakemerge.cli.app import app
from tests.s3.conftest import BUCKET, S3

pytestmark = pytest.mark.s3

SOURCE = str(Path(__file__).resolve().parents[2] / "src")


def one_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output and "Py4J" not in output, output
    return lines[0]


def lakemerge(*args: str, config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``lakemerge ARGS`` in a fresh process (its own JVM) with ``config`` as the user's settings file."""
    env = {**os.environ, "PYTHONPATH": SOURCE, "LAKEMERGE_CONFIG": str(config)}
    env.pop("SPARK_REMOTE", None)
    command = [sys.executable, "-m", "lakemerge.cli.app", *args]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def user_settings(path: Path, conf: dict[str, str]) -> Path:
    lines = ["[spark]", 'master = "local[1]"', "[spark.conf]", *(f'"{k}" = "{v}"' for k, v in conf.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def table_on_s3(spark: Any, where: str) -> None:
    """A Delta table of three rows at ``where``, written by the suite's session."""
    spark.range(3).write.format("delta").save(where)


def test_path_commands_take_the_user_settings_and_add_the_s3_jars(
    spark: Any, s3: S3, lake: str, tmp_path: Path
) -> None:
    """``history`` of an s3a: table with no pipeline: the endpoint and credentials come from
    the user's settings file, the S3 jars are added because the path is s3a: (nothing names them)."""
    table_on_s3(spark, f"{lake}/t")
    config = user_settings(tmp_path / "config.toml", s3.spark_conf)
    history = lakemerge("history", f"{lake}/t", "--json", config=config, cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    assert '"version": 0' in history.stdout


def test_a_session_without_s3_jars_is_one_line(s3: S3, lake: str, tmp_path: Path) -> None:
    """The user's settings name jars of their own (so lakemerge adds none) without S3A: one line naming
    the path, exit 2."""
    config = user_settings(tmp_path / "config.toml", {**s3.spark_conf, "spark.jars": str(tmp_path / "hadoop-aws.jar")})
    done = lakemerge("history", f"{lake}/t", config=config, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    line = one_line(done.stderr)
    assert f"{lake}/t" in line and "no filesystem for s3a" in line and "hadoop-aws" in line


def test_conf_prints_the_s3_jars_for_spark_submit(s3: S3, lake: str, tmp_path: Path) -> None:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        f'[tables.t]\npath = "{tmp_path}/t"\nkey = "k"\n[tables.t.feed]\nlocation = "{lake}/in"\nformat = "csv"\n'
    )
    result = CliRunner().invoke(app, ["conf", str(pipeline)])
    assert result.exit_code == 0, result.output
    assert "org.apache.hadoop:hadoop-aws:" in result.output
    assert "software.amazon.awssdk:s3-transfer-manager:" in result.output
    assert "spark.jars.excludes=software.amazon.awssdk:bundle" in result.output
    assert "spark.delta.logStore" not in result.output
    pipeline.write_text('[spark]\ns3_commits = "conditional"\n' + pipeline.read_text())
    conditional = CliRunner().invoke(app, ["conf", str(pipeline), "--json"])
    assert conditional.exit_code == 0, conditional.output
    conf = json.loads(conditional.stdout)["conf"]
    assert conf["spark.delta.logStore.s3a.impl"] == "lakemerge.storage.ConditionalPutLogStore"
    assert Path(conf["spark.jars"].split(",")[0]).is_file()


@pytest.fixture
def guarded(spark: Any, tmp_path: Path) -> Any:
    """A second S3 server that checks credentials (moto's authentication after its first request,
    which makes the bucket), reached for the bucket ``guarded`` alone, with keys it does not know."""
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "1"
    try:
        server, endpoint = start_moto(tmp_path / "moto.log")
    finally:
        del os.environ["INITIAL_NO_AUTH_ACTION_COUNT"]
    try:
        S3(endpoint).client().create_bucket(Bucket="guarded")
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in S3(endpoint).settings.items():
            hadoop.set(key.replace("fs.s3a.", "fs.s3a.bucket.guarded."), value)
        hadoop.set("fs.s3a.bucket.guarded.retry.limit", "1")
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_wrong_credentials_are_one_line(spark: Any, s3: S3, guarded: str) -> None:
    result = CliRunner().invoke(app, ["history", "s3a://guarded/t"])
    assert result.exit_code == 3, result.output
    line = one_line(result.output)
    assert line.startswith("error: s3a://guarded/t: cannot reach the store") and "403" in line, line


def test_a_missing_bucket_is_one_line(spark: Any, s3: S3, tmp_path: Path) -> None:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        f'[tables.t]\npath = "{tmp_path}/t"\nkey = "k"\n'
        '[tables.t.feed]\nlocation = "s3a://no-such-bucket/in"\nformat = "csv"\n'
    )
    result = CliRunner().invoke(app, ["run", str(pipeline)])
    assert result.exit_code == 3, result.output
    line = one_line(result.output)
    assert (
        line.startswith("error: s3a://no-such-bucket/in: cannot reach the store") and "no-such-bucket" in line[40:]
    ), line
    assert not (tmp_path / "t").exists()


def test_an_unreachable_endpoint_is_one_line(spark: Any, s3: S3) -> None:
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    settings = {
        "endpoint": f"http://127.0.0.1:{free_port()}",
        "attempts.maximum": "1",
        "retry.limit": "1",
        "connection.establish.timeout": "2s",
    }
    for key, value in settings.items():
        hadoop.set(f"fs.s3a.bucket.faraway.{key}", value)
    started = time.monotonic()
    result = CliRunner().invoke(app, ["show", "s3a://faraway/t"])
    assert result.exit_code == 3, result.output
    line = one_line(result.output)
    assert line.startswith("error: s3a://faraway/t: cannot reach the store"), line
    assert time.monotonic() - started < 120


def test_the_shared_bucket_is_reachable(s3: S3) -> None:
    assert s3.client().head_bucket(Bucket=BUCKET)["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_run_says_once_that_the_default_store_is_for_one_driver(spark: Any, s3: S3, lake: str, tmp_path: Path) -> None:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        f'[tables.t]\npath = "{lake}/t"\nkey = "k"\n[tables.t.feed]\nlocation = "{lake}/in"\nformat = "csv"\n'
        f'[tables.u]\npath = "{tmp_path}/u"\nkey = "k"\n[tables.u.feed]\nlocation = "{tmp_path}/in"\nformat = "csv"\n'
    )
    (tmp_path / "in").mkdir()
    result = CliRunner().invoke(app, ["run", str(pipeline)])
    assert result.exit_code == 0, result.output
    said = "".join(result.output.split())  # (the terminal's wrapping undone: no whitespace at all)
    assert said.count("safeforonedriverwritingatableonly") == 1
    assert f"{lake}/t:" in said and f"{tmp_path}/u:" not in said
    assert 's3_commits="conditional"' in said
