"""Run a pipeline's streams: one Structured Streaming query per table with a ``stream`` section,
each micro-batch applied by ``foreachBatch`` as one batch of the table (a group's stream: one query
for its tables; a source: one query for a whole database's topics, each micro-batch a transaction
over the tables it touches).

Exactly once across crashes: the query's checkpoint holds the offsets (or files) of each
micro-batch before it runs, and a restarted query runs the micro-batch in progress again; the
commit records the Kafka offsets it applied (or its files), so a micro-batch that committed before
the crash commits nothing the second time, whatever its id, and a query whose checkpoint was lost
starts where the tables' offsets end (:mod:`lakemerge.streams.flows`).

Stopping (``stop`` set, e.g. by SIGINT or SIGTERM) waits for the micro-batch in progress to
commit, then stops every query; a micro-batch that would start after that is not applied (its
query ends, and a restart applies it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakemerge.config import PipelineConfig
from lakemerge.errors import ConfigError, LakemergeError, first_line
from lakemerge.results import BatchResult
from lakemerge.spark.backends import backend
from lakemerge.streams import served
from lakemerge.streams.flows import Flow, group_flow, table_flow
from lakemerge.streams.source_flow import source_flow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery


class _Stopping(Exception):
    """A micro-batch that starts once the streams are stopping: not applied (its query ends)."""


@dataclass
class _Gate:
    """Lets a stop wait until no micro-batch is being applied, and keeps the first failure."""

    stop: threading.Event
    busy: int = 0
    failure: BaseException | None = None
    state: threading.Condition = field(default_factory=threading.Condition)

    def enter(self) -> None:
        with self.state:
            if self.stop.is_set():
                raise _Stopping()
            self.busy += 1

    def leave(self, failure: BaseException | None) -> None:
        with self.state:
            self.busy -= 1
            if failure is not None and self.failure is None:
                self.failure = failure
            self.state.notify_all()

    def idle(self) -> None:
        with self.state:
            while self.busy:
                self.state.wait()


def run_streams(
    pipeline: PipelineConfig,
    *,
    spark: SparkSession,
    tables: Sequence[str] | None = None,
    available_now: bool = False,
    stop: threading.Event | None = None,
    on_result: Callable[[BatchResult], None] | None = None,
) -> list[BatchResult]:
    """Run the streams of the pipeline's tables (or of ``tables``) until each stops (``available_now``
    or its trigger ``available_now``: once everything available is applied) or ``stop`` is set;
    the batches committed, each also given to ``on_result``. A group with a ``stream`` section runs
    one query for its tables (each micro-batch a transaction over them), and so does each source
    (all of them, or those ``tables`` names) for the tables of its topics.

    Raises:
        ConfigError: no chosen table has a stream.
        LakemergeError: a micro-batch failed (bad records over the threshold, a schema it cannot
            write...): its error, naming the topic, partition and offset; every query is stopped,
            and nothing of that micro-batch is committed (a restart applies it again).
    """
    flows = _flows(pipeline, tables)
    gate = _Gate(stop or threading.Event())
    results: list[BatchResult] = []
    here = backend(spark).runs_batches

    def starter(flow: Flow) -> Callable[[], StreamingQuery]:
        return lambda: _start(spark, flow, gate, results, on_result, available_now=available_now, here=here)

    def report(result: BatchResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    running = [
        _Running(starter(f), f, seen=None if here else served.versions(spark, f.tables_now(spark))) for f in flows
    ]
    try:
        _wait(running, gate, spark, report)
    finally:
        for run in running:
            if run.query.isActive:
                run.query.stop()
    if gate.failure is not None and not isinstance(gate.failure, _Stopping):
        raise gate.failure
    return results


def _flows(pipeline: PipelineConfig, tables: Sequence[str] | None) -> list[Flow]:
    """The queries to run: one per source (among ``tables``, when they name sources), one per
    streaming group among the chosen tables, one per other table with a stream."""
    sources = [s for s in pipeline.sources if not tables or s in tables]
    named = [t for t in tables or () if t not in pipeline.sources]
    chosen = [t for t in pipeline.tables_named(named) if t.stream is not None] if named or not tables else []
    if not chosen and not sources:
        raise ConfigError(
            "no table has a stream: add a [tables.NAME.stream] or a [sources.NAME] section", source=pipeline.source
        )
    flows: list[Flow] = [source_flow(pipeline, s) for s in sources]
    grouped: set[str] = set()
    for table in chosen:
        group = pipeline.group_of(table.name)
        if group is not None and pipeline.groups[group].stream is not None:
            if group not in grouped:
                grouped.add(group)
                flows.append(group_flow(pipeline, group))
        else:
            flows.append(table_flow(table))
    return flows


@dataclass
class _Running:
    """One query, started again where Spark's Kafka source fails for no reason of the data. ``seen``:
    for a query whose micro-batches the Spark Connect server applies (:mod:`lakemerge.streams.served`),
    the last version of each of its tables' paths whose commits were reported; ``None`` for one
    applied here, whose micro-batches report their results themselves."""

    start: Callable[[], StreamingQuery]
    flow: Flow
    seen: dict[str, int] | None = None
    restarts: int = 0
    progress: object = None
    query: StreamingQuery = field(init=False)

    def __post_init__(self) -> None:
        self.query = self.start()

    def restart(self) -> None:
        self.restarts += 1
        self.query = self.start()


def _start(
    spark: SparkSession,
    flow: Flow,
    gate: _Gate,
    results: list[BatchResult],
    on_result: Callable[[BatchResult], None] | None,
    *,
    available_now: bool,
    here: bool,
) -> StreamingQuery:
    def apply_micro_batch(frame: DataFrame, epoch: int) -> None:
        gate.enter()
        failure: BaseException | None = None
        try:
            for result in flow.apply(frame, epoch):
                results.append(result)
                if on_result is not None:
                    on_result(result)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            gate.leave(failure)

    step = apply_micro_batch if here else served.ServedBatch(flow.apply)
    writer = flow.read(spark).writeStream.queryName(_query_name(flow.name)).foreachBatch(step)
    writer = writer.option("checkpointLocation", flow.checkpoint)
    if available_now or flow.interval is None:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(flow.interval * 1000)} milliseconds")
    if here:
        return writer.start()
    try:
        return writer.start()
    except Exception as exc:  # (the server starts the Python worker of foreachBatch as the query starts)
        raise _unstarted(flow.name, exc) from None


def _unstarted(name: str, error: BaseException) -> LakemergeError:
    """Why a Spark Connect server could not start a stream's query, in one line."""
    if served.missing_lakemerge(error):
        return _no_lakemerge(_query_name(name))
    return ConfigError(
        f"stream {_query_name(name)}: the Spark Connect server could not start the query, whose micro-batches its "
        f"Python applies (foreachBatch): {served.worker_error(error) or first_line(error)}"
    )


