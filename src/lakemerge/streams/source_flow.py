"""A source's stream: one Kafka query for a whole database's Debezium topics, each micro-batch split
by topic into its tables' records and applied as one transaction over the tables it touches.

A micro-batch is known by its records' offsets, as a group's stream's is: the source's points
record the offsets its transactions applied, each table's commits the offsets of its own records,
so that a micro-batch applies only the records above them whatever its id, and a query started
without a checkpoint starts where the points end (:mod:`lakemerge.streams.resume`). Each point
lists every table of the source created so far: those a transaction does not touch keep the
version the point before gave them.

Before anything of a micro-batch is applied, its topics are looked at in one Spark job: each
table's key is the fields of its events' message keys (the JSON converter's schema, or the key
object's fields without one), and a table whose events have no message key (a table without a
primary key) stops the stream naming the first such event's topic, partition and offset. So
does a table whose message keys name other columns than the key it was created with (its primary
key changed in the database), unless its ``[tables.NAME]`` section gives its key: each point records
the key of every table of the source, so the stored key is known without reading the table.

Each point also records every table's path: over Spark Connect, where the server's Python applies
the micro-batches, the client reports their batches from the commits of the tables the last point
lists (:mod:`lakemerge.streams.served`), whichever tables the source created meanwhile.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakemerge.batch.frames import kafka_ranges, newer
from lakemerge.batch.groups import Mirrored, group_config, source_state
from lakemerge.batch.transactions import Transaction, source_of
from lakemerge.config import GroupConfig, PipelineConfig, TableConfig
from lakemerge.errors import ConfigError, InputError
from lakemerge.results import BatchResult
from lakemerge.spark.cache import persisted
from lakemerge.streams import resume, whole
from lakemerge.streams.flows import Flow
from lakemerge.streams.sources import kafka_frame
from lakemerge.table.offsets import Ranges, ends, unapplied

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: How a message key is described in the look at a micro-batch's topics: by its schema (the JSON
#: converter with schemas), by its JSON object's fields (without), or as neither.
_SCHEMA, _FIELDS, _UNREADABLE = "schema ", "fields ", "unreadable"


@dataclass(frozen=True)
class _Topic:
    """What one topic's records in a micro-batch say of their table's key: the distinct message
    keys' descriptions, and the first record (partition, offset) without a key, or with one that
    is not a JSON object, or with a key."""

    keys: frozenset[str]
    keyless: tuple[int, int] | None
    unreadable: tuple[int, int] | None
    first: tuple[int, int] | None = None


def source_flow(pipeline: PipelineConfig, name: str) -> Flow:
    """The stream of the pipeline's source ``name`` (see the module)."""
    source = pipeline.sources[name]
    points = group_config(pipeline, name)

    def apply(frame: DataFrame, epoch: int) -> list[BatchResult]:
        kept, records = persisted(frame)
        try:
            return _apply(pipeline, name, records)
        finally:
            kept.unpersist()

    def current(spark: SparkSession) -> tuple[TableConfig, ...]:
        found = []
        for table, mirrored in sorted(source_state(spark, points).tables.items()):
            with contextlib.suppress(ValueError):  # (settings changed since: its batches are not reported)
                found.append(source.named(table, mirrored.path, mirrored.key))
        return tuple(found)

    def read(spark: SparkSession) -> DataFrame:
        return kafka_frame(spark, source, starting=resume.starting(spark, source, source_state(spark, points).offsets))

    return Flow(
        source.name or f"stream:{name}",
        read,
        source.checkpoint,
        source.interval_seconds,
        apply,
        (),
        source_of(name),
        current,
    )


def _apply(pipeline: PipelineConfig, name: str, records: DataFrame) -> list[BatchResult]:
    """One micro-batch of the source ``name``: a transaction over the tables its records touch
    (with whole source transactions, those of its records and of the staged ones that apply now)."""
    from pyspark.sql import functions as F

    source = pipeline.sources[name]
    spark = records.sparkSession
    ranges = kafka_ranges(records)
    state = source_state(spark, group_config(pipeline, name))
    fresh = unapplied(ranges, state.offsets)
    if not fresh:
        return []  # (every record was applied: by a transaction before a lost checkpoint, say)
    number = (state.last or 0) + 1
    where = f"{source_of(name)}, batch {number}"
    with whole.round_of(source, newer(records, ranges, state.offsets), fresh, state.staging, where=where) as now:
        tables = _tables(pipeline, name, _topics(now.records), state.tables, where=where)
        if not tables and now.staging == state.staging:
            return []  # (only topics that are not the source's tables, or excluded ones)
        group = GroupConfig.model_construct(tables=tuple(sorted(tables)), state=source.state, stream=None)
        mirrored = pipeline.model_copy(
            update={
                "tables": {**pipeline.tables, **{t: table for t, (table, _) in tables.items()}},
                "groups": {**pipeline.groups, name: group},
            }
        )
        tx = Transaction(
            mirrored, name, number, spark, carry=True, mirrored=state.tables, read=ends(fresh), staging=now.staging
        )
        for table, (_, topics) in sorted(tables.items()):
            part: Ranges = {p: r for p, r in now.ranges.items() if p[0] in topics}
            tx.apply(table, now.records.filter(F.col("topic").isin(sorted(topics))), records=source, ranges=part)
        found = tx.commit().batches
    return [r for r in found if r.version is not None or r.applied_before]


