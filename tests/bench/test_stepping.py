"""The harness steps a cell's peers batch by batch, A B C A B C, each in its own process, and a peer
that fails, ends or hangs is marked so while the others go on (peers that apply nothing, through
the real worker's protocol)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import envs, registry, stepping, worker
from lakemerge.spark.versions import DELTA_VERSION

BATCHES = ["b1", "b2", "b3"]


def _start(tmp_path: Path, peer: str, **job: Any) -> stepping.Start:
    job = {"peer": peer, "journal": str(tmp_path / "journal"), "workdir": str(tmp_path / "w"), **job}
    command = [sys.executable, "-m", "tests.bench.fake_peer", json.dumps(job)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return stepping.Start(peer=peer, command=command, env=env, log=str(tmp_path / "logs" / f"{peer}.log"))


def _journal(tmp_path: Path) -> list[str]:
    return (tmp_path / "journal").read_text().splitlines()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_peers_are_stepped_batch_by_batch_in_their_order(tmp_path: Path) -> None:
    starts = [_start(tmp_path, "A", seconds=0.5), _start(tmp_path, "B"), _start(tmp_path, "C", behaviour="busy")]
    found = stepping.run_cell(starts, BATCHES, timeout=120)
    assert _journal(tmp_path) == [f"{peer} {batch}" for batch in BATCHES for peer in "ABC"]
    for peer in "ABC":
        entry = found[peer]
        assert entry["status"] == "ok", entry
        assert entry["checksum"] == {"rows": 3, "table": 1}
        assert len(entry["times"]) == 3 and entry["group"] == 0
        assert all(rss > 0 for rss in entry["rss_mb"]) and len(entry["rss_mb"]) == 3
        assert entry["wall"] >= sum(entry["times"])
    # The seconds are the worker's, around the batch alone; each batch starts after the one before it.
    assert all(0.5 <= s < 5 for s in found["A"]["times"])
    starts_at = [found[peer]["at"][n] for n in range(3) for peer in "ABC"]
    assert starts_at == sorted(starts_at)
    assert starts_at[-1] - starts_at[0] >= 1.0
    # C spins while A's batches run: the CPU the idle peers used is counted against A's batches.
    assert sum(found["A"]["others_cpu"]) > 0.2
    assert sum(found["B"]["others_cpu"]) < sum(found["A"]["others_cpu"])
    # Every worker removed its table when it finished.
    assert not any((tmp_path / "w").glob("*-table"))


def test_a_failing_peer_is_marked_and_the_others_go_on(tmp_path: Path) -> None:
    starts = [
        _start(tmp_path, "setup", behaviour="setup"),
        _start(tmp_path, "error", behaviour="error", at=2),
        _start(tmp_path, "A"),
        _start(tmp_path, "exit", behaviour="exit", at=1),
        _start(tmp_path, "hang", behaviour="hang", at=2),
        _start(tmp_path, "B"),
    ]
    found = stepping.run_cell(starts, BATCHES, timeout=10)
    # The failures' reasons, one line each: the error's message without its stack, the log's tail.
    assert found["setup"]["status"] == "failed"
    assert found["setup"]["reason"] == "RuntimeError: cannot create the table | second line of the message"
    assert found["setup"]["times"] == []
    assert found["error"] == {**found["error"], "status": "failed", "reason": "ValueError: bad batch b2"}
    assert found["error"]["times"] and len(found["error"]["times"]) == 1
    assert found["exit"]["status"] == "failed" and found["exit"]["reason"].startswith("ended with status 3")
    assert found["hang"]["status"] == "timeout" and found["hang"]["reason"] == "over 10 s"
    assert 10 <= found["hang"]["wall"] < 15
    # A hung peer is ended with what it started.
    child = int(next(line for line in _journal(tmp_path) if line.startswith("child ")).split()[1])
    assert not _alive(child)
    for peer in ("setup", "error", "exit", "hang"):
        assert "checksum" not in found[peer]
    for peer in "AB":
        assert found[peer]["status"] == "ok" and found[peer]["checksum"] == {"rows": 3, "table": 1}
    applied = [line for line in _journal(tmp_path) if not line.startswith("child ")]
    assert applied == [
        "error b1", "A b1", "exit b1", "hang b1", "B b1",
        "error b2", "A b2", "hang b2", "B b2",
        "A b3", "B b3",
    ]  # fmt: skip


def test_alive_steps_groups_one_after_the_other(tmp_path: Path) -> None:
    starts = [_start(tmp_path, peer) for peer in ("lakemerge", "A", "hand_merge", "B")]
    found = stepping.run_cell(starts, BATCHES[:2], timeout=120, alive=2)
    assert _journal(tmp_path) == [
        "lakemerge b1", "hand_merge b1", "lakemerge b2", "hand_merge b2",
        "A b1", "B b1", "A b2", "B b2",
    ]  # fmt: skip
    assert [found[p]["group"] for p in ("lakemerge", "hand_merge", "A", "B")] == [0, 0, 1, 1]


def test_groups_keep_each_peer_with_its_reference() -> None:
    peers = ["lakemerge", "iceberg_mor", "lakemerge_dv", "lakemerge_log", "hand_merge", "hand_merge_dv", "delta_rs"]
    assert stepping.groups(peers, None) == [peers]
    assert stepping.groups(peers, 3) == [
        ["lakemerge", "lakemerge_log", "hand_merge"],
        ["iceberg_mor", "lakemerge_dv", "hand_merge_dv"],
        ["delta_rs"],
    ]
    assert stepping.groups(peers, 5) == [
        ["lakemerge", "iceberg_mor", "lakemerge_log", "hand_merge", "delta_rs"],
        ["lakemerge_dv", "hand_merge_dv"],
    ]
    # Without its reference among the peers, a peer is alone.
    assert stepping.groups(["lakemerge", "lakemerge_dv", "iceberg_cow"], 1) == [
        ["lakemerge"],
        ["lakemerge_dv"],
        ["iceberg_cow"],
    ]
    # The Spark 3.5 calibration of Iceberg's merge-on-read runs beside it.
    assert stepping.groups(["iceberg_mor_spark35", "lakemerge", "hand_merge", "iceberg_mor"], 2) == [
        ["iceberg_mor_spark35", "iceberg_mor"],
        ["lakemerge", "hand_merge"],
    ]
    with pytest.raises(ValueError, match="--alive 2 is too few for lakemerge, lakemerge_log, hand_merge"):
        stepping.groups(peers, 2)
    with pytest.raises(ValueError, match="at least 1"):
        stepping.groups(peers, 0)


def test_worker_answers_an_error_in_one_line_and_stops(capsys: pytest.CaptureFixture[str]) -> None:
    import io

    from bench.tables import Prepared

    def apply(batch: str) -> None:
        raise RuntimeError(f"An error occurred while calling o68.sql.\n: java.lang.Boom: {batch}\n\tat x.Y(Y.java:1)")

    answers = io.StringIO()
    peer = Prepared(apply=apply, checksum=lambda: {"rows": 0})
    code = worker.serve(peer, ['{"apply": "b1"}\n', '{"finish": true}\n'], answers)
    assert code == 1
    assert [json.loads(line) for line in answers.getvalue().splitlines()] == [
        {"error": "RuntimeError: An error occurred while calling o68.sql. | java.lang.Boom: b1"}
    ]
    assert "Traceback" in capsys.readouterr().err


def test_iceberg_peers_run_on_the_newest_spark_line_iceberg_ships_for() -> None:
    assert envs.iceberg_environment("4.2.0") == envs.SPARK41
    assert envs.iceberg_environment("4.1.4") is None
    assert envs.iceberg_package("4.1.1") == "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"
    with pytest.raises(KeyError):
        envs.iceberg_package("4.2.0")
    assert registry.environment("iceberg_cow", "4.2.0") == envs.SPARK41
    assert registry.environment("iceberg_mor", "4.1.4") is None
    assert registry.environment("hudi_mor", "4.1.4") == envs.SPARK35
    assert registry.environment("lakemerge", "4.2.0") is None
    wanted = envs.requirements(envs.SPARK41)
    assert wanted[0] == "pyspark==4.1.4" and not any(r.startswith("pyspark>") for r in wanted)
    assert f"delta-spark=={DELTA_VERSION}" in wanted and any(r.startswith("pydantic") for r in wanted)
    assert envs.requirements(envs.SPARK35) == ["pyspark==3.5.7"]
    env = envs.process_env({"SPARK_HOME": "/opt/spark-4", "PATH": "/bin"}, envs.SPARK41, "/repo")
    assert env == {"PATH": "/bin", "PYTHONPATH": os.pathsep.join(["/repo", "/repo/src"])}
