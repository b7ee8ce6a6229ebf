"""A source's transactions kept whole: which of a round's events apply now, and which wait.

With Debezium's ``provide.transaction.metadata``, each change event names its transaction
(``transaction.id``, and its place among the transaction's events of its table,
``data_collection_order``), and the transaction topic gets a ``BEGIN`` and an ``END`` record per
transaction, the ``END`` counting its events per table (``data_collections``). A round of a source
is its staged events (:mod:`lakemerge.streams.staging`) and the micro-batch's new ones. Of them,
a transaction applies when its ``END`` arrived with every counted event of the source's tables;
one still missing some *waits*, and so does every event after one that waits in the same topic
partition: Debezium writes each partition's events in the order the database committed them, so
what applies is, in every partition, everything before the first event that waits. Events without
a transaction (a snapshot's, or a connector without the metadata) apply as they come, within that
order. So the tables of the source, at every point of the source, hold a prefix of the database's
transactions, each entirely.

A waiting transaction's events and ``END`` record are staged until the rest arrives; one that has
waited longer than the source's ``transaction_timeout`` stops the stream naming where its first
event is, and what is missing.

:func:`decide` is the rule alone, on what :func:`gather` collects of a round (a row per transaction
and partition: metadata only, never the events' rows).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from lakemerge.config.source import SourceConfig
from lakemerge.errors import InputError
from lakemerge.spark.cache import persisted
from lakemerge.streams import staging
from lakemerge.table.offsets import Ends, Partition, Ranges

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Set on the staged rows of a round (``true``) and the micro-batch's (``false``).
STAGED = "_lm_staged"
#: Set on the staged ``END`` records of transactions applied already.
CLOSED = "_lm_closed"
#: What a round reads of each record's value once (:func:`_described`), dropped before it is applied.
_KIND, _TRANSACTION, _ORDER, _COLLECTIONS = "_lm_kind", "_lm_transaction", "_lm_order", "_lm_collections"
_DESCRIBED = (_KIND, _TRANSACTION, _ORDER, _COLLECTIONS)


@dataclass(frozen=True)
class Seen:
    """A round's change events of one transaction (``None``: outside any) in one partition of a
    table's topic: their first and last offset, how many distinct events (by their order within
    the transaction's events of the table) and the earliest Kafka timestamp (ms)."""

    transaction: str | None
    topic: str
    partition: int
    first: int
    last: int
    events: int
    at: int


@dataclass(frozen=True)
class End:
    """A transaction's ``END`` record: its events per data collection (``schema.table``), where it
    is, and whether its transaction was applied already (``closed``: the END is kept staged)."""

    transaction: str
    counts: Mapping[str, int]
    topic: str
    partition: int
    offset: int
    at: int
    closed: bool = False


@dataclass(frozen=True)
class Waiting:
    """A transaction that waits for some of its events or its ``END``: where its first event (or
    its ``END``, when none of its events came) is, since when (ms), and what is missing."""

    transaction: str
    topic: str
    partition: int
    offset: int
    at: int
    missing: str


@dataclass(frozen=True)
class Decision:
    """What a round applies and what waits.

    Attributes:
        cuts: per partition of a table's topic where something waits, its first waiting offset:
            the records there from it on wait.
        held: the transactions that wait (their ``END`` records wait with them).
        ranges: per partition of a table's topic, the offsets of what applies (first, one past
            the last).
        waiting: the transactions missing events or their ``END`` (not those only waiting behind
            one), oldest first.
    """

    cuts: Ends
    held: frozenset[str]
    ranges: Ranges
    waiting: tuple[Waiting, ...] = field(default=())


