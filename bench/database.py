"""A whole database from Debezium: one source query for ``--tables`` tables against a query per
table on the same topics, and the source with its transactions kept whole against the same source
applying each micro-batch as it comes, in one run.

``python -m bench.database [--tables 10] [--events 60000] [--per-batch 12000] [--rate 1000] [--seconds 60]``

- **Workload**: Debezium events (the JSON converter without schemas) of ``--tables`` tables
  ``<prefix>.public.t0`` ... on a KRaft broker, two partitions each, keyed by the row's ``id``: a
  first event of a key creates it, later ones update it (nine in ten) or delete it; the events come
  in database transactions of one to four events over one to three tables, each event with its
  ``transaction`` block and each transaction with a ``BEGIN`` and an ``END`` record on
  ``<prefix>.transaction`` (``provide.transaction.metadata``).
- **Peers**: ``source`` (a ``[sources.NAME]`` section, ``transactions = "micro-batch"``: one query,
  each micro-batch one transaction over its tables), ``source_whole`` (the same with
  ``transactions = "whole"``: readers of its points see each database transaction whole) and
  ``per_table`` (a ``[tables.NAME]`` section with its own Kafka stream per table: ``--tables``
  queries in one Spark session). Each runs in a fresh process.
- **Throughput**: the ``--events`` events are produced first; each peer applies them all (trigger
  available-now), ``--per-batch`` records per micro-batch (the per-table queries ``--per-batch``
  ÷ ``--tables`` each); changes per second = events ÷ wall time. Every table must then hold what a
  plain-Python replay of the events gives.
- **Latency**: each peer streams with a 1-second trigger while a producer sends ``--rate`` events a
  second for ``--seconds`` seconds in one-second ticks; a batch's latency is from the sending of
  the tick holding its oldest record (found from its offsets) to its commit, as the batch's result
  reaches the caller. Reported: p50 and p95 over the batches, and whether the peer kept up.

Outputs (JSON and a table) go under ``--out`` (default: the harness's data folder).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench import data
from bench.kafka import broker

PEERS = ("source", "source_whole", "per_table")
PARTITIONS = 2
#: A record to send: (topic, partition, key, value).
Record = tuple[str, int, str, str]


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    if args.peer:
        return _peer(args)
    if args.produce:
        return _produce_ticks(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = Path(args.data) / "database"
    subprocess.run(["rm", "-rf", str(root)], check=True)
    report: dict[str, Any] = {"command": " ".join(["python -m bench.database", *(argv or sys.argv[1:])]), "peers": {}}
    with broker(root / "kafka", partitions=PARTITIONS) as bootstrap:
        prefix = f"db{int(time.time())}"
        if args.throughput_runs:
            _send(bootstrap, list(_records(prefix, args.tables, args.events, seed=1)), root)
        for peer in args.peers if args.throughput_runs else ():
            found = _run(args, peer, bootstrap, prefix, root / peer / "throughput")
            report["peers"][peer] = {"throughput": {**found, "events": args.events}}
        for peer in args.peers if args.latency_runs else ():
            report["peers"].setdefault(peer, {})["latency"] = _latency(args, peer, bootstrap, root / peer / "latency")
    (out / "database.json").write_text(json.dumps(report, indent=2))
    print(_table(report))
    return 0


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.database")
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--events", type=int, default=60000)
    parser.add_argument("--per-batch", type=int, default=12000, help="records per micro-batch of the source")
    parser.add_argument("--rate", type=int, default=1000, help="events a second in the latency run")
    parser.add_argument("--seconds", type=int, default=60, help="how long the latency run produces")
    parser.add_argument("--peers", nargs="+", default=list(PEERS), choices=PEERS)
    parser.add_argument("--no-latency", dest="latency_runs", action="store_false", help="skip the latency runs")
    parser.add_argument("--no-throughput", dest="throughput_runs", action="store_false", help="skip the throughputs")
    parser.add_argument("--data", default=data.ROOT)
    parser.add_argument("--out", default=data.OUT)
    parser.add_argument("--peer", choices=PEERS, help=argparse.SUPPRESS)
    parser.add_argument("--produce", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--latency", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# -- the workload ----------------------------------------------------------------------------------


def _records(prefix: str, tables: int, events: int, *, seed: int, lsn: int = 0) -> Iterator[Record]:
    """``events`` Debezium events of ``tables`` tables in transactions, with their markers (see the
    module), in the order the database committed them."""
    rng = random.Random(seed)
    rows: list[dict[int, dict[str, Any]]] = [{} for _ in range(tables)]
    keys = max(50, events // tables // 4)
    sent = 0
    while sent < events:
        number = lsn + sent
        tx = f"{seed}:{number}"
        chosen = rng.sample(range(tables), rng.randint(1, min(3, tables)))
        changes = [rng.choice(chosen) for _ in range(rng.randint(len(chosen), len(chosen) + 1))]
        counts: dict[str, int] = {}
        out: list[Record] = []
        for total, t in enumerate(changes, start=1):
            key = rng.randrange(keys)
            old = rows[t].get(key)
            if old is not None and rng.random() < 0.1:
                op, before, after = "d", old, None
                del rows[t][key]
            else:
                op, before = ("u", old) if old is not None else ("c", None)
                after = {"id": key, "qty": rng.randrange(1000), "note": f"n{number}-{total}"}
                rows[t][key] = after
            collection = f"public.t{t}"
            counts[collection] = counts.get(collection, 0) + 1
            block = {"id": tx, "total_order": total, "data_collection_order": counts[collection]}
            event = {"before": before, "after": after, "source": {"lsn": number * 10 + total, "txId": number},
                     "op": op, "ts_ms": 1_700_000_000_000 + number, "transaction": block}  # fmt: skip
            out.append((f"{prefix}.public.t{t}", key % PARTITIONS, json.dumps({"id": key}), json.dumps(event)))
        collections = [{"data_collection": c, "event_count": n} for c, n in sorted(counts.items())]
        marker = {"id": tx, "ts_ms": 1_700_000_000_000 + number, "data_collections": None, "event_count": None}
        yield (f"{prefix}.transaction", 0, json.dumps({"id": tx}), json.dumps({**marker, "status": "BEGIN"}))
        yield from out
        end = {**marker, "status": "END", "event_count": len(out), "data_collections": collections}
        yield (f"{prefix}.transaction", 0, json.dumps({"id": tx}), json.dumps(end))
        sent += len(out)


def _expected(prefix: str, tables: int, events: int) -> dict[str, tuple[int, int]]:
    """Each table's rows and sum of ``qty`` after the throughput workload (a plain replay)."""
    state: dict[str, dict[int, int]] = {f"t{t}": {} for t in range(tables)}
    for topic, _, _, value in _records(prefix, tables, events, seed=1):
        if topic.endswith(".transaction"):
            continue
        event, table = json.loads(value), topic.rsplit(".", 1)[-1]
        if event["op"] == "d":
            state[table].pop(event["before"]["id"], None)
        else:
            state[table][event["after"]["id"]] = event["after"]["qty"]
    return {t: (len(rows), sum(rows.values())) for t, rows in state.items()}


