"""Two Spark actions, the second's tasks in the idle tail of the first's (lakemerge.spark.tail): they
start once every task of the first's job has, while its last task still runs, and not while a
broadcast the first collects beforehand runs; either action's failure is raised, the other's jobs
cancelled, those it submits later too; a first action failing before it submits a job never starts
the second."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from lakemerge.spark.tail import in_tail


def sleeping(spark: Any, millis: list[int]) -> Any:
    """A frame of one row per partition, the row of partition ``i`` taking ``millis[i]`` ms."""
    from pyspark.sql import functions as F

    delay = F.element_at(F.array(*[F.lit(m) for m in millis]), F.col("id").cast("int") + 1).cast("bigint")
    return spark.range(0, len(millis), 1, len(millis)).select("id", sleep(delay))


def sleep(millis: Any) -> Any:
    from pyspark.sql import functions as F

    return F.call_function("java_method", F.lit("java.lang.Thread"), F.lit("sleep"), millis).alias("s")


def written(frame: Any) -> Callable[[], None]:
    return lambda: frame.write.format("noop").mode("overwrite").save()


def tagged(spark: Any, tag: str, action: Callable[[], None]) -> Callable[[], None]:
    """``action``, its jobs tagged ``tag`` (on the thread that runs it)."""

    def run() -> None:
        spark.sparkContext.addJobTag(tag)
        try:
            action()
        finally:
            spark.sparkContext.removeJobTag(tag)

    return run


def settled(spark: Any) -> None:
    """Wait until Spark's status store has what its listeners were told (jobs end before that)."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()


def tasks(spark: Any, tag: str) -> dict[int, tuple[list[int], int]]:
    """The jobs tagged ``tag``: for each, its tasks' launch times and its completion time (ms)."""
    sc = spark.sparkContext
    store = sc._jsc.sc().statusStore()
    settled(spark)
    found = {}
    for job_id in sc._jsc.sc().statusTracker().getJobIdsForTag(tag):
        job = store.job(job_id)
        launches = []
        stages = job.stageIds().iterator()
        while stages.hasNext():
            listed = store.taskList(stages.next(), 0, 1000)
            launches += [int(listed.apply(i).launchTime().getTime()) for i in range(listed.size())]
        found[int(job_id)] = (sorted(launches), int(job.completionTime().get().getTime()))
    return found


def test_the_second_actions_tasks_start_once_all_the_firsts_have_and_while_its_last_runs(spark: Any) -> None:
    first = tagged(spark, "tail-first", written(sleeping(spark, [1500, 200, 200, 200, 200])))
    then = tagged(spark, "tail-then", written(sleeping(spark, [100, 100])))
    in_tail(spark, first, then)
    [(first_launches, first_end)] = tasks(spark, "tail-first").values()
    [(then_launches, _)] = tasks(spark, "tail-then").values()
    assert len(first_launches) == 5 and len(then_launches) == 2
    assert max(first_launches) <= min(then_launches) < first_end


def test_a_broadcast_the_first_collects_beforehand_does_not_start_the_second(spark: Any) -> None:
    """The first action's broadcast is a job of its own whose tasks all start at once: were it
    counted, the second action's job would come before the first's join, and its tasks first."""
    from pyspark.sql import functions as F

    big, small = sleeping(spark, [300, 300, 300, 300]), sleeping(spark, [800, 800])
    joined = big.join(F.broadcast(small.select(F.col("id").alias("k"))), F.col("id") == F.col("k"), "left_anti")
    first = tagged(spark, "broadcast-first", written(joined))
    then = tagged(spark, "broadcast-then", written(sleeping(spark, [50, 50])))
    in_tail(spark, first, then)
    jobs = tasks(spark, "broadcast-first")
    [join_launches] = [launches for launches, _ in jobs.values() if len(launches) == 4]
    assert len(jobs) == 2  # (the broadcast's, of two tasks, and the join's)
    [(then_launches, _)] = tasks(spark, "broadcast-then").values()
    assert max(join_launches) <= min(then_launches)


