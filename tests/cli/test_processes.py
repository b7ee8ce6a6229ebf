"""Crash safety and concurrency with real processes: the installed ``lakemerge`` script killed with
SIGKILL at random moments, two writers racing on one pipeline, and a reader polling with delta-rs.

The feed is built so that the expected table is obvious (an oracle in a few lines): file ``i``
carries, for every key, either an update with sequence ``i`` or (for some keys) a delete.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import deltalake
import pytest

import lakemerge
from lakemerge.batch.run import run_tables
from lakemerge.table import ledger
from tests.helpers import read_log_view, read_table, write_lines

KEYS = 20
SCHEMA = "id INT, seq BIGINT, op STRING, v STRING"


def pipeline(tmp_path: Path, *, max_files: int, write_mode: str = "copy_on_write") -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(
        f'[spark]\nmaster = "local[1]"\nconf = {{ "spark.sql.shuffle.partitions" = "1" }}\n'
        f'[tables.t]\npath = "table"\nkey = "id"\nsequence = "seq"\nmax_files_per_batch = {max_files}\n'
        f'write_mode = "{write_mode}"\n'
        f'[tables.t.feed]\nlocation = "landing"\nformat = "csv"\nheader = true\nschema = "{SCHEMA}"\n'
        'op_column = "op"\n'
    )
    return path


def feed_file(tmp_path: Path, i: int, *, deletes: bool = True) -> None:
    rng = random.Random(i)
    rows = [f"{k},{i},{'D' if deletes and rng.random() < 0.2 else 'U'},file{i:03d}" for k in range(KEYS)]
    write_lines(tmp_path / "staging" / f"f{i:03d}.csv", ["id,seq,op,v", *rows])
    os.replace(tmp_path / "staging" / f"f{i:03d}.csv", tmp_path / "landing" / f"f{i:03d}.csv")


def oracle(tmp_path: Path, files: int) -> list[dict[str, object]]:
    state: dict[int, dict[str, object] | None] = {}
    for i in range(files):
        for line in (tmp_path / "landing" / f"f{i:03d}.csv").read_text().splitlines()[1:]:
            k, seq, op, v = line.split(",")
            state[int(k)] = None if op == "D" else {"id": int(k), "seq": int(seq), "v": v}
    return sorted((r for r in state.values() if r), key=lambda r: r["id"])  # type: ignore[index]


def lakemerge_command() -> list[str]:
    exe = shutil.which("lakemerge")
    return [exe] if exe else [sys.executable, "-m", "lakemerge.cli.app"]


def assert_each_file_applied_once(table: str, files: int) -> None:
    seen: dict[str, int] = {}
    for commit in deltalake.DeltaTable(table).history():
        record = ledger.parse_record(commit.get("userMetadata"))
        for item in (record or {}).get("files", []):
            name = Path(item["path"]).name
            seen[name] = seen.get(name, 0) + 1
    assert seen == {f"f{i:03d}.csv": 1 for i in range(files)}


def crash_and_recover(
    spark: object, tmp_path: Path, rng: random.Random, write_mode: str = "copy_on_write", remote: Sequence[str] = ()
) -> str:
    """Kill ``lakemerge run`` at a random moment, rerun it, and compare with the oracle; a ``log``
    table is read through its merged view, computed from delta-rs reads of table and log."""
    files = 6
    (tmp_path / "landing").mkdir(parents=True)
    for i in range(files):
        feed_file(tmp_path, i)
    proc = subprocess.Popen(
        [*lakemerge_command(), "run", str(pipeline(tmp_path, max_files=2, write_mode=write_mode)), *remote],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    delay = rng.uniform(3.0, 30.0)
    try:
        proc.wait(timeout=delay)
        outcome = "finished before the kill"
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        outcome = f"killed after {delay:.1f} s"
    table = lakemerge.load_pipeline(tmp_path / "pipeline.toml").table("t")
    run_tables([table], spark=spark)  # the rerun
    columns = ["id", "seq", "v"]
    read = (
        read_log_view(table.path, table.log_table, "id", columns) if table.log_mode else read_table(table.path, columns)
    )
    got = sorted(read, key=lambda r: r["id"])  # type: ignore[arg-type, return-value]
    assert got == oracle(tmp_path, files), outcome
    assert_each_file_applied_once(table.log_table if table.log_mode else table.path, files)
    return f"{write_mode}: {outcome}"


@pytest.mark.parametrize(
    "write_mode",
    # The log table's kill joins the long run's (pytest -m fault), to keep the suite within its time.
    ["copy_on_write", pytest.param("log", marks=pytest.mark.fault)],
)
def test_sigkill_at_random_moments_then_rerun(
    spark: object, remote_args: list[str], tmp_path: Path, write_mode: str
) -> None:
    rng = random.Random(int(os.environ.get("LAKEMERGE_FAULT_SEED", "7")))
    crash_and_recover(spark, tmp_path / "0", rng, write_mode, remote_args)  # more rounds: pytest -m fault


@pytest.mark.fault
def test_sigkill_long_run(spark: object, remote_args: list[str], tmp_path: Path) -> None:
    """``pytest -m fault``: LAKEMERGE_FAULT_ITERATIONS (default 100) kills, each followed by a rerun,
    copy-on-write and ``log`` tables in turn."""
    rng = random.Random(int(os.environ.get("LAKEMERGE_FAULT_SEED", "1")))
    outcomes = [
        crash_and_recover(spark, tmp_path / str(n), rng, ("copy_on_write", "log")[n % 2], remote_args)
        for n in range(int(os.environ.get("LAKEMERGE_FAULT_ITERATIONS", "100")))
    ]
    killed = sum(1 for o in outcomes if "killed" in o)
    print(f"\n{len(outcomes)} iterations, {killed} killed mid-run, all recovered to the oracle's table")


READER = r"""
import sys, time, deltalake
path, stop = sys.argv[1], sys.argv[2]
import os
seen = set()
while not os.path.exists(stop):
    try:
        table = deltalake.DeltaTable(path)
    except Exception:
        time.sleep(0.1)
        continue
    version = table.version()
    if version not in seen:
        seen.add(version)
        values = {r["v"] for r in table.to_pyarrow_table(columns=["v"]).to_pylist()}
        if len(values) > 1:
            print(f"version {version} mixes batches: {sorted(values)}", flush=True)
            sys.exit(1)
    time.sleep(0.05)
