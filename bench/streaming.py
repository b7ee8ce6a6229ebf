"""Changes from Kafka into TPC-H ``orders``: lakemerge's streams against a hand-written
``foreachBatch`` + dedupe + MERGE, on the same topic and the same table, in one run.

``python -m bench.streaming [--sf 1] [--percent 1] [--batches 4] [--rate 2000] [--seconds 60]``

- **Throughput**: ``--batches`` change batches of ``--percent`` % of the table's rows (70 % updates,
  20 % inserts, 10 % deletes, some keys twice: ``bench.data``) are produced to one topic as JSON
  messages first; each peer then reads the topic from its start, one change batch's worth of messages
  per micro-batch (``maxOffsetsPerTrigger``: the messages ÷ ``--batches``, so that no micro-batch is a
  remainder of a few messages), until it has applied everything (trigger available-now). Changes per
  second = messages ÷ the query's wall time, and steady (the first micro-batch, which warms the JVM
  up, left out: the other micro-batches' messages ÷ their time).
- **Latency**: each peer streams with a 1-second trigger while a producer sends ``--rate`` messages
  a second for ``--seconds`` seconds; a micro-batch's latency is the time from its oldest message's
  sending to the end of its commit (when its rows are visible to readers). After the producer stops,
  the peer is given up to two minutes to catch up; reported: median and 95th percentile over the
  micro-batches, and whether it kept up (applied every message sent).

Three more peers are floors, not correct streams (their tables hold no comparable checksum):
``append`` parses each micro-batch's messages and appends them to a Delta table of their own (the
least a stream that keeps every change as it comes, as ``log`` mode does, writes: no validation,
ledger, collapse, sequence check or tombstones, and not exactly once); ``append_once`` the same
under Delta's idempotent transaction identifier (``txnAppId``/``txnVersion``: exactly once as Delta's
writer offers it); ``noop`` nothing, which leaves the streaming engine's own cost of a micro-batch.
The harness itself runs a job in a micro-batch only in the latency run (its oldest message's sending
time and its count, one small job for every peer); the throughput run counts a micro-batch's messages
from the query's progress. ``--peers`` picks the peers (default: the four correct ones); ``--no-latency`` skips
the latency runs.

Every peer runs in a fresh process (``python -m bench.streaming --peer NAME ...``), with the same
Spark session settings as the batch harness (``bench.peers.session``) plus Spark's Kafka source, on
the clustered layout of the batch harness; every peer's final table must have the same checksum.
Outputs (JSON and a table) go under ``--out`` (default: the harness's data folder).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import data
from bench.kafka import broker

#: A micro-batch's (commit end, oldest message's sending, messages, micro-batch id).
Timing = tuple[float, float, int, int]
#: What the harness measures of a micro-batch before its peer applies it: (oldest sending, messages).
Probe = Callable[[Any], tuple[float, int]]

PEERS = ("lakemerge", "lakemerge_dv", "lakemerge_log", "hand_merge")
#: Floors: what a stream costs with no correct handling of its changes (see the module).
FLOORS = ("append", "append_once", "noop")
SCHEMA = (
    "o_orderkey BIGINT, o_custkey BIGINT, o_orderstatus STRING, o_totalprice DECIMAL(15,2), o_orderdate DATE, "
    "o_orderpriority STRING, o_clerk STRING, o_shippriority INT, o_comment STRING, seq BIGINT, o_year INT, op STRING, "
    "sent_ms BIGINT"
)


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    if args.peer:
        return _peer(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    source = data.generate(args.sf, os.path.join(args.data, f"sf{args.sf:g}"))
    batches = [
        data.make_batch(
            source, os.path.join(args.data, f"sf{args.sf:g}"), number=n, fraction=args.percent, shape="uniform", seed=n
        )
        for n in range(1, args.batches + 1)
    ]
    report: dict[str, Any] = {"command": " ".join(["python -m bench.streaming", *(argv or sys.argv[1:])]), "peers": {}}
    with broker(Path(args.data) / "kafka", partitions=2) as bootstrap:
        topic = f"orders-{int(time.time())}"
        messages = _produce_batches(bootstrap, topic, [b.path for b in batches])
        per_trigger = -(-messages // len(batches))  # equal micro-batches, no remainder of a few messages
        for peer in args.peers:
            found = _run_peer(args, peer, bootstrap=bootstrap, topic=topic, source=source, per_trigger=per_trigger)
            found["messages"] = messages
            report["peers"][peer] = {"throughput": found}
        for peer in args.peers if args.latency_runs else ():
            report["peers"][peer]["latency"] = _run_peer(
                args, peer, bootstrap=bootstrap, topic=f"{topic}-latency-{peer}", source=source, latency=True
            )
    (out / "streaming.json").write_text(json.dumps(report, indent=2))
    print(_table(report))
    return 0


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.streaming")
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--percent", type=float, default=1.0, help="each change batch, as a share of the table")
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--rate", type=int, default=2000, help="messages a second in the latency run")
    parser.add_argument("--seconds", type=int, default=60, help="how long the latency run produces")
    parser.add_argument("--peers", nargs="+", default=list(PEERS), choices=PEERS + FLOORS)
    parser.add_argument("--no-latency", dest="latency_runs", action="store_false", help="skip the latency runs")
    parser.add_argument("--data", default=data.ROOT)
    parser.add_argument("--out", default=data.OUT)
    parser.add_argument("--peer", choices=PEERS + FLOORS, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    parser.add_argument("--per-trigger", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--latency", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _spark() -> Any:
    """The batch harness's session settings (``bench.peers.BASE_CONF``), with Spark's Kafka source."""
    from bench.peers import BASE_CONF
    from lakemerge.config.spark import SparkSettings
    from lakemerge.spark import get_spark
    from lakemerge.spark.versions import installed_pairing

    settings = SparkSettings(
        master="local[2]", app_name="bench", conf=dict(BASE_CONF), packages=(installed_pairing().kafka,)
    )
    return get_spark(settings)


def _produce_batches(bootstrap: str, topic: str, batches: Sequence[str]) -> int:
    """Send every change batch's rows to ``topic`` as JSON messages keyed by the order key (Kafka
    partitions them by key), batch after batch; the number of messages."""
    code = (
        "import sys, json\n"
        "from bench.streaming import _send_batches\n"
        "print(json.dumps(_send_batches(sys.argv[1], sys.argv[2], sys.argv[3:])))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, bootstrap, topic, *batches], capture_output=True, text=True, check=True
    )
    return int(json.loads(done.stdout.strip().splitlines()[-1]))


def _send_batches(bootstrap: str, topic: str, batches: Sequence[str]) -> int:
    from pyspark.sql import functions as F

    spark = _spark()
    sent = 0
    for path in batches:
        frame = spark.read.parquet(path).withColumn("sent_ms", F.lit(0).cast("bigint"))
        messages = frame.select(F.col(data.KEY).cast("string").alias("key"), F.to_json(F.struct("*")).alias("value"))
        messages.coalesce(1).write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", topic
        ).save()
        sent += frame.count()
    return sent


def _run_peer(
    args: argparse.Namespace,
    peer: str,
    *,
    bootstrap: str,
    topic: str,
    source: str,
    per_trigger: int = 0,
    latency: bool = False,
) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "bench.streaming",
        "--peer",
        peer,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--source",
        source,
        "--data",
        args.data,
        "--per-trigger",
        str(per_trigger),
        "--rate",
        str(args.rate),
        "--seconds",
        str(args.seconds),
    ]
    if latency:
        command.append("--latency")
    done = subprocess.run(command, capture_output=True, text=True, timeout=7200)
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _peer(args: argparse.Namespace) -> int:
    from bench.peers import _create_delta, spark_checksum

    spark = _spark()
    root = Path(args.data) / "streaming" / args.peer / ("latency" if args.latency else "throughput")
    subprocess.run(["rm", "-rf", str(root)], check=True)
    path = str(root / "orders")
    _create_delta(spark, args.source, path, "clustered", deletion_vectors=args.peer == "lakemerge_dv")
    # Per micro-batch: (its commit's end, its oldest message's sending, its messages, its id). The
    # sending time and the count cost a job of their own, so only the latency run asks for them: the
    # throughput run takes each micro-batch's count from the query's progress afterwards.
    timings: list[Timing] = []
    probe = _oldest_sent if args.latency else _unprobed
    if args.peer in FLOORS:
        handler = _floor(args.peer, str(root / "appended"), timings, probe)
    elif args.peer == "hand_merge":
        handler = _hand_merge(path, timings, probe)
    else:
        handler = _lakemerge(args.peer, path, timings, probe)
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.bootstrap)
    reader = reader.option("subscribe", args.topic).option("startingOffsets", "earliest")
    if args.per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", args.per_trigger)
    writer = reader.load().writeStream.foreachBatch(handler).option("checkpointLocation", str(root / "checkpoint"))
    if args.latency:
        result = _latency_run(spark, args, writer, timings)
    else:
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
        started = time.time()  # (the micro-batches' commit ends are wall-clock times too)
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        elapsed = time.time() - started
        counts = {p.batchId: _offsets_read(p) for p in query.recentProgress}
        timings = [(end, sent, counts[epoch], epoch) for end, sent, _, epoch in timings]
        result = {"seconds": round(elapsed, 3), "micro_batches": len(timings)}
        if len(timings) > 1:
            first_end = timings[0][0]
            result["first_batch_seconds"] = round(first_end - started, 3)
            rest = sum(rows for _, _, rows, _ in timings[1:])
            result["steady_per_second"] = round(rest / (timings[-1][0] - first_end))
    if args.peer not in FLOORS:
        result["checksum"] = spark_checksum(spark, args.peer, path)
    print(json.dumps(result))
    return 0


def _latency_run(spark: Any, args: argparse.Namespace, writer: Any, timings: list[Timing]) -> dict[str, Any]:
    """Produce ``--rate`` messages a second for ``--seconds`` seconds while the peer streams with a
    1-second trigger; each micro-batch's latency, from its oldest message's sending to its commit."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    query = writer.trigger(processingTime="1 second").start()
    # The updates to send, numbered into ticks of --rate messages, cached once (the sending then
    # costs each tick one small write).
    rows = spark.read.parquet(args.source).limit(args.rate * args.seconds)
    rows = rows.withColumn("_n", F.row_number().over(Window.orderBy(data.KEY)) - 1)
    rows = rows.withColumn("tick", F.floor(F.col("_n") / args.rate)).drop("_n").cache()
    rows.count()
    stop = time.monotonic() + args.seconds
    tick = 0
    while time.monotonic() < stop and tick < args.seconds:  # (never more ticks than the rows hold)
        now_ms = int(time.time() * 1000)
        frame = rows.filter(F.col("tick") == tick).drop("tick")
        frame = frame.withColumn("seq", F.lit(tick + 1).cast("bigint")).withColumn("op", F.lit("U"))
        frame = frame.withColumn("sent_ms", F.lit(now_ms).cast("bigint"))
        messages = frame.select(F.col(data.KEY).cast("string").alias("key"), F.to_json(F.struct("*")).alias("value"))
        messages.write.format("kafka").option("kafka.bootstrap.servers", args.bootstrap).option(
            "topic", args.topic
        ).save()
        tick += 1
        time.sleep(max(0.0, 1.0 - (time.time() * 1000 - now_ms) / 1000))
    sent = tick * args.rate
    deadline = time.monotonic() + 120
    while sum(rows for _, _, rows, _ in timings) < sent and time.monotonic() < deadline:
        time.sleep(0.5)
    query.stop()
    latencies = sorted(end - sent_at for end, sent_at, _, _ in timings if sent_at > 0)
    applied = sum(rows for _, _, rows, _ in timings)
    if not latencies:
        return {"micro_batches": 0, "sent": sent, "applied": applied}
    return {
        "micro_batches": len(latencies),
        "p50_seconds": round(latencies[len(latencies) // 2], 3),
        "p95_seconds": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))], 3),
        "sent": sent,
        "applied": applied,
        "kept_up": applied >= sent,
    }