def _no_lakemerge(query: str) -> ConfigError:
    return ConfigError(
        f"stream {query}: the Spark Connect server's Python cannot import lakemerge, which applies "
        "each micro-batch there (foreachBatch): install lakemerge in the server's Python (PYSPARK_PYTHON)"
    )


def _wait(running: list[_Running], gate: _Gate, spark: SparkSession, report: Callable[[BatchResult], None]) -> None:
    """Until every query has ended, one failed, or the streams are asked to stop (then, once no
    micro-batch is being applied, stop them)."""
    while True:
        if gate.stop.wait(0.5):
            gate.idle()
            for run in running:
                _between_batches(run)
                run.query.stop()
                _collect(run, spark, report)
            return
        for run in running:
            if run.seen is not None and run.progress != _last_batch(run.query):
                _collect(run, spark, report)
            error = None if run.query.isActive else run.query.exception()
            if error is None:
                continue
            gate.idle()  # (the micro-batch that failed has left: its error, if it raised one, is known)
            _collect(run, spark, report)
            if gate.failure is None and _progress_glitch(run.query) and run.restarts < _RESTARTS:
                run.restart()
                continue
            if gate.failure is None:
                gate.failure = _failure(run, error)
            return
        if gate.failure is not None or not any(run.query.isActive for run in running):
            for run in running:
                _collect(run, spark, report)
            return


def _failure(run: _Running, error: BaseException) -> LakemergeError:
    """The error a query's failure stands for: a served micro-batch's own, else one line of it."""
    found = served.served_error(error)
    if found is not None:
        return found
    if served.missing_lakemerge(error):
        return _no_lakemerge(run.query.name)
    return LakemergeError(f"stream {run.query.name} failed: {served.worker_error(error) or first_line(error)}")


def _last_batch(query: StreamingQuery) -> object:
    """The id of the query's last micro-batch that reported its progress (``None``: none yet)."""
    try:
        progress = query.lastProgress
    except Exception:  # (a query that has ended)
        return None
    return None if progress is None else progress.get("batchId")


def _collect(run: _Running, spark: SparkSession, report: Callable[[BatchResult], None]) -> None:
    """Report what a served query's micro-batches committed since the last look."""
    if run.seen is None:
        return
    run.progress = _last_batch(run.query)
    for result in served.committed(spark, run.flow.tables_now(spark), run.flow.source, run.seen):
        report(result)


def _between_batches(run: _Running, timeout: float = 600.0) -> None:
    """Wait (up to ``timeout`` seconds) until a served query applies no micro-batch, so that stopping
    it does not interrupt one (one applied here is waited for by the gate)."""
    if run.seen is None:
        return
    deadline = time.monotonic() + timeout
    while run.query.isActive and time.monotonic() < deadline:
        try:
            if not run.query.status.get("isTriggerActive"):
                return
        except Exception:
            return
        time.sleep(0.2)


#: How often one query is started again after Spark's Kafka source failed its progress report.
_RESTARTS = 3


def _progress_glitch(query: StreamingQuery) -> bool:
    """Whether the query ended because the Kafka source (Spark 4.1.1) failed to report the progress of
    a micro-batch it ran again after a restart (a null pointer in ``KafkaMicroBatchStream.metrics``,
    SPARK-55271): the micro-batch itself ran and committed, and a query started again continues."""
    try:
        cause = query._jsq.exception().get().getCause()
        frames = [str(f.getClassName()) for f in cause.getStackTrace()[:2]] if cause is not None else []
        return (
            bool(frames)
            and "NullPointerException" in str(cause.getClass().getName())
            and any(f.endswith("KafkaMicroBatchStream$") or f.endswith("KafkaMicroBatchStream") for f in frames)
        )
    except Exception:  # (no JVM exception to inspect: not this failure)
        return False


def _query_name(name: str) -> str:
    """A query name Spark takes (letters, digits, ``_``, ``-``, ``.``, ``:``)."""
    return "".join(c if c.isalnum() or c in "_-.:" else "_" for c in name)