def _send(bootstrap: str, records: Sequence[Record], folder: Path) -> None:
    """Send ``records`` in one Spark write (its own process: a Spark session of its own)."""
    code = (
        "import json, sys\n"
        "from bench.database import _write\n"
        "from bench.streaming import _spark\n"
        "_write(_spark(), sys.argv[1], [tuple(r) for r in json.load(open(sys.argv[2]))])\n"
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "records.json").write_text(json.dumps(list(records)))
    subprocess.run([sys.executable, "-c", code, bootstrap, str(folder / "records.json")], check=True)


def _write(spark: Any, bootstrap: str, records: Sequence[Record]) -> None:
    """One Kafka write of ``records``, in order within each partition (one task)."""
    frame = spark.createDataFrame(list(records), "topic STRING, partition INT, key STRING, value STRING").coalesce(1)
    frame.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).save()


def _produce_ticks(args: argparse.Namespace) -> int:
    """The latency run's producer: ``--rate`` events a second for ``--seconds`` seconds; after each
    tick, its sending time and every partition's count so far, in ``ticks.json`` under ``--root``."""
    from bench.streaming import _spark

    spark = _spark()
    records = list(_records(args.prefix, args.tables, args.rate * args.seconds, seed=2, lsn=10**7))
    counts: dict[str, int] = {}
    ticks: list[dict[str, Any]] = []
    start, position = 0, 0
    for tick in range(args.seconds):
        began = time.time()
        end = start
        while end < len(records) and (position < (tick + 1) * args.rate or tick == args.seconds - 1):
            position += not records[end][0].endswith(".transaction")
            end += 1  # (the last tick sends the rest: the last transaction's END too)
        _write(spark, args.bootstrap, records[start:end])
        for topic, partition, _, _ in records[start:end]:
            counts[f"{topic}/{partition}"] = counts.get(f"{topic}/{partition}", 0) + 1
        ticks.append({"sent": began, "counts": dict(counts)})
        written = Path(args.root, "ticks.json.tmp")  # (renamed into place: a reader never sees half of it)
        written.write_text(json.dumps({"ticks": ticks, "done": tick == args.seconds - 1}))
        written.replace(Path(args.root, "ticks.json"))
        start = end
        time.sleep(max(0.0, 1.0 - (time.time() - began)))
    return 0