def decide(
    seen: Iterable[Seen], ends: Iterable[End], *, counted: Callable[[str], bool], topic_of: Callable[[str], str | None]
) -> Decision:
    """The round's decision (see the module). ``counted``: whether a data collection is one of
    the source's tables (an excluded table's events are not waited for); ``topic_of``: the topic of
    a data collection, among those of the round (``None``: none of its events came)."""
    ends = list(ends)
    closed = {e.transaction for e in ends if e.closed}
    seen = [replace(s, transaction=None) if s.transaction in closed else s for s in seen]
    closing = {e.transaction: e for e in ends if e.transaction not in closed}
    events: dict[tuple[str, str], int] = {}
    for s in seen:
        if s.transaction is not None:
            events[(s.transaction, s.topic)] = events.get((s.transaction, s.topic), 0) + s.events
    missing: dict[str, str] = {}
    for transaction in {s.transaction for s in seen if s.transaction is not None} | set(closing):
        end = closing.get(transaction)
        if end is None:
            missing[transaction] = "its END record"
            continue
        short = []
        for collection, count in sorted(end.counts.items()):
            topic = topic_of(collection)
            arrived = events.get((transaction, topic), 0) if topic is not None else 0
            if counted(collection) and arrived < count:
                short.append(f"{count - arrived} of its {count} events of {collection}")
        if short:
            missing[transaction] = ", ".join(short)
    held = set(missing)
    cuts: Ends = {}
    while True:
        cuts = _cuts(seen, held)
        blocked = {
            s.transaction
            for s in seen
            if s.transaction is not None and s.transaction not in held and s.last >= cuts.get(_at(s), s.last + 1)
        }
        # (the transaction topic has the ENDs in commit order: those after one that waits wait too)
        first: Ends = {}
        for e in closing.values():
            if e.transaction in held:
                first[(e.topic, e.partition)] = min(e.offset, first.get((e.topic, e.partition), e.offset))
        blocked |= {
            e.transaction
            for e in closing.values()
            if e.transaction not in held and e.offset >= first.get((e.topic, e.partition), e.offset + 1)
        }
        if not blocked:
            break
        held |= blocked
    return Decision(cuts, frozenset(held), _ranges(seen, cuts), _waiting(seen, closing, missing))


def _at(seen: Seen) -> Partition:
    return (seen.topic, seen.partition)


def _cuts(seen: list[Seen], held: set[str]) -> Ends:
    cuts: Ends = {}
    for s in seen:
        if s.transaction in held:
            cuts[_at(s)] = min(s.first, cuts.get(_at(s), s.first))
    return cuts


def _ranges(seen: list[Seen], cuts: Ends) -> Ranges:
    bounds: dict[Partition, tuple[int, int]] = {}
    for s in seen:
        first, last = bounds.get(_at(s), (s.first, s.last))
        bounds[_at(s)] = (min(first, s.first), max(last, s.last))
    found: Ranges = {}
    for partition, (first, last) in bounds.items():
        end = cuts.get(partition, last + 1)
        if first < end:
            found[partition] = (first, end)
    return found


def _waiting(seen: list[Seen], closing: Mapping[str, End], missing: Mapping[str, str]) -> tuple[Waiting, ...]:
    found: dict[str, Waiting] = {}
    for s in sorted(seen, key=lambda s: (s.at, s.topic, s.partition, s.first)):
        t = s.transaction
        if t is not None and t in missing and t not in found:
            found[t] = Waiting(t, s.topic, s.partition, s.first, s.at, missing[t])
    for transaction, end in closing.items():
        if transaction in missing and transaction not in found:
            found[transaction] = Waiting(
                transaction, end.topic, end.partition, end.offset, end.at, missing[transaction]
            )
    return tuple(sorted(found.values(), key=lambda w: (w.at, w.transaction)))


