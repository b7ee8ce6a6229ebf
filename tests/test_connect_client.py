"""A Spark Connect client with no JVM, as users install it: the wheel with its ``connect`` extra in a
fresh virtual environment (Spark Connect's pure-Python client, ``pyspark-client``, and no PySpark),
run outside the checkout against a Spark Connect server the test starts on 127.0.0.1. Every command
works through the server; without one, a command says in one line what to give
(``python -m pytest -m connect``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import read_table
from tests.installed import dataframe_batches, pipeline_in_each_mode
from tests.wheels import ROOT, Venv, build, clean_copy, fresh_venv

pytestmark = pytest.mark.connect


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """The wheel with its ``connect`` extra in a fresh virtual environment."""
    dist = build(clean_copy(tmp_path_factory.mktemp("checkout")), tmp_path_factory.mktemp("dist"))
    root = tmp_path_factory.mktemp("client")
    venv = fresh_venv(root / "venv", root / "spark.log")
    venv.install(f"{dist['wheel']}[connect]", cwd=root)
    return venv


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server started from this Python's PySpark with lakemerge's settings."""
    from bench.connect_server import server

    with server(tmp_path_factory.mktemp("server"), python_path=str(ROOT / "src")) as running:
        yield running


def test_the_client_environment_holds_spark_connects_client_alone(client: Venv, tmp_path: Path) -> None:
    listed = client.run(["pip", "list", "--format", "json"], cwd=tmp_path)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "pyspark-client" in names and "lakemerge" in names
    assert not names & {"pyspark", "delta-spark", "py4j"}, sorted(names)
    probe = client.run(["python", "-c", "import pyspark.util as u; print(u.is_remote_only())"], cwd=tmp_path)
    assert probe.stdout.strip() == "True", probe.stderr


@pytest.mark.parametrize("command", [["demo", "--dir", "demo"], ["history", "lake/t"]])
def test_without_a_server_a_command_says_what_to_give(client: Venv, tmp_path: Path, command: list[str]) -> None:
    ran = client.run(["lakemerge", *command], cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: "), ran.stderr
    assert "pyspark-client" in errors[0] and "--remote sc://HOST:PORT" in errors[0]
    assert "Traceback" not in ran.stdout + ran.stderr


def test_the_demo_and_the_table_commands_run_through_the_server(client: Venv, url: str, tmp_path: Path) -> None:
    demo = client.run(["lakemerge", "demo", "--dir", "demo", "--json", "--remote", url], cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
    assert [b["version"] for b in json.loads(demo.stdout)["batches"]] == [0, 1]
    table = os.path.join("demo", "lake", "products")  # (relative: the client's directory, not the server's)
    stored = {r["product_id"]: r for r in read_table(tmp_path / table)}
    assert "P0S7XBCQ45" not in stored and stored["VR8NCNE7DV"]["inventory"] == 82

    def lakemerge(*arguments: str) -> dict[str, object]:
        ran = client.run(["lakemerge", *arguments, "--json", "--remote", url], cwd=tmp_path)
        assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
        document: dict[str, object] = json.loads(ran.stdout)
        return document

    history = lakemerge("history", table)
    assert [c["version"] for c in history["commits"]] == [1, 0]  # type: ignore[index]
    shown = lakemerge("show", table)
    assert shown["rows"] == len(stored)
    report = lakemerge("report", table, "--out", "report.html")
    assert report["batches"] == 2 and (tmp_path / "report.html").stat().st_size > 0
    restored = lakemerge("rollback", table, "--to-version", "0", "--keep-files-applied")
    assert restored["to_version"] == 0 and restored["from_version"] == 1
    assert len(read_table(tmp_path / table)) == 8  # (the master data alone)


def test_a_file_pipeline_in_each_write_mode_matches_the_oracle_through_the_server(
    client: Venv, url: str, tmp_path: Path
) -> None:
    pipeline_in_each_mode(client, tmp_path, seed=63, remote=url)


def test_a_dataframe_batch_applies_once_through_the_server(client: Venv, url: str, tmp_path: Path) -> None:
    dataframe_batches(client, tmp_path, seed=6, remote=url)