# -- the peers -------------------------------------------------------------------------------------


def _pipeline(args: argparse.Namespace, peer: str, root: Path, *, latency: bool) -> dict[str, Any]:
    stream = {"bootstrap_servers": args.bootstrap, "trigger": "1 second" if latency else "available_now"}
    if peer == "per_table":
        share = max(1, args.per_batch // args.tables)
        tables = {
            f"t{t}": {
                "path": str(root / "lake" / f"t{t}"),
                "key": "id",
                "sequence": "__source_lsn",
                "stream": {
                    **stream,
                    "topics": [f"{args.prefix}.public.t{t}"],
                    "checkpoint": str(root / f"ck{t}"),
                    **({} if latency else {"max_records_per_batch": share}),
                },
            }
            for t in range(args.tables)
        }
        return {"tables": tables}
    source = {
        **stream,
        "topic_pattern": f"{args.prefix}\\..*",
        "table_path": str(root / "lake" / "{table}"),
        "checkpoint": str(root / "checkpoint"),
        "transactions": "whole" if peer == "source_whole" else "micro-batch",
        "defaults": {"sequence": "__source_lsn"},
        **({} if latency else {"max_records_per_batch": args.per_batch}),
    }
    return {"sources": {"db": source}}


def _run(args: argparse.Namespace, peer: str, bootstrap: str, prefix: str, root: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.database", "--peer", peer, "--bootstrap", bootstrap, "--prefix", prefix]
    command += ["--root", str(root), "--tables", str(args.tables), "--events", str(args.events)]
    command += ["--per-batch", str(args.per_batch), "--rate", str(args.rate), "--seconds", str(args.seconds)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=7200)
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _latency(args: argparse.Namespace, peer: str, bootstrap: str, root: Path) -> dict[str, Any]:
    """The peer streaming on fresh topics while the producer sends (see the module)."""
    prefix = f"lat{peer.replace('_', '')}{int(time.time())}"
    root.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "bench.database", "--bootstrap", bootstrap, "--prefix", prefix]
    command += ["--root", str(root), "--tables", str(args.tables), "--rate", str(args.rate)]
    command += ["--seconds", str(args.seconds)]
    _send(bootstrap, _warm_up(prefix, args.tables), root)
    streaming = subprocess.Popen([*command, "--peer", peer, "--latency"], stdout=subprocess.PIPE, text=True)
    assert streaming.stdout is not None
    streaming.stdout.readline()  # ("ready": its session is up and its queries start)
    subprocess.run([*command, "--produce"], check=True, timeout=3600)
    out, _ = streaming.communicate(timeout=900)
    if streaming.returncode != 0:
        return {"error": f"exit {streaming.returncode}"}
    return dict(json.loads(out.strip().splitlines()[-1]))


def _peer(args: argparse.Namespace) -> int:
    import lakemerge
    from bench.streaming import _spark

    spark = _spark()
    root = Path(args.root)
    config = lakemerge.PipelineConfig.model_validate(_pipeline(args, args.peer, root, latency=args.latency))
    if not args.latency:
        started = time.time()
        results = lakemerge.stream(config, spark=spark, available_now=True)
        elapsed = time.time() - started
        found = _check(root, _expected(args.prefix, args.tables, args.events))
        _done({"seconds": round(elapsed, 3), "batches": len(results), "checked": found})
    for topic, partition, _, _ in _warm_up(args.prefix, args.tables):
        _WARM[f"{topic}/{partition}"] = _WARM.get(f"{topic}/{partition}", 0) + 1
    seen: list[tuple[float, dict[str, dict[str, list[int]]]]] = []
    stop = threading.Event()

    def record(result: Any) -> None:
        seen.append((time.time(), result.source_offsets))

    settings = {"spark": spark, "stop": stop, "on_result": record}
    runner = threading.Thread(target=lakemerge.stream, args=(config,), kwargs=settings, daemon=True)
    runner.start()
    while runner.is_alive() and not all(
        _ends(seen).get(p, 0) >= n for p, n in _WARM.items() if "transaction/" not in p
    ):
        time.sleep(0.2)  # (the warm-up applied: the queries run, every table exists)
    print("ready", flush=True)
    kept_up = _await_caught_up(root, seen)
    stop.set()
    runner.join(timeout=300)
    _done({**_latencies(root, seen), "kept_up": kept_up})
    return 0


def _done(result: dict[str, Any]) -> None:
    """Print the peer's result and end its process at once (a JVM's and delta-rs's threads racing
    at an interpreter's exit can abort it after the result is out)."""
    print(json.dumps(result), flush=True)
    os._exit(0)


def _check(root: Path, expected: dict[str, tuple[int, int]]) -> bool:
    """Whether every table holds what the replay gives (read by delta-rs).

    Raises:
        AssertionError: a table that does not."""
    import deltalake

    for table, (rows, total) in expected.items():
        frame = deltalake.DeltaTable(str(root / "lake" / table)).to_pyarrow_table(columns=["qty"])
        got = (frame.num_rows, sum(v for v in frame.column("qty").to_pylist() if v is not None))
        assert got == (rows, total), f"{table}: {got} rows and sum, the replay {(rows, total)}"
    return True


def _ends(seen: Sequence[tuple[float, dict[str, dict[str, list[int]]]]]) -> dict[str, int]:
    found: dict[str, int] = {}
    for _, offsets in seen:
        for topic, partitions in offsets.items():
            for partition, (_, end) in partitions.items():
                name = f"{topic}/{partition}"
                found[name] = max(found.get(name, 0), end)
    return found


def _await_caught_up(root: Path, seen: Sequence[tuple[float, Any]], patience: float = 120.0) -> bool:
    """Wait for the producer to finish and the peer to apply every event it sent (or ``patience``
    seconds after it finished); whether the peer caught up."""
    deadline = None
    while True:
        time.sleep(0.5)
        ticks = root / "ticks.json"
        if not ticks.exists():
            continue
        state = json.loads(ticks.read_text())
        if not state["done"]:
            continue
        deadline = deadline or time.monotonic() + patience
        wanted = {p: n for p, n in state["ticks"][-1]["counts"].items() if ".transaction/" not in p}
        ends = _ends(seen)
        if all(ends.get(p, 0) >= _first_of_run(p) + n for p, n in wanted.items()):
            return True
        if time.monotonic() > deadline:
            return False


def _first_of_run(partition: str) -> int:
    """The offset the latency run's records start at in a partition: after the records that created
    its topics (:func:`_warm_up`)."""
    return _WARM.get(partition, 0)


#: Records per partition that :func:`_warm_up` sent before the latency run's producer started.
_WARM: dict[str, int] = {}


def _warm_up(prefix: str, tables: int) -> list[Record]:
    """The records that create the latency run's topics before its peer subscribes (a pattern
    picks up new topics only after a while)."""
    return list(_records(prefix, tables, tables * 20, seed=3, lsn=10**6))


def _latencies(root: Path, seen: Sequence[tuple[float, dict[str, dict[str, list[int]]]]]) -> dict[str, Any]:
    """Each batch's latency: its commit from the sending of the tick holding its oldest record."""
    ticks = json.loads((root / "ticks.json").read_text())["ticks"]
    found = []
    for committed, offsets in seen:
        oldest = None
        for topic, partitions in offsets.items():
            for partition, (first, _) in partitions.items():
                name = f"{topic}/{partition}"
                position = first - _first_of_run(name)
                tick = next((t for t in ticks if t["counts"].get(name, 0) > position), None)
                if tick is not None:
                    oldest = tick["sent"] if oldest is None else min(oldest, tick["sent"])
        if oldest is not None:
            found.append(committed - oldest)
    found.sort()
    if not found:
        return {"batches": 0}
    return {
        "batches": len(found),
        "p50_seconds": round(found[len(found) // 2], 3),
        "p95_seconds": round(found[min(len(found) - 1, int(len(found) * 0.95))], 3),
    }


def _table(report: dict[str, Any]) -> str:
    lines = ["| peer | changes/s | seconds | batches | latency p50 | p95 | kept up |", "|---|---|---|---|---|---|---|"]
    for peer, found in report["peers"].items():
        t, lat = found.get("throughput", {}), found.get("latency", {})
        rate = round(t["events"] / t["seconds"]) if t.get("seconds") else "—"
        cells = [rate, t.get("seconds", "—"), t.get("batches", "—"), lat.get("p50_seconds", "—")]
        cells += [lat.get("p95_seconds", "—"), lat.get("kept_up", "—")]
        lines.append(f"| {peer} | " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