def _oldest_sent(frame: Any) -> tuple[float, int]:
    """When the micro-batch's oldest message was sent (seconds), from its ``sent_ms`` (0 when unset),
    and how many messages it holds: one small job over the micro-batch, the same for every peer."""
    from pyspark.sql import functions as F

    found = (
        frame.select(F.get_json_object(F.col("value").cast("string"), "$.sent_ms").cast("bigint").alias("s"))
        .agg(F.min("s"), F.count(F.lit(1)))
        .first()
    )
    return float(found[0] or 0) / 1000.0, int(found[1])


def _offsets_read(progress: Any) -> int:
    """The messages a micro-batch read, from its progress's Kafka offsets (whether or not its peer
    read them: Spark's own input count is of the rows a plan read, none for ``noop``)."""
    (source,) = json.loads(progress.json)["sources"]
    start, end = source["startOffset"] or {}, source["endOffset"]
    return sum(
        int(offset) - int(start.get(topic, {}).get(partition, 0))
        for topic, partitions in end.items()
        for partition, offset in partitions.items()
    )


def _unprobed(frame: Any) -> tuple[float, int]:
    """No job: the throughput run counts a micro-batch's messages from the query's progress."""
    return 0.0, 0


def _lakemerge(peer: str, path: str, timings: list[Timing], probe: Probe) -> Any:
    from bench.peers import lakemerge_table
    from lakemerge import api
    from lakemerge.config.records import RecordsConfig

    mode = {"lakemerge_log": "log", "lakemerge_dv": "deletion_vectors"}.get(peer, "copy_on_write")
    table = lakemerge_table(path, "clustered", mode, "/nonexistent")
    records = RecordsConfig(
        format="json", schema=SCHEMA, op_column="op", upsert_codes=("U",), drop_columns=("sent_ms",)
    )

    def handler(frame: Any, epoch: int) -> None:
        sent, rows = probe(frame)
        api.apply_changes(
            table, frame, source="bench-stream", batch_id=epoch, records=records, spark=frame.sparkSession
        )
        timings.append((time.time(), sent, rows, epoch))

    return handler


