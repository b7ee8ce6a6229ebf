"""The HTML history report: built without Spark, and rendered by a real headless Chromium."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

import lakemerge
from lakemerge.cli.app import app
from lakemerge.operations.report import PLOTS, _files_and_bytes, build_report
from lakemerge.results import CommitInfo, TableSummary
from tests.helpers import write_lines

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def commit(version: int, **metrics: int) -> CommitInfo:
    return CommitInfo(
        version=version,
        timestamp=f"2026-11-22T10:0{version}:00+00:00",
        operation="MERGE" if version else "WRITE",
        batch_id=f"b{version}",
        table="t",
        seconds=1.5 + version,
        metrics=metrics,
        operation_metrics={
            "numTargetFilesAdded": "2",
            "numTargetFilesRemoved": "1",
            "numTargetBytesAdded": "4000",
            "numTargetBytesRemoved": "1000",
        },
    )


def test_build_report_has_every_plot_and_the_summary() -> None:
    commits = [
        commit(0, rows_read=10, inserted=10),
        commit(1, rows_read=5, updated=3, deleted=1, late=1),
        CommitInfo(version=2, timestamp="2026-11-22T10:05:00+00:00", operation="OPTIMIZE"),
    ]
    summary = TableSummary(
        path="/lake/products",
        version=2,
        schema=(("id", "int"), ("v", "string")),
        partition_by=(),
        rows=9,
        files=3,
        bytes=12345,
        sample=(),
    )
    page = build_report(commits, summary)
    for name in PLOTS:
        assert f'data-plot="{name}"><svg' in page
    assert "<td>rows</td><td>9</td>" in page and "<td>bytes</td><td>12345</td>" in page
    assert "/lake/products" in page and "http" not in page.split("<svg", 1)[0].replace("http-equiv", "")


def test_restore_counts_restored_and_removed_files() -> None:
    restore = CommitInfo(
        version=3,
        timestamp="2026-11-22T10:03:00+00:00",
        operation="RESTORE",
        operation_metrics={
            "numRestoredFiles": "2",
            "restoredFilesSize": "1826",
            "numRemovedFiles": "1",
            "removedFilesSize": "926",
        },
    )
    assert _files_and_bytes(restore) == (2, 1, 1826, 926)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Chromium is not installed (.ci/run installs Debian's)")
def test_report_renders_in_headless_chromium(spark: object, tmp_path: Path) -> None:
    table = lakemerge.TableConfig(
        name="t",
        path=str(tmp_path / "table"),
        key=("id",),
        sequence=("seq",),
        feed=lakemerge.FeedConfig(
            location=(str(tmp_path / "in"),),
            format="csv",
            header=True,
            schema="id INT, seq BIGINT, op STRING, v STRING",
            op_column="op",
        ),
    )
    for n, rows in enumerate([["1,1,I,a", "2,1,I,b"], ["1,2,U,a2", "3,1,I,c", "2,0,U,late"], ["2,3,D,"]]):
        write_lines(tmp_path / f"b{n}" / "f.csv", ["id,seq,op,v", *rows])
        lakemerge.apply_table(table, inputs=[str(tmp_path / f"b{n}")], spark=spark)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", table.path, "--out", str(out)])
    assert result.exit_code == 0, result.output

    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,3000",
    ]
    url = out.as_uri()
    dumped = subprocess.run(
        [CHROMIUM, *flags, f"--user-data-dir={tmp_path / 'profile-dom'}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout.replace("\n", "")
    for name in PLOTS:
        assert f'data-plot="{name}"><svg' in dom
    assert dom.count("<path") > 20  # the plots were drawn, not just their frames
    shot = tmp_path / "report.png"
    shown = subprocess.run(
        [CHROMIUM, *flags, f"--user-data-dir={tmp_path / 'profile-shot'}", f"--screenshot={shot}", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 10_000