# -- a round of a source ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    """What a micro-batch of a source applies: its ``records`` (Kafka records), their offsets per
    partition (``ranges``), and the version of the staging table that goes with the point after it
    (that of the point before when nothing was staged or released)."""

    records: DataFrame
    ranges: Ranges
    staging: int | None


@contextmanager
def round_of(
    source: SourceConfig, fresh: DataFrame, ranges: Ranges, staged: int | None, *, where: str
) -> Iterator[Round]:
    """The round of a micro-batch's ``fresh`` records (spanning ``ranges``), with the records that
    waited at the staging version ``staged``: with whole transactions (the source's
    ``transactions``), what waits now is staged (one Delta commit) before the round is given.

    Raises:
        InputError: a transaction has waited longer than the source's ``transaction_timeout``.
    """
    if source.transactions != "whole":
        yield Round(fresh, ranges, staged)
        return
    from pyspark.sql import functions as F

    spark = fresh.sparkSession
    if "timestamp" not in fresh.columns:  # (records not from Spark's Kafka source: arrived now)
        fresh = fresh.withColumn("timestamp", F.current_timestamp())
    both = fresh.withColumn(STAGED, F.lit(False)).withColumn(CLOSED, F.lit(None).cast("boolean"))
    earlier = staging.staged(spark, source.staging_path, staged)
    if earlier is not None:
        both = both.unionByName(earlier.withColumn(STAGED, F.lit(True)), allowMissingColumns=True)
    kept, records = persisted(_described(both))
    try:
        seen, ends, was_staged = gather(records, tables=source.includes)
        topics = sorted({s.topic for s in seen})
        decision = decide(
            seen,
            ends,
            counted=lambda collection: source.includes(f"_.{collection}"),
            topic_of=lambda collection: next((t for t in topics if t.endswith(f".{collection}")), None),
        )
        _overdue(source, decision, where)
        version = staged
        waiting = waits(decision)
        if decision.cuts or decision.held or was_staged or ends:
            # (an applied transaction's END stays staged, closed, for the timeout: its events sent
            # again by Kafka Connect then apply as they come, not wait for an END sent once)
            cutoff = F.lit(int((time.time() - source.timeout_seconds) * 1000))
            closing = ~waiting & _is_end() & (F.unix_millis("timestamp") >= cutoff)
            kept_rows = records.filter(waiting | closing).withColumn(CLOSED, closing).drop(STAGED, *_DESCRIBED)
            version = staging.stage(spark, source.staging_path, kept_rows)
        yield Round(records.filter(~waiting).drop(STAGED, CLOSED, *_DESCRIBED), decision.ranges, version)
    finally:
        kept.unpersist()


def _overdue(source: SourceConfig, decision: Decision, where: str) -> None:
    """Raise InputError naming the oldest transaction that has waited longer than the source's
    ``transaction_timeout``, if one has."""
    now = time.time() * 1000
    for waiting in decision.waiting:
        if now - waiting.at <= source.timeout_seconds * 1000:
            continue
        table = f"table '{source.name_of(waiting.topic)}', " if source.includes(waiting.topic) else ""
        hint = ""
        if waiting.missing.startswith("its END"):
            hint = " (is Debezium's transaction topic, <topic.prefix>.transaction, among the topics subscribed?)"
        raise InputError(
            f"{table}source transaction {waiting.transaction} still misses {waiting.missing} after "
            f"{(now - waiting.at) / 1000:.0f} s (transaction_timeout = '{source.transaction_timeout}'){hint}",
            path=f"{where}, topic {waiting.topic}, partition {waiting.partition}, offset {waiting.offset}",
        )


# -- what a round's records say, gathered in one Spark job ---------------------------------------------


def gather(records: DataFrame, *, tables: Callable[[str], bool]) -> tuple[list[Seen], list[End], bool]:
    """What ``records`` (Kafka records of a source, staged and new, :data:`STAGED` telling which,
    described by :func:`_described`)
    say of their transactions: the :class:`Seen` of the change events of the topics ``tables``
    accepts, the ``END`` records, and whether any record was staged (one Spark job, a row per
    transaction and partition)."""
    import json

    from pyspark.sql import functions as F

    rows = (
        records.where(F.col(_KIND) != "begin")
        .groupBy("topic", "partition", _TRANSACTION, _KIND)
        .agg(
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
            F.count(F.lit(1)).alias("count"),
            F.count_distinct(_ORDER).alias("orders"),
            F.min(F.unix_millis("timestamp")).alias("at"),
            F.max(_COLLECTIONS).alias("collections"),
            F.max(STAGED).alias("staged"),
            F.max(CLOSED).alias("closed"),
        )
        .collect()
    )
    seen: list[Seen] = []
    ends: list[End] = []
    staged = False
    for r in rows:
        staged = staged or bool(r["staged"])
        topic, partition, transaction = str(r["topic"]), int(r["partition"]), r[_TRANSACTION]
        if r[_KIND] == "end" and transaction is not None:
            counts = {
                str(c["data_collection"]): int(c["event_count"] or 0) for c in json.loads(r["collections"] or "[]")
            }
            place = (topic, partition, int(r["first"]), int(r["at"] or 0))
            ends.append(End(str(transaction), counts, *place, closed=bool(r["closed"])))
        elif r[_KIND] == "event" and tables(topic):
            events = int(r["orders"]) if transaction is not None and r["orders"] else int(r["count"])
            found = Seen(transaction, topic, partition, int(r["first"]), int(r["last"]), events, int(r["at"] or 0))
            seen.append(found)
    return seen, ends, staged


def waits(decision: Decision) -> Column:
    """Whether a record of the round waits: at or after its partition's cut, or the ``END`` of a
    transaction that waits."""
    from pyspark.sql import functions as F

    found = F.lit(False)
    for (topic, partition), cut in sorted(decision.cuts.items()):
        found = found | ((F.col("topic") == topic) & (F.col("partition") == partition) & (F.col("offset") >= cut))
    if decision.held:
        found = found | (_is_end() & F.col(_TRANSACTION).isin(sorted(decision.held)))
    return found


def _is_end() -> Column:
    """A round's record that is an ``END`` (on a frame :func:`_described` made)."""
    from pyspark.sql import functions as F

    return F.col(_KIND) == "end"


