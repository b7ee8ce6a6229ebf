"""A Spark Connect server is named by a URL; one that cannot be reached is one line naming it,
at once, not after the client's minutes of retries."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakemerge.cli.app import app
from lakemerge.config.spark import SparkSettings
from lakemerge.errors import ConfigError
from lakemerge.spark import remote

runner = CliRunner()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sc://127.0.0.1", ("127.0.0.1", 15002)),
        ("sc://spark.example:443", ("spark.example", 443)),
        ("sc://host:15003/;token=abc;use_ssl=true", ("host", 15003)),
        ("sc://[::1]:15004", ("::1", 15004)),
        ("sc://[::1]", ("::1", 15002)),
    ],
)
def test_a_urls_host_and_port(url: str, expected: tuple[str, int]) -> None:
    assert remote.address(url) == expected


@pytest.mark.parametrize("url", ["sc://", "sc://host:port", "sc://:15002"])
def test_a_url_without_a_host_or_with_a_port_that_is_no_number_is_refused(url: str) -> None:
    with pytest.raises(ConfigError, match="is not a Spark Connect URL"):
        remote.address(url)


def test_only_a_spark_connect_url_names_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_REMOTE", "http://127.0.0.1:15002")
    with pytest.raises(ConfigError, match="key 'SPARK_REMOTE'"):
        remote.remote_url(SparkSettings())
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    assert remote.remote_url(SparkSettings()) == "sc://127.0.0.1:15002"
    assert remote.remote_url(SparkSettings(remote="sc://10.0.0.1:1")) == "sc://10.0.0.1:1"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_server_that_does_not_answer_is_named_at_once() -> None:
    url = f"sc://127.0.0.1:{_closed_port()}"
    began = time.monotonic()
    with pytest.raises(ConfigError, match=f"cannot reach the Spark Connect server at {url}: "):
        remote.connect(url, SparkSettings())
    assert time.monotonic() - began < remote.CONNECT_TIMEOUT + 5


@pytest.fixture
def silent_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The URL of a port nobody answers on, for a command run as in a process of its own: no user
    settings, and no session yet (this process may hold the suite's, which would be reused)."""
    from pyspark.sql import SparkSession

    monkeypatch.setenv("LAKEMERGE_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    return f"sc://127.0.0.1:{_closed_port()}"


def test_a_command_given_a_server_that_does_not_answer_prints_one_line(tmp_path: Path, silent_server: str) -> None:
    url = silent_server
    result = runner.invoke(app, ["history", str(tmp_path / "table"), "--remote", url])
    assert result.exit_code == 2, result.output
    expected = f"error: cannot reach the Spark Connect server at {url}: Connection refused"
    assert result.output.strip().splitlines() == [expected]


def test_this_pyspark_is_not_the_client_alone() -> None:
    assert remote.client_only() is False


def test_the_demo_on_a_server_says_it_works_there_not_that_spark_starts(tmp_path: Path, silent_server: str) -> None:
    url = silent_server
    result = runner.invoke(app, ["demo", "--dir", str(tmp_path / "demo"), "--remote", url])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"Working on the Spark Connect server at {url} ...",
        f"error: cannot reach the Spark Connect server at {url}: Connection refused",
    ]


def test_a_pyspark_without_its_connect_client_s_packages_says_what_to_install(
    tmp_path: Path, silent_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before any connection: a package PySpark's Connect client imports and this environment
    lacks (here a module no environment has) is named with what to install."""
    monkeypatch.setitem(remote.CLIENT_MODULES, "lakemerge_absent.module", "absent-package")
    result = runner.invoke(app, ["history", str(tmp_path / "table"), "--remote", silent_server])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"error: cannot work through the Spark Connect server at {silent_server}: ")
    assert "needs absent-package, not installed here (pip install 'pyspark[connect]'" in line
