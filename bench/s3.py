"""What a batch costs on S3 as its table ages: ``python -m bench.s3 [--ages 10 100 1000]``.

moto's S3 server on 127.0.0.1 (:mod:`bench.moto`) holds a table, its landing zone and its archive;
the same pipeline runs beside it on the local filesystem. Each table is aged by commits of no rows
(the log grows, the table's files stay as they are), each carrying a batch record under lakemerge's
transaction identifier as a batch's commit does (what the ledger walk reads); Delta checkpoints the
log every ten commits, and the ledger is walked every ten, saving the walk beside the table when it
is due, as batches do. At each age a file of ten rows lands and is applied as
``lakemerge run`` applies it (the batch, then the file's move to the archive), three times: once as
a new process's first batch (nothing kept in the process), twice as a process's later batches.
For each, S3A's own request counters (its ``IOStatistics``: GET, HEAD, LIST, PUT, DELETE, COPY and
their sum) and the batch's seconds, against the local filesystem's seconds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.moto import s3a_settings, start_moto

BUCKET = "bench"
#: S3A's counters of requests, by the name the table shows.
REQUESTS = {
    "GET": "action_http_get_request",
    "HEAD": "object_metadata_request",
    "LIST": "object_list_request",
    "PUT": "object_put_request",
    "DELETE": "object_delete_request",
    "COPY": "object_copy_requests",
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.s3", description=__doc__.splitlines()[0])
    parser.add_argument("--ages", type=int, nargs="+", default=[10, 100, 1000], help="batches before measuring")
    args = parser.parse_args()
    import boto3

    import lakemerge
    from lakemerge.spark.packages import with_storage

    work = Path(tempfile.mkdtemp(prefix="lm_bench_s3_"))
    server, endpoint = start_moto(work / "moto.log")
    try:
        boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket=BUCKET)  # fmt: skip
        conf = {f"spark.hadoop.{k}": v for k, v in s3a_settings(endpoint).items()}
        settings = lakemerge.SparkSettings(master="local[2]", app_name="bench-s3", conf=conf)
        spark = lakemerge.get_spark(with_storage(settings, [f"s3a://{BUCKET}"]))
        s3, local = Lake(spark, f"s3a://{BUCKET}/lake"), Lake(spark, str(work / "lake"))
        print("| batches before | first batch of a process: S3 requests (GET/HEAD/LIST/PUT/DELETE/COPY) | s "
              "| later batch: S3 requests | s | local disk, later batch | S3 / local |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        for age in sorted(args.ages):
            s3.age_to(age)
            local.age_to(age)
            first, first_s = s3.file_batch(forget_walk=True)
            kept = [s3.file_batch(forget_walk=False) for _ in range(2)]
            on_disk = [local.file_batch(forget_walk=False)[1] for _ in range(2)]
            later, later_s = kept[-1][0], statistics.median(s for _, s in kept)
            disk_s = statistics.median(on_disk)
            print(
                f"| {age} | {_requests(first)} | {first_s:.2f} | {_requests(later)} | {later_s:.2f} "
                f"| {disk_s:.2f} | {later_s / disk_s:.1f}× |",
                flush=True,
            )
        spark.stop()
    finally:
        server.terminate()
        server.wait(timeout=30)


def _requests(counts: dict[str, int]) -> str:
    return f"{sum(counts.values())} ({'/'.join(str(counts[name]) for name in REQUESTS)})"


class Lake:
    """A table under ``root`` with a CSV landing zone and an archive, and the batches applied so far."""

    def __init__(self, spark: Any, root: str) -> None:
        import lakemerge

        self.spark, self.root, self.batches, self.files = spark, root, 0, 0
        feed = lakemerge.FeedConfig(
            location=(f"{root}/landing",), format="csv", header=True, op_column="op",
            types={"k": "int", "seq": "bigint"}, archive=f"{root}/archive",
        )  # fmt: skip
        self.table = lakemerge.TableConfig(
            name="t", path=f"{root}/t", key=("k",), sequence="seq", feeds=(feed,), max_files_per_batch=1
        )
        self.pipeline = lakemerge.PipelineConfig(tables={"t": self.table})

    def age_to(self, age: int) -> None:
        """Commits until the table has had ``age`` batches: the first a DataFrame batch (which
        creates the table), the others appends of no rows, each carrying a batch record as a file
        batch's commit does (what the ledger walk reads) under lakemerge's transaction identifier."""
        import lakemerge
        from lakemerge.table import ledger

        self.empty = self.spark.createDataFrame([], "k int, seq bigint, v string")
        if self.batches == 0:
            rows = [(k, k, "U", "v") for k in range(10)]
            frame = self.spark.createDataFrame(rows, "k int, seq bigint, op string, v string")
            lakemerge.apply_changes(self.table, frame, source="ager", batch_id=0, spark=self.spark)
            self.batches = 1
        while self.batches < age:
            n = self.batches = self.batches + 1
            record = {
                "batch_id": f"aged-{n}",
                "txn_version": n,
                "files": [{"path": f"{self.root}/landing/aged{n:06d}.csv", "size": 100, "modified": n}],
            }
            with ledger.commit_record(self.spark, record, txn_version=n):
                self.empty.write.format("delta").mode("append").save(self.table.path)
            if n % 10 == 0:  # (as the batches' own walks do: the walk saved when it is due)
                ledger.ledger(self.spark, self.table.path)

    def file_batch(self, *, forget_walk: bool) -> tuple[dict[str, int], float]:
        """One CSV file of ten rows landed, applied and archived; S3A's requests and the seconds."""
        import lakemerge
        from lakemerge.table import ledger

        self.files += 1
        text = "k,seq,op,v\n" + "".join(f"{k},{10**9 + self.files * 10 + k},U,f{self.files}\n" for k in range(10))
        self._write(f"{self.root}/landing/f{self.files:05d}.csv", text)
        if forget_walk:  # (what a new process knows)
            ledger._WALKS.clear()
            ledger._SAVED.clear()
        before = self._counters()
        started = time.perf_counter()
        [result] = lakemerge.run(self.pipeline, max_batches=1, spark=self.spark)
        seconds = time.perf_counter() - started
        after = self._counters()
        assert result.version is not None and result.metrics.updated == 10, result
        self.batches += 1
        return {name: after[key] - before[key] for name, key in REQUESTS.items()}, seconds

    def _write(self, path: str, text: str) -> None:
        jvm = self.spark._jvm
        target = jvm.org.apache.hadoop.fs.Path(path)
        fs = target.getFileSystem(self.spark.sparkContext._jsc.hadoopConfiguration())
        out = fs.create(target, True)
        out.write(bytearray(text.encode()))
        out.close()

    def _counters(self) -> dict[str, int]:
        if not self.root.startswith("s3a:"):
            return dict.fromkeys(REQUESTS.values(), 0)
        jvm = self.spark._jvm
        fs = jvm.org.apache.hadoop.fs.Path(self.root).getFileSystem(self.spark.sparkContext._jsc.hadoopConfiguration())
        counters: Callable[[], Any] = fs.getIOStatistics().counters
        found = counters()
        return {key: int(found.get(key) or 0) for key in REQUESTS.values()}


if __name__ == "__main__":
    main()
