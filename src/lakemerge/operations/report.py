"""``lakemerge report``: a self-contained HTML page of a table's batch history.

The plots are drawn with matplotlib and embedded as inline SVG, so the page needs no network and
no script to view. Each plot is a ``<figure class="lm-plot" data-plot="...">``.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakemerge.results import CommitInfo, ReportResult, TableSummary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROW_SERIES = (
    ("inserted", "inserted", "#2ca02c"),
    ("updated", "updated", "#1f77b4"),
    ("deleted", "deleted", "#d62728"),
    ("late", "ignored as late", "#9467bd"),
    ("rows_bad", "quarantined / bad", "#ff7f0e"),
)
PLOTS = ("rows", "duration", "files", "size")


# Delta's operation metrics by operation: MERGE, then WRITE, then DELETE/UPDATE/OPTIMIZE, then RESTORE.
_ADDED = ("numTargetFilesAdded", "numFiles", "numAddedFiles", "numRestoredFiles")
_REMOVED = ("numTargetFilesRemoved", "numRemovedFiles")
_BYTES_ADDED = ("numTargetBytesAdded", "numOutputBytes", "numAddedBytes", "restoredFilesSize")
_BYTES_REMOVED = ("numTargetBytesRemoved", "numRemovedBytes", "removedFilesSize")


def _first(metrics: dict[str, str], keys: tuple[str, ...]) -> int:
    return next((int(metrics[k]) for k in keys if metrics.get(k)), 0)


def _files_and_bytes(commit: CommitInfo) -> tuple[int, int, int, int]:
    m = commit.operation_metrics
    return _first(m, _ADDED), _first(m, _REMOVED), _first(m, _BYTES_ADDED), _first(m, _BYTES_REMOVED)


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _plots(commits: Sequence[CommitInfo]) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    ordered = sorted(commits, key=lambda c: (c.timestamp, not c.change_log, c.version))
    batches = [c for c in ordered if c.batch_id]
    labels = [_label(c) for c in batches]
    plots: dict[str, str] = {}

    figure, axis = plt.subplots(figsize=(9, 3.2))
    bottom = [0] * len(batches)
    for key, label, color in ROW_SERIES:
        values = [c.metrics.get(key, c.metrics.get("quarantined", 0) if key == "rows_bad" else 0) for c in batches]
        axis.bar(labels, values, bottom=bottom, label=label, color=color)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    axis.set(xlabel="table version", ylabel="rows")
    axis.set_title("Rows per batch", pad=28)
    axis.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8, ncols=5, frameon=False)
    plots["rows"] = _svg(figure)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(9, 2.6))
    axis.plot(labels, [c.seconds or 0 for c in batches], marker="o", color="#444444")
    axis.set(title="Batch duration", xlabel="table version", ylabel="seconds")
    axis.set_ylim(bottom=0)
    plots["duration"] = _svg(figure)
    plt.close(figure)

    versions = [_label(c) for c in ordered]
    counts = [_files_and_bytes(c) for c in ordered]
    figure, axis = plt.subplots(figsize=(9, 2.6))
    axis.bar(versions, [c[0] for c in counts], color="#2ca02c", label="files added")
    axis.bar(versions, [-c[1] for c in counts], color="#d62728", label="files removed")
    axis.axhline(0, color="#888888", linewidth=0.8)
    axis.set(xlabel="table version", ylabel="files")
    axis.set_title("Data files added and removed", pad=22)
    axis.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8, ncols=2, frameon=False)
    plots["files"] = _svg(figure)
    plt.close(figure)

    size, sizes = 0, []
    for c in counts:
        size += c[2] - c[3]
        sizes.append(size / 1024)
    figure, axis = plt.subplots(figsize=(9, 2.6))
    axis.fill_between(versions, sizes, alpha=0.3, color="#1f77b4")
    axis.plot(versions, sizes, marker="o", color="#1f77b4")
    axis.set(title="Table size over time", xlabel="table version", ylabel="KiB")
    axis.set_ylim(bottom=0)
    plots["size"] = _svg(figure)
    plt.close(figure)
    return plots


def _label(commit: CommitInfo) -> str:
    """A commit's version as the report shows it (``L3``: version 3 of a ``log`` table's change log)."""
    return f"L{commit.version}" if commit.change_log else str(commit.version)


def build_report(commits: Sequence[CommitInfo], summary: TableSummary, *, generated: datetime | None = None) -> str:
    """The report's HTML for ``commits`` (newest first or any order) and the table's ``summary``."""
    e = html.escape
    generated = generated or datetime.now(tz=UTC)
    plots = _plots(commits)
    batches = sorted((c for c in commits if c.batch_id), key=lambda c: (c.timestamp, c.version), reverse=True)
    schema_rows = "".join(f"<tr><td>{e(n)}</td><td>{e(t)}</td></tr>" for n, t in summary.schema)
    figures = "".join(f'<figure class="lm-plot" data-plot="{name}">{plots[name]}</figure>' for name in PLOTS)
    batch_rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{e(str(v))}</td>"
            for v in (
                _label(c),
                c.timestamp.replace("T", " ")[:19],
                f"skipped by {c.skipped_by}: {c.skip_reason}" if c.skip_reason else c.operation,
                len(c.files),
                *(c.metrics.get(k, 0) for k in ("rows_read", "inserted", "updated", "deleted", "late", "rows_bad")),
                "" if c.seconds is None else f"{c.seconds:.1f}",
            )
        )
        + "</tr>"
        for c in batches
    )
    log_row = (
        f"<tr><td>change log rows (not compacted yet)</td><td>{summary.log_rows}</td></tr>"
        if summary.log_rows is not None
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>lakemerge report: {e(summary.path)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1000px; color: #222; }}
h1 {{ font-size: 1.4rem; word-break: break-all; }} h2 {{ font-size: 1.1rem; margin-top: 2rem; }}
table {{ border-collapse: collapse; font-size: 0.85rem; }}
td, th {{ border: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
.summary td {{ text-align: left; }} figure.lm-plot {{ margin: 1rem 0; }} figure.lm-plot svg {{ width: 100%;
height: auto; }} .muted {{ color: #777; font-size: 0.85rem; }}
</style></head><body>
<h1>lakemerge report: {e(summary.path)}</h1>
<p class="muted">Generated {e(generated.strftime("%Y-%m-%d %H:%M:%S UTC"))}; {len(commits)} commits, {len(batches)}
lakemerge batches.</p>
<h2>Current state</h2>
<table class="summary" id="summary">
<tr><td>version</td><td>{summary.version}</td></tr><tr><td>rows</td><td>{summary.rows}</td></tr>
<tr><td>data files</td><td>{summary.files}</td></tr><tr><td>bytes</td><td>{summary.bytes}</td></tr>
<tr><td>partitioned by</td><td>{e(", ".join(summary.partition_by) or "-")}</td></tr>{log_row}
</table>
<h2>Schema</h2><table><tr><th>column</th><th>type</th></tr>{schema_rows}</table>
<h2>History</h2>{figures}
<h2>Batches</h2>
<table id="batches"><tr><th>version</th><th>time (UTC)</th><th>operation</th><th>files</th><th>read</th>
<th>inserted</th><th>updated</th><th>deleted</th><th>late</th><th>quarantined</th><th>seconds</th></tr>
{batch_rows}</table>
</body></html>
"""


def write_report(spark: SparkSession, path: str, out: str) -> ReportResult:
    """Write the report of the table at ``path`` to the file ``out``."""
    from lakemerge.operations.inspect import history, show

    commits = history(spark, path)
    text = build_report(commits, show(spark, path, sample=0))
    data = text.encode("utf-8")
    Path(out).write_bytes(data)
    return ReportResult(
        path=path,
        out=str(Path(out).resolve()),
        commits=len(commits),
        batches=sum(1 for c in commits if c.batch_id),
        bytes_written=len(data),
    )
