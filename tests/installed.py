"""Checks run against lakemerge as a user installed it in a virtual environment of its own (see
:mod:`tests.wheels`): a file pipeline in each write mode and DataFrame batches, each read back with
delta-rs and compared with the oracle. The older Spark line and a Spark Connect client alone run
the same checks; ``remote`` names the Connect server, if any."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tests.helpers import query_rows, read_log_view, read_table, write_lines
from tests.oracle import apply_batch, state_rows
from tests.wheels import Venv

MODES = ("copy_on_write", "deletion_vectors", "log")
COLUMNS = ("k", "seq", "v")


def change_files(rng: random.Random, count: int) -> list[list[dict[str, Any]]]:
    """``count`` change files over 25 keys: inserts, updates, deletes and records older than what a
    table holds (late), several changes of one key in one file."""
    files = []
    for number in range(count):
        rows = []
        for _ in range(18):
            k = rng.randrange(25)
            seq = number * 10 + rng.randrange(-12, 10)
            rows.append({"k": k, "seq": seq, "op": rng.choice("IUUD"), "v": f"f{number}-{rng.randrange(1000)}"})
        files.append(rows)
    return files


def _remote(remote: str | None) -> list[str]:
    return ["--remote", remote] if remote else []


def pipeline_in_each_mode(venv: Venv, root: Path, *, seed: int, remote: str | None = None) -> None:
    """A pipeline of one table per write mode, run over four change files, one per batch: each
    batch's counts and each table's rows are the oracle's."""
    files = change_files(random.Random(seed), 4)
    sections = []
    for mode in MODES:
        for number, rows in enumerate(files):
            lines = [f"{r['k']},{r['seq']},{r['op']},{r['v']}" for r in rows]
            write_lines(root / "landing" / mode / f"part_{number:02d}.csv", ["k,seq,op,v", *lines])
        sections.append(
            f'[tables.{mode}]\npath = "lake/{mode}"\nkey = "k"\nsequence = "seq"\nwrite_mode = "{mode}"\n'
            f"max_files_per_batch = 1\n"
            f'[tables.{mode}.feed]\nlocation = "landing/{mode}"\nformat = "csv"\nheader = true\nop_column = "op"\n'
            'types = { k = "int", seq = "bigint" }\n'
        )
    (root / "pipeline.toml").write_text("\n".join(sections))
    ran = venv.run(["lakemerge", "run", "pipeline.toml", "--json", *_remote(remote)], cwd=root)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    batches = json.loads(ran.stdout)["batches"]

    state: dict[Any, Any] = {}
    tombstones: dict[Any, Any] = {}
    expected_counts = []
    for number, rows in enumerate(files):
        state, counts = apply_batch(
            state, [(f"part_{number:02d}.csv", rows)], key=("k",), seq="seq", op="op", tombstones=tombstones
        )
        expected_counts.append(counts)
    expected = state_rows(state, COLUMNS)
    for mode in MODES:
        done = [b for b in batches if b["table"] == mode]
        assert [len(b["files"]) for b in done] == [1] * len(files), mode
        for batch, counts in zip(done, expected_counts, strict=True):
            got = {name: batch["metrics"][name] for name in ("inserted", "updated", "deleted", "late", "superseded")}
            assert got == {name: counts[name] for name in got}, (mode, batch["batch_id"])
    path = root / "lake"
    assert read_table(path / "copy_on_write", COLUMNS) == expected
    assert sorted(query_rows(path / "deletion_vectors", COLUMNS), key=_order) == sorted(expected, key=_order)
    assert read_log_view(path / "log", path / "log__log", "k", COLUMNS) == expected


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[c] for c in COLUMNS)


_FRAMES = """
import json, sys
import lakemerge
remote = sys.argv[3] or None
settings = lakemerge.SparkSettings(remote=remote) if remote else lakemerge.SparkSettings(master="local[1]")
spark = lakemerge.spark_session(settings)
records = lakemerge.RecordsConfig(op_column="op", upsert_codes=("I", "U"))
table = lakemerge.TableConfig(name="t", path=sys.argv[1], key=("k",), sequence=("seq",), records=records)
said = []
for number, rows in enumerate(json.loads(sys.argv[2]), start=1):
    frame = spark.createDataFrame([tuple(r.values()) for r in rows], "k INT, seq BIGINT, op STRING, v STRING")
    result = lakemerge.apply_changes(table, frame, source="job", batch_id=number, spark=spark)
    said.append([result.version, result.metrics.inserted, result.metrics.updated, result.metrics.deleted])
again = lakemerge.apply_changes(table, frame, source="job", batch_id=1, spark=spark)
said.append([again.version, again.applied_before])
print("SAID " + json.dumps(said))
"""


def dataframe_batches(venv: Venv, root: Path, *, seed: int, remote: str | None = None) -> None:
    """Three DataFrame batches from a job, then the first again: each batch's counts are the
    oracle's, the repeated one is refused as applied before, and the table is the oracle's."""
    files = change_files(random.Random(seed), 3)
    # A job's script file (PySpark's Connect client takes ``python -c`` for its own doctests and
    # looks for a Spark installation that its client-only package does not have).
    (root / "job.py").write_text(_FRAMES)
    ran = venv.run(["python", "job.py", str(root / "t"), json.dumps(files), remote or ""], cwd=root)
    said = [line for line in ran.stdout.splitlines() if line.startswith("SAID ")]
    assert ran.returncode == 0 and said, ran.stdout[-2000:] + ran.stderr[-3000:]
    results = json.loads(said[0][5:])
    state: dict[Any, Any] = {}
    tombstones: dict[Any, Any] = {}
    for number, rows in enumerate(files):
        state, counts = apply_batch(state, [("frame", rows)], key=("k",), seq="seq", op="op", tombstones=tombstones)
        assert results[number][1:] == [counts["inserted"], counts["updated"], counts["deleted"]], number
    assert results[-1] == [None, True]
    assert read_table(root / "t", COLUMNS) == state_rows(state, COLUMNS)