def _described(records: DataFrame) -> DataFrame:
    """``records`` with what each says of its transaction, from one parse of its value:
    :data:`_KIND` (``event``, ``begin``, ``end``), :data:`_TRANSACTION`, :data:`_ORDER` (its place
    among its transaction's events of its table) and, for an ``END``, :data:`_COLLECTIONS` (its
    counts per table, as JSON)."""
    from pyspark.sql import functions as F

    kind = F.when(_is_marker(), F.lower(_described_column("status"))).otherwise(F.lit("event"))
    transaction = F.when(_is_marker(), _described_column("id")).otherwise(_described_column("transaction", "id"))
    return records.withColumns(
        {
            _KIND: kind,
            _TRANSACTION: transaction,
            _ORDER: F.when(~_is_marker(), _described_column("transaction", "data_collection_order")),
            _COLLECTIONS: F.when(_is_marker(), F.to_json(_parsed()["data_collections"])),
        }
    )


def _is_marker() -> Column:
    """A transaction topic's ``BEGIN`` or ``END`` record (no ``op``, a ``status``)."""
    status = _described_column("status")
    return status.isin("BEGIN", "END") & _described_column("op").isNull()


def _described_column(*path: str) -> Column:
    """A field of the record's value, whether its envelope carries its schema (``payload``) or not."""
    parsed = _parsed()
    inner, outer = parsed["payload"], parsed
    for name in path:
        inner, outer = inner[name], outer[name]
    from pyspark.sql import functions as F

    return F.coalesce(inner, outer)


def _parsed() -> Column:
    """The parts of a record's value a round looks at (one parse of its JSON)."""
    from pyspark.sql import functions as F

    return F.from_json(F.col("value").cast("string"), _VALUE_SCHEMA, {"mode": "PERMISSIVE"})


#: The parts of a value a round reads, at its top (an event without its schema) and in ``payload``.
_PARTS = (
    "op: STRING, status: STRING, id: STRING, transaction: STRUCT<id: STRING, data_collection_order: BIGINT>, "
    "data_collections: ARRAY<STRUCT<data_collection: STRING, event_count: BIGINT>>"
)
_VALUE_SCHEMA = f"STRUCT<payload: STRUCT<{_PARTS}>, {_PARTS}>"
