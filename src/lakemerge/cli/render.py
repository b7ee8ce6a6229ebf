"""The text of each result, as the command line prints it: lines and tables on a console.

Every string here is shown as it is on :func:`lakemerge.cli.output.console`'s consoles, which read
no markup; a style is a ``(text, style)`` part of :func:`line`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lakemerge.api import documents
from lakemerge.results import (
    BatchResult,
    ChangedRecord,
    CommitInfo,
    DemoResult,
    ReportResult,
    Result,
    RollbackResult,
    SkipResult,
    TableSummary,
)


def render(out: Console, result: Result) -> None:
    """Print ``result``'s text on ``out``."""
    RENDERERS[type(result)](out, result)


def line(*parts: str | tuple[str, str]) -> Text:
    """One line of literal text from ``parts``: a string as it is, a ``(text, style)`` pair styled."""
    return Text.assemble(*parts)


def _bold(text: str) -> tuple[str, str]:
    return (text, "bold")


def _batch(out: Console, r: BatchResult) -> None:
    """One line for a table's batch, then its metrics."""
    if r.dry_run:
        where = f" in {r.partitions_touched} partition(s)" if r.partitions_touched is not None else ""
        out.print(
            line(
                _bold(r.table),
                f": dry run, nothing committed: would apply {len(r.files)} file(s), "
                f"touching {r.files_touched or 0} stored data file(s){where}"
                + (" and create the table" if r.created else ""),
            )
        )
    elif r.version is None:
        if r.applied_before:
            out.print(
                line(_bold(r.table), f": batch {r.source_batch} of {r.source} was applied before: nothing to apply")
            )
            return
        skipped = f" ({len(r.skipped_files)} file(s) already applied)" if r.skipped_files else ""
        out.print(line(_bold(r.table), f": nothing to apply{skipped}"))
        _ignored(out, r)
        return
    else:
        verb = "created" if r.created else "committed"
        given = f"batch {r.source_batch} of {r.source}" if r.source and not r.files else f"{len(r.files)} file(s)"
        out.print(line(_bold(r.table), f": {verb} version {r.version} at {r.path} from {given} in {r.seconds:.1f} s"))
    _ignored(out, r)
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


def _ignored(out: Console, r: BatchResult, shown: int = 5) -> None:
    """The entries of the landing zones the batch did not read, and why (the first few)."""
    if not r.ignored_entries:
        return
    count = len(r.ignored_entries)
    out.print(f"  {count} entr{'y' if count == 1 else 'ies'} of the landing zone not read:")
    for entry in r.ignored_entries[:shown]:
        out.print(f"    {entry.path}: {entry.reason}", soft_wrap=True)
    if count > shown:
        out.print(f"    ... and {count - shown} more (--json lists them all)")


def _batches(out: Console, result: documents.Batches) -> None:
    """Batches are shown as they commit (:meth:`Output.item`): here only when there was none."""
    if not result.batches:
        out.print("nothing to apply")


def _changes(out: Console, pairs: Sequence[ChangedRecord], key: Sequence[str]) -> None:
    """Before → after of changed records."""
    if not pairs:
        return
    grid = Table(title="changed records (before → after)", show_header=True, header_style="bold")
    grid.add_column("key")
    grid.add_column("change")
    for pair in pairs:
        before, after = pair.before, pair.after
        row = after or before or {}
        label = ", ".join(str(row.get(k)) for k in key)
        if before is None and after is not None:
            fields = ", ".join(f"{c}={v}" for c, v in after.items() if c not in key)
            grid.add_row(label, line(("inserted", "green"), " ", fields))
        elif after is None and before is not None:
            grid.add_row(label, line(("deleted", "red")))
        elif before is not None and after is not None:
            diffs = [f"{c}: {before.get(c)} → {after.get(c)}" for c in after if before.get(c) != after.get(c)]
            grid.add_row(label, line(("updated", "yellow"), " ", "; ".join(diffs)))
    out.print(grid)


def _commits(out: Console, commits: Sequence[CommitInfo]) -> None:
    """The table's commits with lakemerge's metrics."""
    grid = Table(title="history", show_header=True, header_style="bold")
    sources = any(c.source for c in commits)
    for name in ("ver", "time (UTC)", "operation", "files", *(("source",) if sources else ()), "read", "ins", "upd"):
        grid.add_column(
            name, justify="left" if name in ("operation", "time (UTC)", "source") else "right", no_wrap=True
        )
    for name in ("del", "late"):
        grid.add_column(name, justify="right", no_wrap=True)
    for c in commits:
        m = c.metrics
        grid.add_row(
            f"log {c.version}" if c.change_log else str(c.version),
            c.timestamp.replace("T", " ")[:19],
            "SKIP" if c.skip_reason else c.operation,
            str(len(c.files)) if c.batch_id else "",
            *((f"{c.source} #{c.source_batch}" if c.source else "",) if sources else ()),
            *[str(m.get(k, "")) if c.batch_id else "" for k in ("rows_read", "inserted", "updated", "deleted", "late")],
        )
    out.print(grid)
    for c in commits:
        if c.skip_reason:
            names = ", ".join(f.path.rsplit("/", 1)[-1] for f in c.files)
            out.print(f"version {c.version}: {names} skipped by {c.skipped_by}: {c.skip_reason}", soft_wrap=True)
        if c.schema_changes:
            shown = "; ".join(str(change) for change in c.schema_changes)
            out.print(f"version {c.version}: columns: {shown}", soft_wrap=True)


