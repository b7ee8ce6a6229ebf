"""The installed ``lakemerge`` script as a user runs it: a fresh process, its own Spark."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path


def test_demo_in_a_fresh_process_keeps_spark_quiet(tmp_path: Path) -> None:
    exe = shutil.which("lakemerge")
    command = [exe] if exe else [sys.executable, "-m", "lakemerge.cli.app"]
    log = tmp_path / "spark.log"
    done = subprocess.run(
        [*command, "demo", "--dir", str(tmp_path / "demo"), "--json", "--master", "local[1]"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**_env(), "LAKEMERGE_SPARK_LOG": str(log)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)  # stdout holds exactly one JSON document
    assert result["batches"][1]["metrics"]["late"] == 1
    assert done.stderr.strip() == "", done.stderr[-2000:]  # Spark's noise went to the log file
    assert log.exists() and log.stat().st_size > 0


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}


def test_progress_shows_spark_stages_on_a_terminal(tmp_path: Path) -> None:
    import os
    import pty

    exe = shutil.which("lakemerge")
    command = [exe] if exe else [sys.executable, "-m", "lakemerge.cli.app"]
    captured = bytearray()

    def read(fd: int) -> bytes:
        data = os.read(fd, 65536)
        captured.extend(data)
        return data

    env = {**_env(), "LAKEMERGE_SPARK_LOG": str(tmp_path / "spark.log"), "COLUMNS": "120"}
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
