"""Two Spark actions, the second's tasks filling the cores the first leaves idle at its end.

A write whose tasks are uneven ends with its largest task running alone while the other cores
wait. A second action that is short and independent of the first can run there: it is started, from
a thread of its own, once the first action's job is submitted. Spark's scheduler runs a job's tasks
before those of a job submitted after it to the same pool (first in, first out: the default, and
within each pool of the FAIR scheduler unless the pool says otherwise), so the second action's tasks
start once all the first's have, and take the cores the first's last tasks leave free. The first
action is meant to be one job of one stage (a scan, joined with a broadcast, written): the jobs of
an earlier stage would let the second action in before the later ones.

The first action's jobs are found by a job tag of their own. A broadcast it collects runs as a job
of its own beforehand, carrying the tag too (with Spark's tag for the broadcast): it does not count,
or the second action's job would come before the one that does the work.

Either action's failure cancels the other's jobs (those submitted after it too) and is raised once
both have stopped; the other's own failure, from that cancellation, is not. Without Python threads
pinned to JVM threads (where a thread's job tags are its own) the two actions run one after the
other.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

A = TypeVar("A")
B = TypeVar("B")

#: How often (seconds) the second action's thread looks for the first action's job.
POLL_SECONDS = 0.05

#: The start of the tag Spark gives the job collecting a broadcast.
_BROADCAST_TAG = "broadcast exchange"


def in_tail(spark: SparkSession, first: Callable[[], A], then: Callable[[], B]) -> tuple[A, B]:
    """Run ``first`` on this thread and ``then`` on another, started once ``first`` has submitted
    its job (or has ended); both results.

    Raises:
        whatever failed first: ``first``'s error, or ``then``'s (the other's jobs are cancelled)."""
    from py4j.clientserver import ClientServer
    from pyspark import InheritableThread

    sc = spark.sparkContext
    if not isinstance(sc._gateway, ClientServer):
        return first(), then()
    run = uuid.uuid4().hex
    first_tag, then_tag = f"lakemerge-first-{run}", f"lakemerge-then-{run}"
    ended = threading.Event()  # ``first`` returned or raised
    failures: list[BaseException] = []  # the first failure of either action, alone
    lock = threading.Lock()
    results: list[B] = []

    def fail(error: BaseException, other_tag: str) -> bool:
        """Record ``error`` and cancel the other action's jobs, unless a failure came first."""
        with lock:
            if failures:
                return False
            failures.append(error)
        sc.cancelJobsWithTag(other_tag)
        return True

    def second() -> None:
        try:
            while not ended.wait(POLL_SECONDS) and not _submitted(sc, first_tag):
                pass
            with lock:
                if failures:
                    return
            sc.addJobTag(then_tag)
            try:
                results.append(then())
            finally:
                sc.removeJobTag(then_tag)
        except BaseException as error:  # (raised on the calling thread)
            if fail(error, first_tag):
                # A job ``first`` submits after that is cancelled too (also one the cancellation
                # came too early for: Spark cancels only the jobs it has started).
                while not ended.wait(POLL_SECONDS):
                    sc.cancelJobsWithTag(first_tag)

    helper = InheritableThread(target=second, daemon=True)  # (the caller's job group, pool, tags)
    helper.start()
    sc.addJobTag(first_tag)
    try:
        value = first()
    except BaseException as error:
        fail(error, then_tag)
    finally:
        sc.removeJobTag(first_tag)
        ended.set()
    while helper.is_alive():  # (a job ``then`` submits after ``first`` failed is cancelled too)
        helper.join(POLL_SECONDS)
        if failures:
            sc.cancelJobsWithTag(then_tag)
    if failures:
        raise failures[0]
    if not results:  # (the thread ended before it ran ``then``, without an error of ``then``'s)
        results.append(then())
    return value, results[0]


def _submitted(sc: Any, tag: str) -> bool:
    """Whether a job tagged ``tag``, not a broadcast's, is running (Spark's status store records a
    job as it starts, where it may record its tasks' starts late, by up to a heartbeat)."""
    try:
        store = sc._jsc.sc().statusStore()
        for job_id in sc._jsc.sc().statusTracker().getJobIdsForTag(tag):
            job = store.job(job_id)
            if any(t.startswith(_BROADCAST_TAG) for t in str(job.jobTags().mkString(",")).split(",")):
                continue  # (a job tag holds no comma)
            if str(job.status()) == "RUNNING":
                return True
    except Exception:  # (Spark's status unreadable: ``then`` starts now, as it would at the end anyway)
        return True
    return False