def _history(out: Console, result: documents.History) -> None:
    _commits(out, result.commits)


def _summary(out: Console, s: TableSummary) -> None:
    """Schema, counts and a sample."""
    out.print(line(_bold(s.path), f" version {s.version}: {s.rows} rows in {s.files} file(s), {s.bytes} bytes"))
    if s.log_rows is not None:
        out.print(
            f"a log table: these rows are its last compaction; its change log holds {s.log_rows} row(s) more "
            "(lakemerge.read_merged gives the current rows)"
        )
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


def _quarantine(out: Console, result: documents.Quarantine) -> None:
    """Quarantined records, one per line."""
    if not result.rows:
        out.print("no quarantined record")
        return
    grid = Table(title="quarantined records", show_header=True, header_style="bold")
    for name in ("file", "row", "reason", "record"):
        grid.add_column(name, overflow="fold")
    for r in result.rows:
        grid.add_row(r.file.rsplit("/", 1)[-1], str(r.row), r.reason, r.record)
    out.print(grid)


def _rollback(out: Console, result: RollbackResult) -> None:
    out.print(
        f"{result.path}: restored to version {result.to_version} (was {result.from_version}) in commit {result.version}"
    )
    if result.reapply:
        out.print(f"{len(result.pending_again)} file(s) are pending again")
    else:
        out.print("files applied by the undone versions stay applied")


def _skip(out: Console, result: SkipResult) -> None:
    names = ", ".join(f.path.rsplit("/", 1)[-1] for f in result.files)
    out.print(
        line(
            _bold(result.table),
            f": {len(result.files)} file(s) recorded as skipped in version {result.version} "
            f"by {result.by} ({result.reason}): {names}",
        )
    )


def _points(out: Console, result: documents.GroupPoints) -> None:
    for name, point in result.groups.items():
        if point is None:
            out.print(line(_bold(name), ": no complete group run yet"))
        else:
            versions = ", ".join(f"{t} @ {v}" for t, v in point.versions.items())
            out.print(line(_bold(name), f" point {point.point}: {versions}"))


def _vacuums(out: Console, result: documents.Vacuums) -> None:
    for r in result.tables:
        out.print(
            line(
                _bold(r.table),
                f": {r.files_deleted} files deleted, {r.tombstones_removed} tombstones removed, "
                f"{r.tombstones_kept} kept ({r.seconds:.1f} s)",
            )
        )


def _registrations(out: Console, result: documents.Registrations) -> None:
    if not result.tables:
        out.print("no table exists yet: nothing registered (apply a batch first)")
    for r in result.tables:
        views = f" (views: {', '.join(r.views)})" if r.views else ""
        state = "registered" if r.created else "already registered"
        out.print(line(_bold(r.table), f": {state} as {r.name} → {r.location}{views}"))


def _compactions(out: Console, result: documents.Compactions) -> None:
    for r in result.tables:
        folded = f"{r.log_batches_folded} log batches ({r.log_rows_folded} rows) folded, " if r.log_rows_folded else ""
        if r.tombstones_moved:
            folded += f"{r.tombstones_moved} tombstones moved out of the log, "
        purged = ", deletion vectors purged" if r.deletion_vectors_purged else ""
        out.print(
            line(
                _bold(r.table),
                f": {folded}{r.files_removed} files rewritten into {r.files_added}{purged} ({r.seconds:.1f} s)",
            )
        )


def _report(out: Console, result: ReportResult) -> None:
    out.print(f"wrote {result.out}: {result.batches} batch(es) in {result.commits} commit(s)")


def _spark_conf(out: Console, result: documents.SparkConf) -> None:
    """``spark-submit`` options (what ``conf`` prints without ``--defaults``), quoted for a shell:
    plain lines on the console's file, which no console rewraps."""
    import shlex

    print(f"--master {shlex.quote(result.master)}", file=out.file)
    for key, value in result.conf.items():
        print(f"--conf {shlex.quote(f'{key}={value}')}", file=out.file)


def _demo(out: Console, result: DemoResult) -> None:
    out.print(f"Demo files in {result.workdir}; table at {result.table_path}\n")
    out.print(line(_bold("Batch 1"), ": the master data creates the table"))
    _batch(out, result.batches[0])
    out.print(
        line("\n", _bold("Batch 2"), ": an incremental file (inserts, updates, one late update) and a delete file")
    )
    for batch in result.batches[1:]:
        _batch(out, batch)
    _changes(out, result.changes, ("product_id",))
    _commits(out, result.history)
    out.print(f"\nTry: lakemerge show {result.table_path}")


#: The text of every result type the command line shows.
RENDERERS: dict[type, Callable[[Console, Any], None]] = {
    documents.Batches: _batches,
    BatchResult: _batch,
    documents.History: _history,
    TableSummary: _summary,
    documents.Quarantine: _quarantine,
    RollbackResult: _rollback,
    SkipResult: _skip,
    documents.GroupPoints: _points,
    documents.Vacuums: _vacuums,
    documents.Registrations: _registrations,
    documents.Compactions: _compactions,
    ReportResult: _report,
    documents.SparkConf: _spark_conf,
    DemoResult: _demo,
}
