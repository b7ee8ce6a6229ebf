"""Render typed results for humans (Rich) or machines (one JSON document on stdout)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from lakemerge.results import BatchResult, CommitInfo, TableSummary

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def emit_json(document: Any) -> None:
    """Print one JSON document on stdout, nothing else."""
    print(json.dumps(document, indent=2, default=str))


def batch_results(results: Sequence[BatchResult]) -> None:
    """One line per table, then its metrics."""
    for r in results:
        if r.dry_run:
            where = f" in {r.partitions_touched} partition(s)" if r.partitions_touched is not None else ""
            out.print(
                f"[bold]{r.table}[/]: dry run, nothing committed: would apply {len(r.files)} file(s), "
                f"touching {r.files_touched or 0} stored data file(s){where}"
                + (" and create the table" if r.created else "")
            )
        elif r.version is None:
            skipped = f" ({len(r.skipped_files)} file(s) already applied)" if r.skipped_files else ""
            out.print(f"[bold]{r.table}[/]: nothing to apply{skipped}")
            continue
        else:
            verb = "created" if r.created else "committed"
            out.print(
                f"[bold]{r.table}[/]: {verb} version {r.version} at {r.path} from {len(r.files)} file(s) "
                f"in {r.seconds:.1f} s"
            )
        m = r.metrics
        grid = Table(show_header=False, box=None, padding=(0, 2))
        grid.add_column(justify="left")
        grid.add_column(justify="right")
        for label, value in (
            ("rows read", m.rows_read),
            ("inserted", m.inserted),
            ("updated", m.updated),
            ("deleted", m.deleted),
            ("ignored as late", m.late),
            ("superseded within the batch", m.superseded),
            ("deletes of absent keys", m.deletes_absent),
            ("bad rows quarantined", m.rows_bad),
        ):
            grid.add_row(label, str(value))
        out.print(grid)


def changes(pairs: Sequence[tuple[dict[str, Any] | None, dict[str, Any] | None]], key: Sequence[str]) -> None:
    """Before → after of changed records."""
    if not pairs:
        return
    grid = Table(title="changed records (before → after)", show_header=True, header_style="bold")
    grid.add_column("key")
    grid.add_column("change")
    for before, after in pairs:
        row = after or before or {}
        label = ", ".join(str(row.get(k)) for k in key)
        if before is None and after is not None:
            grid.add_row(label, "[green]inserted[/] " + _fields(after, key))
        elif after is None and before is not None:
            grid.add_row(label, "[red]deleted[/]")
        elif before is not None and after is not None:
            diffs = [f"{c}: {before.get(c)} → {after.get(c)}" for c in after if before.get(c) != after.get(c)]
            grid.add_row(label, "[yellow]updated[/] " + "; ".join(diffs))
    out.print(grid)


def _fields(row: dict[str, Any], key: Sequence[str]) -> str:
    return ", ".join(f"{c}={v}" for c, v in row.items() if c not in key)


def history(commits: Sequence[CommitInfo]) -> None:
    """The table's commits with lakemerge's metrics."""
    grid = Table(title="history", show_header=True, header_style="bold")
    for name in ("ver", "time (UTC)", "operation", "files", "read", "ins", "upd", "del", "late"):
        grid.add_column(name, justify="right" if name not in ("operation", "time (UTC)") else "left", no_wrap=True)
    for c in commits:
        m = c.metrics
        grid.add_row(
            str(c.version),
            c.timestamp.replace("T", " ")[:19],
            c.operation,
            str(len(c.files)) if c.batch_id else "",
            *[str(m.get(k, "")) if c.batch_id else "" for k in ("rows_read", "inserted", "updated", "deleted", "late")],
        )
    out.print(grid)


def summary(s: TableSummary) -> None:
    """Schema, counts and a sample."""
    out.print(f"[bold]{s.path}[/] version {s.version}: {s.rows} rows in {s.files} file(s), {s.bytes} bytes")
    if s.partition_by:
        out.print(f"partitioned by {', '.join(s.partition_by)}")
    schema = Table(title="schema", show_header=True, header_style="bold")
    schema.add_column("column")
    schema.add_column("type")
    for name, type_name in s.schema:
        schema.add_row(name, type_name)
    out.print(schema)
    if s.sample:
        sample = Table(title=f"sample ({len(s.sample)} rows)", show_header=True, header_style="bold")
        for name, _ in s.schema:
            sample.add_column(name)
        for row in s.sample:
            sample.add_row(*[str(row.get(name)) for name, _ in s.schema])
        out.print(sample)


def quarantined(rows: Sequence[Any]) -> None:
    """Quarantined records, one per line."""
    if not rows:
        out.print("no quarantined record")
        return
    grid = Table(title="quarantined records", show_header=True, header_style="bold")
    for name in ("file", "row", "reason", "record"):
        grid.add_column(name, overflow="fold")
    for r in rows:
        grid.add_row(r.file.rsplit("/", 1)[-1], str(r.row), r.reason, r.record)
    out.print(grid)