def _topics(records: DataFrame) -> dict[str, _Topic]:
    """What each topic's records say of their message keys (one Spark job, a row per topic)."""
    from pyspark.sql import functions as F

    key = F.col("key")
    text = key.cast("string")
    schema = F.get_json_object(text, "$.schema")
    fields = F.to_json(F.json_object_keys(text))
    described = (
        F.when(schema.isNotNull(), F.concat(F.lit(_SCHEMA), schema))
        .when(fields.isNotNull(), F.concat(F.lit(_FIELDS), fields))
        .otherwise(F.lit(_UNREADABLE))
    )
    place = F.struct(F.col("partition"), F.col("offset"))
    rows = (
        records.groupBy("topic")
        .agg(
            F.collect_set(F.when(key.isNotNull() & (described != _UNREADABLE), described)).alias("keys"),
            F.min(F.when(key.isNull(), place)).alias("keyless"),
            F.min(F.when(key.isNotNull() & (described == _UNREADABLE), place)).alias("unreadable"),
            F.min(F.when(key.isNotNull(), place)).alias("first"),
        )
        .collect()
    )

    def at(value: object) -> tuple[int, int] | None:
        return None if value is None else (int(value[0]), int(value[1]))  # type: ignore[index]

    return {
        str(r["topic"]): _Topic(frozenset(r["keys"] or ()), at(r["keyless"]), at(r["unreadable"]), at(r["first"]))
        for r in rows
    }


def _tables(
    pipeline: PipelineConfig,
    name: str,
    topics: dict[str, _Topic],
    stored: dict[str, Mirrored],
    *,
    where: str,
) -> dict[str, tuple[TableConfig, set[str]]]:
    """The tables of the source ``name`` the topics' records go to, each with its topics
    (``stored``: the key of each table the source created, as its last point records them).

    Raises:
        InputError: a table's events without a message key (and no key in its settings), or with
            keys that are not JSON objects, name different columns, or name other columns than the
            table's stored key.
        ConfigError: two topics' tables get one name, a table's name is one the pipeline gives a
            table outside the source, or the source's settings do not hold for a table.
    """
    source = pipeline.sources[name]
    found: dict[str, tuple[TableConfig, set[str]]] = {}
    for topic, seen in sorted(topics.items()):
        if not source.includes(topic):
            continue
        table = source.name_of(topic)
        if table in pipeline.tables:
            raise ConfigError(
                f"topic {topic} is the source's table '{table}', which [tables.{table}] defines outside the "
                f'source: give that section source = "{name}", or the source another table_name',
                key=f"sources.{name}.table_name",
                source=pipeline.source,
            )
        if table in found:
            other = next(iter(found[table][1]))
            raise ConfigError(
                f"topics {other} and {topic} both become table '{table}': name the source's tables by more "
                'of their topic (table_name = "{schema}_{table}")',
                key=f"sources.{name}.table_name",
                source=pipeline.source,
            )
        key = () if source.keyed(table) else _key(topic, table, seen, where)
        if key and table in stored and set(stored[table].key) != set(key):
            partition, offset = seen.first or (-1, -1)
            raise InputError(
                f"table '{table}' has the key {list(stored[table].key)}, its events' message keys name "
                f"{list(key)} (the table's primary key changed in the database): give the table its key "
                f"in [tables.{table}] with source set, or mirror it into a new table",
                path=f"{where}, topic {topic}, partition {partition}, offset {offset}",
            )
        try:
            found[table] = (source.table(topic, key), {topic})
        except ValueError as exc:
            raise ConfigError(
                f"table '{table}' (topic {topic}): {exc}", key=f"sources.{name}", source=pipeline.source
            ) from None
    return found


def _key(topic: str, table: str, seen: _Topic, where: str) -> tuple[str, ...]:
    """The key columns of ``topic``'s table: its message keys' fields.

    Raises:
        InputError: an event without a message key, or one that is not a JSON object, or keys naming
            different columns.
    """
    if seen.keyless is not None:
        partition, offset = seen.keyless
        raise InputError(
            f"table '{table}' has no key: its events have no message key (Debezium sends none for a table "
            "without a primary key); give the table one (Debezium's message.key.columns, or key in "
            f"[tables.{table}] with source set), or exclude it",
            path=f"{where}, topic {topic}, partition {partition}, offset {offset}",
        )
    if seen.unreadable is not None:
        partition, offset = seen.unreadable
        raise InputError(
            f"table '{table}': the message key is not a JSON object (Kafka Connect's JSON converter writes "
            "Debezium's keys as one)",
            path=f"{where}, topic {topic}, partition {partition}, offset {offset}",
        )
    named = {_fields(described) for described in seen.keys}
    if len(named) != 1 or not next(iter(named)):
        shown = " and ".join(str(list(n)) for n in sorted(named))
        raise InputError(
            f"table '{table}': its events' message keys name different columns ({shown}) in one micro-batch",
            path=f"{where}, topic {topic}",
        )
    return next(iter(named))


def _fields(described: str) -> tuple[str, ...]:
    """The fields a message key's description names, in its order (none for a key schema that is
    not a struct of fields)."""
    if described.startswith(_FIELDS):
        names = json.loads(described.removeprefix(_FIELDS))
        return tuple(str(n) for n in names) if isinstance(names, list) else ()
    try:
        schema = json.loads(described.removeprefix(_SCHEMA))
    except ValueError:
        return ()
    fields = schema.get("fields") if isinstance(schema, dict) else None
    if not isinstance(fields, list):
        return ()
    return tuple(str(f["field"]) for f in fields if isinstance(f, dict) and isinstance(f.get("field"), str))
