"""Small helpers for tests: write change files, read tables back with delta-rs (an independent reader)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import deltalake


def write_lines(path: Path, lines: Iterable[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def table_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every row of the Delta table's latest version, read by delta-rs: through its query engine
    when the table maps column names (``delta.columnMapping.mode``), which its Arrow reader reads as
    nulls."""
    table = deltalake.DeltaTable(str(path))
    if table.metadata().configuration.get("delta.columnMapping.mode", "none") == "none":
        return list(table.to_pyarrow_table().to_pylist())
    import pyarrow

    found = deltalake.QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all()
    return list(pyarrow.table(found).to_pylist())


def query_rows(path: str | Path, columns: Sequence[str]) -> list[dict[str, Any]]:
    """``columns`` of every row of the Delta table's latest version, read by delta-rs's query engine
    (which applies deletion vectors; its Arrow reader refuses such tables), in the order read."""
    import pyarrow

    query = f"SELECT {', '.join(columns)} FROM t"
    found = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(path))).execute(query)
    return [row for batch in found for row in pyarrow.record_batch(batch).to_pylist()]


def read_table(path: str | Path, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows of the Delta table's latest version, read by delta-rs, sorted for comparison."""
    rows = table_rows(path)
    if columns is not None:
        rows = [{c: r.get(c) for c in columns} for r in rows]
    return sorted(rows, key=lambda r: [(v is None, str(v)) for v in r.values()])


def table_version(path: str | Path) -> int:
    return int(deltalake.DeltaTable(str(path)).version())


def table_columns(path: str | Path) -> list[str]:
    return [f.name for f in deltalake.DeltaTable(str(path)).schema().fields]


def read_log_view(table: str | Path, log: str | Path, key: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    """What a ``log`` table's merged view holds, from delta-rs reads of the table and its change log
    (docs/modes.md): per key, the row of the greatest batch (the table's rows are batch 0), kept
    when it is an upsert (``_lm_op`` ``U``)."""
    newest: dict[Any, tuple[int, str, dict[str, Any]]] = {}
    sides = [(table, False), (log, True)]
    for path, logged in sides:
        if not (Path(path) / "_delta_log").exists():
            continue
        for row in table_rows(path):
            batch, op = (int(row["_lm_batch"]), str(row["_lm_op"])) if logged else (0, "U")
            if row[key] not in newest or batch > newest[row[key]][0]:
                newest[row[key]] = (batch, op, row)
    rows = [{c: row.get(c) for c in columns} for _, op, row in newest.values() if op == "U"]
    return sorted(rows, key=lambda r: [(v is None, str(v)) for v in r.values()])


def jobs_of(spark: Any, action: Any, *, stages: bool = False) -> list[Any]:
    """What each Spark job that ``action()`` ran says it is (its description, else its call
    site), read from Spark's status store once its listener has caught up; with ``stages``, each
    with its number of stages and the records its stages read from files (a triple)."""
    context = spark.sparkContext._jsc.sc()

    def jobs() -> dict[int, Any]:
        listed = context.statusStore().jobsList(None)
        found: dict[int, Any] = {}
        for index in range(listed.size()):
            job = listed.apply(index)
            description = job.description()
            what = str(description.get()) if description.isDefined() else str(job.name())
            found[int(job.jobId())] = (what, [int(job.stageIds().apply(i)) for i in range(job.stageIds().size())])
        return found

    def records() -> dict[int, int]:
        gateway = spark.sparkContext._gateway
        listed = context.statusStore().stageList(None, False, False, gateway.new_array(gateway.jvm.double, 0), None)
        return {int(listed.apply(i).stageId()): int(listed.apply(i).inputRecords()) for i in range(listed.size())}

    for leftover in ("spark.job.description", "spark.jobGroup.id"):  # a description set earlier would name every job
        spark.sparkContext.setLocalProperty(leftover, None)
    context.listenerBus().waitUntilEmpty()
    before = jobs()
    action()
    context.listenerBus().waitUntilEmpty()
    ran = [found for job_id, found in sorted(jobs().items()) if job_id not in before]
    if not stages:
        return [what for what, _ in ran]
    read = records()
    return [(what, len(ids), sum(read.get(i, 0) for i in ids)) for what, ids in ran]


def planned_batches(monkeypatch: Any, flag: str) -> list[tuple[bool, list[Any]]]:
    """Filled as batches are planned for the rest of the test: each plan's ``flag`` attribute (e.g.
    ``counted``) and the storage levels of the frames it caches."""
    import lakemerge.batch.attempts

    planned: list[tuple[bool, list[Any]]] = []
    real = lakemerge.batch.attempts.plan_batch

    def spy(*args: Any, **kwargs: Any) -> Any:
        plan = real(*args, **kwargs)
        planned.append((getattr(plan, flag), [frame.storageLevel for frame in plan.cached.frames]))
        return plan

    monkeypatch.setattr(lakemerge.batch.attempts, "plan_batch", spy)
    return planned


def classes_compiled(spark: Any, action: Any) -> int:
    """How many classes Spark compiled for generated code while ``action()`` ran (new code: a
    stage whose code is in Spark's cache compiles none)."""
    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    before = int(compiled.getCount())
    action()
    return int(compiled.getCount()) - before


def csv_table(root: Path, mode: str = "copy_on_write") -> Any:
    """Table ``t`` under ``root`` in write ``mode``, key ``k`` (int), sequence ``seq`` (bigint), fed
    CSV files with a header and an ``op`` column from ``root / "in"``."""
    import lakemerge

    return lakemerge.TableConfig(
        name="t",
        path=str(root / "t"),
        key=("k",),
        sequence=("seq",),
        write_mode=mode,
        feed=lakemerge.FeedConfig(
            location=(str(root / "in"),),
            format="csv",
            header=True,
            op_column="op",
            types={"k": "int", "seq": "bigint"},
        ),
    )
