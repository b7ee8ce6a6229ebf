"""``lakemerge stream`` killed with SIGKILL at random moments while messages keep arriving, then
started again (once with its checkpoint deleted, from ``latest`` and with another micro-batch
size): every message applied, none twice (each offset recorded by one commit), the table equal to
the oracle's. Each process is its own JVM, as a scheduler starts it."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from bench.kafka import produce
from tests.helpers import read_table
from tests.oracle import Oracle
from tests.streams.ranges import assert_each_offset_applied_once, sent_counts

pytestmark = pytest.mark.kafka

KEYS = 25


def _command(pipeline: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "lakemerge.cli.app", "stream", str(pipeline), *extra]


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    env["LAKEMERGE_SPARK_LOG"] = str(root / "spark.log")
    return env


def _pipeline(root: Path, kafka: str, topic: str, *, size: int = 40, starting: str = "earliest") -> Path:
    """A pipeline streaming ``topic``'s JSON changes into one table, ``size`` messages a micro-batch."""
    pipeline = root / "p.toml"
    pipeline.write_text(
        '[tables.orders]\npath = "lake/orders"\nkey = "id"\nsequence = "seq"\n'
        f'[tables.orders.stream]\nbootstrap_servers = "{kafka}"\ntopics = ["{topic}"]\nformat = "json"\n'
        'schema = "id INT, seq BIGINT, op STRING, v STRING"\nop_column = "op"\nupsert_codes = ["I", "U"]\n'
        f'checkpoint = "checkpoint"\ntrigger = "300 ms"\nmax_records_per_batch = {size}\n'
        f'starting_offsets = "{starting}"\n'
    )
    return pipeline


def _messages(rng: random.Random, sequence: list[int], count: int) -> list[tuple[int, str, str]]:
    """``count`` changes of random keys, each key's in its own partition, with rising sequences."""
    found = []
    for _ in range(count):
        key = rng.randrange(KEYS)
        sequence[0] += 1
        op = rng.choice(["I", "U", "U", "D"])
        value = json.dumps({"id": key, "seq": sequence[0], "op": op, "v": f"v{sequence[0]}"})
        found.append((key % 3, str(key), value))
    return found


def test_a_stream_killed_at_random_moments_loses_nothing_and_applies_nothing_twice(
    spark: Any, tmp_path: Path, kafka: str
) -> None:
    rng = random.Random(int(os.environ.get("LAKEMERGE_FAULT_SEED", "7")))
    topic = "shop.crashes"
    pipeline = _pipeline(tmp_path, kafka, topic)
    sent: list[tuple[int, str, str]] = []
    sequence = [0]
    kills = int(os.environ.get("LAKEMERGE_KAFKA_KILLS", "4"))
    log = tmp_path / "lake" / "orders" / "_delta_log"
    for attempt in range(kills):
        if attempt == 2:
            # The checkpoint lost (the table has commits: the run before waited for one): the table
            # says where the stream is, whatever its settings say.
            shutil.rmtree(tmp_path / "checkpoint")
            pipeline = _pipeline(tmp_path, kafka, topic, size=90, starting="latest")
        process = subprocess.Popen(_command(pipeline, "--json"), env=_env(tmp_path), cwd=tmp_path)
        deadline, latest = time.monotonic() + rng.uniform(8.0, 25.0), time.monotonic() + 300
        while process.poll() is None and time.monotonic() < latest:
            if time.monotonic() > deadline:
                if attempt != 1 or any(log.glob("*.json")):
                    break
                time.sleep(0.5)  # (until its first commit, sending nothing more)
                continue
            batch = _messages(rng, sequence, rng.randrange(20, 80))
            produce(spark, kafka, topic, batch)
            sent.extend(batch)
            time.sleep(rng.uniform(0.2, 2.0))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    done = subprocess.run(
        _command(pipeline, "--available-now", "--json"), env=_env(tmp_path), cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0

    oracle = Oracle(key=("id",), seq="seq", op="op")
    oracle.apply([[json.loads(value) for _, _, value in sent]])
    expected = [{c: r[c] for c in ("id", "seq", "v")} for r in oracle.rows()]
    assert read_table(tmp_path / "lake" / "orders", ["id", "seq", "v"]) == expected
    commits = [c for c in lakemerge.history(str(tmp_path / "lake" / "orders"), spark=spark) if c.source]
    assert sum(c.metrics["rows_read"] for c in commits) == len(sent), "every message read once"
    assert_each_offset_applied_once(tmp_path / "lake" / "orders", sent_counts(topic, (p for p, _, _ in sent)))


def test_sigterm_lets_the_micro_batch_in_progress_commit_then_exits_0(spark: Any, tmp_path: Path, kafka: str) -> None:
    """The stream stops after the micro-batch in progress: what it reports committed is what the table
    holds, nothing half applied, and a run that catches up applies the rest, each message once."""
    topic = "shop.stopped"
    pipeline = _pipeline(tmp_path, kafka, topic)
    sent = _messages(random.Random(3), [0], 400)
    produce(spark, kafka, topic, sent)
    process = subprocess.Popen(
        _command(pipeline, "--json"), env=_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    log = tmp_path / "lake" / "orders" / "_delta_log"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None and len(list(log.glob("*.json"))) < 2:
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=240)
    assert process.returncode == 0
    reported = {b["source_batch"] for b in json.loads(out)["batches"] if b["version"] is not None}
    table = str(tmp_path / "lake" / "orders")
    committed = {c.source_batch for c in lakemerge.history(table, spark=spark) if c.source}
    assert reported and reported == committed
    assert len(committed) * 40 < len(sent), "stopped before the topic's end"

    done = subprocess.run(_command(pipeline, "--available-now", "--json"), env=_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 0
    oracle = Oracle(key=("id",), seq="seq", op="op")
    oracle.apply([[json.loads(value) for _, _, value in sent]])
    expected = [{c: r[c] for c in ("id", "seq", "v")} for r in oracle.rows()]
    assert read_table(tmp_path / "lake" / "orders", ["id", "seq", "v"]) == expected
    commits = [c for c in lakemerge.history(table, spark=spark) if c.source]
    assert len({c.source_batch for c in commits}) == len(commits)
    assert sum(c.metrics["rows_read"] for c in commits) == len(sent)
