"""The installed ``lakemerge`` script as a user runs it: a fresh process, its own Spark."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}


#: What Spark, Ivy and log4j print to the console when their output is not sent to the log file.
SPARK_NOISE = ("WARN", "log level", "log4j", "SLF4J", ":: ", "Ivy", "added as a dependency", "NativeCodeLoader")


@pytest.mark.processes
def test_demo_on_a_terminal_shows_spark_stages_and_keeps_spark_quiet(tmp_path: Path) -> None:
    """One fresh process (its own JVM) on a pseudo-terminal: the progress shows Spark's stages, the
    result is printed, and Spark's own console output went to the log file, not the terminal."""
    import os
    import pty

    exe = shutil.which("lakemerge")
    command = [exe] if exe else [sys.executable, "-m", "lakemerge.cli.app"]
    captured = bytearray()

    def read(fd: int) -> bytes:
        data = os.read(fd, 65536)
        captured.extend(data)
        return data

    log = tmp_path / "spark.log"
    env = {**_env(), "LAKEMERGE_SPARK_LOG": str(log), "COLUMNS": "120"}
    old = dict(os.environ)
    os.environ.update(env)
    try:
        status = pty.spawn([*command, "demo", "--dir", str(tmp_path / "demo"), "--master", "local[1]"], read)
    finally:
        os.environ.clear()
        os.environ.update(old)
    text = captured.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text[-3000:]
    assert "active Spark stage" in text and "tasks" in text
    assert "88 → 82" in text
    assert [n for n in SPARK_NOISE if n in text] == [], text[-3000:]
    assert log.exists() and log.stat().st_size > 0


_FLOOD = """
import typer
from lakemerge.cli.common import handled

@handled
def flood(json_out: bool = False, verbose: bool = False) -> None:
    for number in range(200_000):
        print(f"line {number}")

typer.run(flood)
"""


def test_a_command_whose_reader_stops_reading_ends_quietly(tmp_path: Path) -> None:
    """``lakemerge history T | head``: once the reader has gone, the command stops without a word
    on stderr (more output than a pipe holds, so the reader leaves before the writer is done)."""
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-c", _FLOOD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline() == b"line 0\n"
    process.stdout.close()
    error = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141, error
    assert error == ""
