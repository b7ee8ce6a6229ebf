"""An append whose commit record is made from what the append itself counted: one Spark job.

A batch's commit carries its metrics (:func:`lakemerge.table.ledger.commit_record`), so they must be
known before Delta commits. Through the DataFrame writer, Delta writes and commits in one call, so a
batch had to count its classified changes in a Spark job of their own first (and cache them for the
write). Here lakemerge holds Delta's transaction open instead: the rows are written inside it, a
Spark :class:`~pyspark.sql.Observation` counts the changes as they stream past on their way to the
files, and the record built from those counts goes into the transaction's commit. Nothing is visible
before that commit; an error in between (counts that do not add up, a lost race) leaves only files
no commit refers to, which Delta's VACUUM removes.

The transaction is driven through Delta's JVM classes as delta-spark 4.4 has them (``DeltaLog``,
``WriteIntoDelta``, ``DeltaOperations.Write``): the same command the DataFrame writer runs, split at
the point between its write and its commit. The batch number already committed is read from the
checksum Delta writes beside each commit when it lists the table's transactions (Delta's own lookup
reconstructs the log's whole state first, a Spark job per batch), and recorded as read by the
transaction as Delta's lookup records it, so that Delta still rejects a concurrent commit of the
same number. :func:`supported` checks once per Spark application that they are there with those
shapes (and that ``spark.lakemerge.observedAppend`` is not ``false``); callers use the DataFrame
writer when they are not.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lakemerge.errors import AccountingError
from lakemerge.spark.backends import backend
from lakemerge.spark.jvm import jclass, scala_map, scala_seq
from lakemerge.table.jvm_snapshot import DELTA_LOG, checksum_transaction

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation, SparkSession

#: Session setting that turns the single-job append off (``false``): batches then count their
#: changes in a job of their own and append through the DataFrame writer.
ENABLED_CONF = "spark.lakemerge.observedAppend"

#: How long to wait, after the write, for Spark to hand over the observed counts (they arrive with
#: the end of the write's query, a few milliseconds later).
OBSERVATION_TIMEOUT_S = 120.0

_WRITE = "org.apache.spark.sql.delta.commands.WriteIntoDelta"
_OPERATION = "org.apache.spark.sql.delta.DeltaOperations$Write"
_checked: dict[str, bool] = {}


def supported(spark: SparkSession) -> bool:
    """Whether batches can append with :func:`append_with_record` in this session."""
    if (spark.conf.get(ENABLED_CONF, "true") or "true").strip().lower() == "false":
        return False
    if not backend(spark).jvm:
        return False  # (Delta's transaction is driven in the session's JVM)
    jvm: Any = spark.sparkContext._jvm
    key = str(spark.sparkContext.applicationId)
    if key not in _checked:
        _checked[key] = _shapes_match(jvm)
    return _checked[key]


def _shapes_match(jvm: Any) -> bool:
    try:
        utils = jvm.org.apache.spark.util.Utils
        write = utils.classForName(_WRITE, True, False)
        operation = utils.classForName(_OPERATION, True, False)
    except Exception:
        return False
    constructors = [len(c.getParameterTypes()) for c in write.getConstructors()]
    methods = [len(m.getParameterTypes()) for m in write.getMethods() if m.getName() == "writeAndReturnCommitData"]
    operations = [len(c.getParameterTypes()) for c in operation.getConstructors()]
    return 9 in constructors and 4 in methods and 9 in operations


def observe(frame: DataFrame, counts: Mapping[str, Column]) -> tuple[DataFrame, Callable[[], dict[str, int]]]:
    """``frame`` counting ``counts`` (named aggregate columns) as an action streams it, and a
    function giving those counts once the action has run (waiting at most
    :data:`OBSERVATION_TIMEOUT_S` for Spark to deliver them)."""
    from pyspark.sql import Observation

    observation = Observation(f"lakemerge_{uuid.uuid4().hex}")
    observed = frame.observe(observation, *[column.alias(name) for name, column in counts.items()])
    return observed, lambda: _counts(observation)


def _counts(observation: Observation) -> dict[str, int]:
    java: Any = observation._jo
    future = java.future()
    deadline = time.monotonic() + OBSERVATION_TIMEOUT_S
    while not future.isCompleted():
        if time.monotonic() > deadline:
            raise AccountingError(
                f"internal error: Spark did not deliver the batch's counts within {OBSERVATION_TIMEOUT_S:g} s "
                "of writing its rows; nothing was committed"
            )
        time.sleep(0.002)
    return {name: int(value or 0) for name, value in observation.get.items()}


def append_with_record(
    spark: SparkSession,
    path: str,
    rows: DataFrame,
    *,
    record: Callable[[], str],
    app_id: str,
    txn_version: int,
    properties: Mapping[str, str] | None = None,
) -> int | None:
    """Append ``rows`` to the Delta table at ``path`` (created when missing, new columns added) and
    commit them with ``record()`` (a string) as the commit's userMetadata, under the transaction identifier
    ``app_id`` / ``txn_version``; the version committed. ``properties``: the table's properties when
    this append creates it (an existing table keeps its own).

    ``record`` is called after the rows are written, before the commit: the counts it reads from an
    :func:`observe`-d frame are complete then; what it raises aborts the commit. ``None``: the table
    already holds ``txn_version`` of ``app_id`` (a concurrent writer committed this batch number),
    and nothing was written. A writer that commits the same batch number between this one's start
    and its commit makes Delta reject this commit (``ConcurrentTransactionException``)."""
    session: Any = spark._jsparkSession
    log = jclass(spark, DELTA_LOG).forTable(session, path)
    txn = log.startTransaction()
    if committed_version(txn, app_id) >= txn_version:
        return None
    option = jclass(spark, "scala.Option")
    none = option.empty()
    options = jclass(spark, "org.apache.spark.sql.delta.DeltaOptions")(
        scala_map(spark, {"mergeSchema": "true", "txnAppId": app_id, "txnVersion": str(txn_version)}),
        session.sessionState().conf(),
    )
    append = jclass(spark, "org.apache.spark.sql.SaveMode").Append
    created = scala_map(spark, dict(properties or {}))
    command = jclass(spark, _WRITE)(log, append, options, scala_seq(spark, []), created, rows._jdf, none, none, False)
    written = command.writeAndReturnCommitData(txn, session, none, False)
    metadata = record()
    some = option.apply
    operation = jclass(spark, _OPERATION)(append, none, none, some(metadata), none, none, some(True), none, none)
    committed = txn.commitIfNeeded(written.actions(), operation, written.stringTags())
    return int(committed.get())


def committed_version(txn: Any, app_id: str) -> int:
    """The version of ``app_id``'s idempotent transaction in the snapshot ``txn`` started from,
    recorded as read by ``txn``, so that a concurrent commit of the same identifier fails this
    one's commit. From the snapshot's checksum when it lists the table's transactions (no Spark
    job), else by Delta's own lookup, which reconstructs the snapshot's state first."""
    from py4j.protocol import Py4JError

    listed = checksum_transaction(txn.snapshot(), app_id)
    if listed is not None:
        try:
            reads = txn.readTxn()  # what Delta's lookup records; its conflict check reads it
        except Py4JError:
            reads = None
        if reads is not None:
            reads.addOne(app_id)
            return listed
    return int(txn.txnVersion(app_id))
