"""A ``log`` table is a Delta table at its path from its first batch (empty until compaction: what
other engines read there is the last compaction), and ``history``, ``show``, ``report`` and
``quarantine`` on that path show the change log's batches (docs/semantics.md §14)."""

from __future__ import annotations

from pathlib import Path

import deltalake
from typer.testing import CliRunner

import lakemerge
from lakemerge.cli.app import app
from tests.helpers import read_table, write_lines


def test_history_show_report_and_quarantine_on_a_log_tables_path(spark: object, tmp_path: Path) -> None:
    table = lakemerge.TableConfig(
        name="t",
        path=str(tmp_path / "t"),
        key=("id",),
        sequence=("seq",),
        write_mode="log",
        max_bad_rows=1,
        feed=lakemerge.FeedConfig(
            location=(str(tmp_path / "in"),), format="csv", header=True, types={"id": "int", "seq": "bigint"}
        ),
    )
    write_lines(tmp_path / "in" / "a.csv", ["id,seq,v", "1,1,a", "2,x,b"])
    first = lakemerge.apply_table(table, spark=spark)
    assert first.version == 0 and first.metrics.rows_bad == 1
    assert deltalake.DeltaTable(table.path).version() >= 0 and read_table(table.path) == []  # there, empty
    assert [f.name for f in deltalake.DeltaTable(table.path).schema().fields] == ["id", "seq", "v"]
    write_lines(tmp_path / "in" / "b.csv", ["id,seq,v", "1,2,a2"])
    lakemerge.apply_table(table, spark=spark)

    [bad] = lakemerge.quarantine(table.path, spark=spark)
    assert bad.row == 3 and "cannot convert column 'seq'" in bad.reason
    commits = lakemerge.history(table.path, spark=spark)
    batches = [c for c in commits if c.batch_id]
    assert [(c.change_log, c.version) for c in batches] == [(True, 1), (True, 0)]
    summary = lakemerge.show(table.path, spark=spark)
    assert (summary.rows, summary.log_rows) == (0, 2)
    report = lakemerge.report(table.path, tmp_path / "r.html", spark=spark)
    assert report.batches == 2 and ">L1<" in Path(report.out).read_text()
    shown = CliRunner().invoke(app, ["history", table.path])
    assert shown.exit_code == 0 and "log 1" in shown.output

    lakemerge.compact(lakemerge.PipelineConfig(tables={"t": table}), spark=spark)
    assert read_table(table.path, ["id", "v"]) == [{"id": 1, "v": "a2"}]  # the last compaction