def test_the_first_actions_failure_is_raised_and_cancels_the_second(spark: Any) -> None:
    """The second action (a task of 1,200 rows of 0.1 s), started once the first's job was, is
    cancelled rather than waited for, and its cancellation is not what is raised."""
    from pyspark.sql import functions as F

    failing = spark.range(0, 2, 1, 2).select(sleep(F.lit(300).cast("bigint")), F.raise_error(F.lit("bad first")))
    raised_and_cancelled(spark, "bad first", lambda long: (written(failing), written(long)))


def test_a_failure_before_the_first_submits_a_job_never_starts_the_second(spark: Any) -> None:
    ran: list[bool] = []

    def failing() -> None:
        raise ValueError("no job at all")

    with pytest.raises(ValueError, match="no job at all"):
        in_tail(spark, failing, lambda: ran.append(True))
    assert ran == []


def test_the_second_actions_failure_is_raised_and_cancels_the_first(spark: Any) -> None:
    """Raised as the second action's own error, not as the cancellation of the first, whose job
    (a task of 1,200 rows of 0.1 s) is cancelled rather than waited for."""
    from pyspark.sql import functions as F

    failing = spark.range(0, 2, 1, 2).select(F.raise_error(F.lit("bad second")))
    raised_and_cancelled(spark, "bad second", lambda long: (written(long), written(failing)))


def test_the_second_actions_failure_cancels_a_job_the_first_submits_after_it(spark: Any, monkeypatch: Any) -> None:
    """Where Spark's status cannot be read, the second action starts at once; when it fails before
    the first has submitted its job, that job is cancelled as it starts, not run to its end."""
    import threading

    from pyspark.sql import functions as F

    import lakemerge.spark.tail as tail

    monkeypatch.setattr(tail, "_submitted", lambda sc, tag: True)  # (what an unreadable status gives)
    failed = threading.Event()
    failing = spark.range(0, 2, 1, 2).select(F.raise_error(F.lit("bad second")))

    def then() -> None:
        try:
            written(failing)()
        finally:
            failed.set()

    def after_the_failure(action: Callable[[], None]) -> Callable[[], None]:
        return lambda: (failed.wait(60), action())[1]

    raised_and_cancelled(spark, "bad second", lambda long: (after_the_failure(written(long)), then))


def raised_and_cancelled(spark: Any, error: str, actions: Callable[[Any], tuple[Any, Any]]) -> None:
    """``in_tail`` of the two ``actions`` made with a long frame (a task of 1,200 rows of 0.1 s) raises
    ``error`` well before that frame's 120 s, and leaves no job running."""
    from pyspark.sql import functions as F

    long = spark.range(0, 1200, 1, 1).select(sleep(F.lit(100).cast("bigint")))
    settled(spark)
    earlier = {job_id for job_id, *_ in jobs_since(spark, set())}
    # A cancelled task of ``long`` must end at once, not hold its core for the next test: it checks
    # whether it was killed only once per thousand rows of its range (100 s here), so its sleep is
    # interrupted (the threads ``in_tail`` starts inherit the setting).
    spark.sparkContext.setInterruptOnCancel(True)
    started = time.monotonic()
    try:
        with pytest.raises(Exception, match=error):
            in_tail(spark, *actions(long))
    finally:
        spark.sparkContext.setInterruptOnCancel(False)
    took = time.monotonic() - started
    settled(spark)
    assert took < 60, f"raised after {took:.0f} s; the jobs, in order: {jobs_since(spark, earlier)}"
    assert list(spark.sparkContext._jsc.sc().statusTracker().getActiveJobIds()) == []


def jobs_since(spark: Any, earlier: set[int]) -> list[tuple[int, str, str, float]]:
    """The jobs not in ``earlier``: id, status, tags and seconds from submission to completion."""
    listed = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    found = []
    for index in range(listed.size()):
        job = listed.apply(index)
        if int(job.jobId()) in earlier:
            continue
        submitted, completed = job.submissionTime(), job.completionTime()
        seconds = -1.0
        if submitted.isDefined() and completed.isDefined():
            seconds = (completed.get().getTime() - submitted.get().getTime()) / 1000
        found.append((int(job.jobId()), str(job.status()), str(job.jobTags().mkString(",")), seconds))
    return sorted(found)