print(len(seen), flush=True)
"""


@pytest.mark.processes
def test_two_writers_and_a_reader(remote_args: list[str], tmp_path: Path) -> None:
    """Two ``lakemerge run --watch`` processes on one pipeline while files keep arriving; a reader
    checks that every version it sees shows whole batches only (every file updates every key, so a
    version mixing two files' values would be a partial batch)."""
    files = 4
    (tmp_path / "landing").mkdir(parents=True)
    path = pipeline(tmp_path, max_files=2)
    text = path.read_text().replace("max_files_per_batch = 2", "max_files_per_batch = 2\ncommit_attempts = 20")
    path.write_text(text)
    feed_file(tmp_path, 0, deletes=False)
    stop = tmp_path / "stop-reader"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(tmp_path / "table"), str(stop)], stdout=subprocess.PIPE, text=True
    )
    writers = [
        subprocess.Popen(
            [*lakemerge_command(), "run", str(path), "--watch", "--interval", "0.5", *remote_args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        for _ in range(2)
    ]
    try:
        for i in range(1, files):
            time.sleep(1.5)
            feed_file(tmp_path, i, deletes=False)
        deadline = time.time() + 240
        while time.time() < deadline:
            try:
                rows = read_table(tmp_path / "table", ["v"])
                if rows and all(r["v"] == f"file{files - 1:03d}" for r in rows):
                    break
            except Exception:
                pass
            time.sleep(1)
    finally:
        for w in writers:
            w.send_signal(signal.SIGTERM)
        codes = [w.wait(timeout=120) for w in writers]
        stop.write_text("")
        out, _ = reader.communicate(timeout=60)
    errors = [w.stderr.read() if w.stderr else "" for w in writers]
    assert codes == [0, 0], errors
    assert reader.returncode == 0, out
    assert sorted(read_table(tmp_path / "table", ["id", "seq", "v"]), key=lambda r: r["id"]) == [  # type: ignore[arg-type, return-value]
        {"id": k, "seq": files - 1, "v": f"file{files - 1:03d}"} for k in range(KEYS)
    ]
    assert_each_file_applied_once(str(tmp_path / "table"), files)


@pytest.mark.processes
def test_two_schedulers_started_together_both_succeed(remote_args: list[str], tmp_path: Path) -> None:
    """Two ``lakemerge run --json`` started at once on one pipeline (overlapping cron runs): each
    applies what it wins and re-plans what it loses; both exit 0 with their document, and every
    file is applied exactly once."""
    files = 8
    (tmp_path / "landing").mkdir(parents=True)
    for i in range(files):
        feed_file(tmp_path, i)
    path = pipeline(tmp_path, max_files=1)
    writers = [
        subprocess.Popen(
            [*lakemerge_command(), "run", str(path), "--json", *remote_args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        for _ in range(2)
    ]
    outputs = [w.communicate(timeout=600) for w in writers]
    assert [w.returncode for w in writers] == [0, 0], [err for _, err in outputs]
    import json

    committed = [f["path"] for out, _ in outputs for b in json.loads(out)["batches"] for f in b["files"]]
    assert sorted(Path(p).name for p in committed) == [f"f{i:03d}.csv" for i in range(files)]
    assert_each_file_applied_once(str(tmp_path / "table"), files)
    assert sorted(read_table(tmp_path / "table", ["id", "seq", "v"]), key=lambda r: r["id"]) == oracle(tmp_path, files)  # type: ignore[arg-type, return-value]