def _hand_merge(path: str, timings: list[Timing], probe: Probe) -> Any:
    """What teams write by hand: parse, dedupe to the latest sequence per key, one Delta MERGE."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def handler(frame: Any, epoch: int) -> None:
        sent, count = probe(frame)
        spark = frame.sparkSession
        rows = frame.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("r")).select("r.*").drop("sent_ms")
        latest = Window.partitionBy(data.KEY).orderBy(F.col("seq").desc())
        changes = rows.withColumn("_rn", F.row_number().over(latest)).filter("_rn = 1").drop("_rn")
        columns = [c for c in changes.columns if c != "op"]
        values = {c: f"s.{c}" for c in columns}
        (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(changes.alias("s"), f"t.{data.KEY} = s.{data.KEY}")
            .whenMatchedDelete(condition="s.op = 'D'")
            .whenMatchedUpdate(condition="s.op = 'U' AND s.seq >= t.seq", set=values)
            .whenNotMatchedInsert(condition="s.op = 'U'", values=values)
            .execute()
        )
        timings.append((time.time(), sent, count, epoch))

    return handler


def _floor(peer: str, path: str, timings: list[Timing], probe: Probe) -> Any:
    """The floors' handlers (see the module)."""
    from pyspark.sql import functions as F

    def handler(frame: Any, epoch: int) -> None:
        sent, rows = probe(frame)
        if peer != "noop":
            parsed = frame.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("r")).select("r.*")
            once = {"txnAppId": "bench-floor", "txnVersion": str(epoch)} if peer == "append_once" else {}
            parsed.drop("sent_ms").write.format("delta").mode("append").options(**once).save(path)
        timings.append((time.time(), sent, rows, epoch))

    return handler


def _table(report: dict[str, Any]) -> str:
    lines = [
        "| peer | changes/s (all) | changes/s (steady) | seconds | micro-batches | latency p50 | p95 | kept up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for peer, found in report["peers"].items():
        t, lat = found.get("throughput", {}), found.get("latency", {})
        rate = round(t["messages"] / t["seconds"]) if t.get("seconds") else "—"
        cells = [rate, t.get("steady_per_second", "—"), t.get("seconds", "—"), t.get("micro_batches", "—")]
        cells += [lat.get("p50_seconds", "—"), lat.get("p95_seconds", "—"), lat.get("kept_up", "—")]
        lines.append(f"| {peer} | " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
